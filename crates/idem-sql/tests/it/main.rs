//! idem-sql's integration suite: every test runs on SQLite, PostgreSQL and MySQL (`all_stores!`), on
//! real databases; the crash test kills real consumer processes.

mod api;
mod byte_keys;
mod cancelled_begin;
mod claims;
mod consumer_counts;
mod consumer_names;
mod consumer_reset;
mod consumers;
mod consumers_backfill;
mod crash;
mod crash_consumer;
mod dedup_keys;
mod effects;
mod errors;
mod gaps;
mod handlers;
mod leases;
mod lineage;
mod migrations;
mod mysql;
mod mysql_migrations;
mod open_existing;
mod ordering;
mod properties;
mod provider;
mod replay;
mod replay_child;
mod replay_crash;
mod retention;
mod support;
mod version_batches;

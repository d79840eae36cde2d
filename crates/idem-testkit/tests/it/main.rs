//! The workspace's integration tests: one suite, run on SQLite and PostgreSQL.

mod api;
mod claims;
mod crash;
mod dedup_keys;
mod effects;
mod errors;
mod gaps;
mod leases;
mod module_graph;
mod ordering;
mod properties;
mod retention;
mod support;

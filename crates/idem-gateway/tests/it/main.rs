//! The gateway's integration tests: a real gateway on 127.0.0.1, a real local downstream, real
//! HTTP, on SQLite, PostgreSQL and MariaDB. Retry schedules are in milliseconds; nothing waits for
//! seconds.

#[macro_use]
mod support;

mod admin;
mod admin_access;
mod alerts;
mod breaker;
mod broker_destinations;
mod brokers;
mod cluster;
mod collector;
mod config;
mod console;
mod consumer_reset;
mod consumers;
mod demo;
mod dispatch;
mod faults;
mod filters;
mod handoff;
mod ingest;
mod interop;
mod kafka;
mod migrations;
mod observability;
mod order_rules;
mod pages;
mod pause;
mod rate_limit;
mod rebuild;
mod relays;
mod reload;
mod renames;
mod resend;
mod scenarios;
mod sender_headers;
mod table_lock;
mod tls;
mod traces;
mod unrouted;

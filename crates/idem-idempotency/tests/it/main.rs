//! The integration suite of idem-idempotency: the scenarios over HTTP (a real axum
//! server on 127.0.0.1 and reqwest), the store contract, refusals, transactional mode and
//! expiry, each on SQLite (a temporary file), PostgreSQL (127.0.0.1:5432, a fresh database per
//! test process), MySQL (MariaDB on 127.0.0.1:3306, a fresh database per test process) and
//! Redis (127.0.0.1:6379, a unique key prefix per test; never flushed).

mod registry;
mod rejections;
mod retention;
mod scenarios;
mod store_contract;
mod support;
mod transactional;

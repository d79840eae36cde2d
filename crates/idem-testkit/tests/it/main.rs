//! The workspace's integration tests: one suite, run on SQLite and PostgreSQL.

mod smoke;

//! idem's store on SQLite and PostgreSQL, through sqlx: the inbox (claims), the version guard,
//! fenced leases, retention, and the [`Runner`] that puts claim, version check and the
//! application's writes in one transaction.
//!
//! Most users depend on the `idem` facade crate, which re-exports this crate and `idem-core`;
//! its documentation is the tutorial.

mod backend;
mod error;
mod inbox;
mod lease_store;
pub mod metric_definitions;
mod retention;
mod runner;
mod store;
mod version_guard;

pub use backend::Backend;
pub use error::{BoxError, Error, ErrorKind};
pub use inbox::{Claim, Inbox};
pub use lease_store::LeaseStore;
pub use retention::GcReport;
pub use runner::{BoxFuture, DEFAULT_MAX_ATTEMPTS, Event, Outcome, Runner};
pub use store::{DEFAULT_MAX_CONNECTIONS, PgStore, SqliteStore, Store};
pub use version_guard::VersionGuard;

/// The sqlx this crate is built with, for opening transactions and writing queries with the same
/// types.
pub use sqlx;

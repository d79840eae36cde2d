//! The consumer registry for `idem lint --inventory --database URL`: the rows of
//! `idem_consumers`, as the JSON `idem-lint --registry -` reads. `idem-lint` joins them with the
//! handlers it finds; this side opens the database, so idem-lint holds no database code.

use idem_sql::{Backend, ListOptions, Store};
use serde_json::{Value, json};

use super::idem_tables::{Db, open, with_db};

/// The registry's rows at `url` as a JSON array of `{consumer, kind, first_seen,
/// first_seen_exact, last_seen}` (times in milliseconds since the Unix epoch).
///
/// # Errors
/// A URL of no SQLite, PostgreSQL or MySQL database, a database that cannot be opened (a SQLite file
/// is never created), a database without `idem_consumers` (named in the message: one migrated
/// by an idem older than the consumer registry), or a failed read.
pub(super) async fn rows(url: &str) -> anyhow::Result<Value> {
    with_db!(open(url, "idem_consumers").await?, store => read(&store).await)
}

async fn read<DB: Backend>(store: &Store<DB>) -> anyhow::Result<Value> {
    let reports = store
        .consumers()
        .list(&ListOptions::at(store.now()))
        .await?;
    Ok(Value::Array(
        reports
            .iter()
            .map(|r| {
                json!({
                    "consumer": r.name,
                    "kind": r.kind.as_str(),
                    "first_seen": r.first_seen.as_millis(),
                    "first_seen_exact": r.first_seen_exact,
                    "last_seen": r.last_seen.as_millis(),
                })
            })
            .collect(),
    ))
}

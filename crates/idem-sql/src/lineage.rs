//! Consumer lineage: a new consumer version succeeds an earlier one, and derives its effect keys
//! under the scope of that lineage, not under its own name (docs/design.md C6). A new name is a
//! new cursor — an empty inbox and version guard, so `billing_v2` reads history again — but the
//! effects `billing_v1` ran keep their keys, so replaying the same events runs none of them
//! again.
//!
//! The lineage is recorded in `idem_consumer_lineage` the first time a runner that declares one
//! runs (or [`Runner::effects_scope_name`](crate::Runner::effects_scope_name) is called): a
//! consumer that names itself as its predecessor, a cycle of predecessors, or a lineage other
//! than the one recorded is refused.

use idem_core::Name;

use crate::backend::Backend;
use crate::{Error, Store};

/// What a runner declares about its lineage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Declared {
    /// It succeeds this consumer: it takes that consumer's effects scope.
    Succeeds(Name),
    /// Its effects scope is this name.
    Scope(Name),
}

/// How many predecessors are followed before a chain is taken for a cycle the table cannot
/// hold (every row names a predecessor recorded before it).
const MAX_DEPTH: usize = 1000;

/// Resolves and records `consumer`'s lineage as `declared`; returns its effects scope.
///
/// # Errors
/// [`Error::Lineage`] when it names itself, closes a cycle, or differs from the recorded one;
/// [`Error::Database`].
pub(crate) async fn resolve<DB: Backend>(
    store: &Store<DB>,
    consumer: &Name,
    declared: &Declared,
) -> Result<Name, Error> {
    let refused = |reason: String| Error::Lineage {
        consumer: consumer.to_string(),
        reason,
    };
    let mut conn = store.pool().acquire().await?;
    let (predecessor, scope) = match declared {
        Declared::Scope(scope) => (None, scope.clone()),
        Declared::Succeeds(predecessor) if predecessor == consumer => {
            return Err(refused("it names itself as its predecessor".into()));
        }
        Declared::Succeeds(predecessor) => {
            let scope = scope_of::<DB>(&mut conn, predecessor, consumer)
                .await?
                .map_err(|chain| {
                    refused(format!("succeeding {predecessor} closes a cycle: {chain}"))
                })?;
            (Some(predecessor.clone()), scope)
        }
    };
    let matches = |stored: &(Option<String>, String)| {
        stored.0.as_deref() == predecessor.as_ref().map(Name::as_str) && stored.1 == scope.as_str()
    };
    let now = store.now().as_millis();
    let predecessor_text = predecessor.as_ref().map(Name::as_str);
    if !DB::lineage_insert(
        &mut conn,
        consumer.as_str(),
        predecessor_text,
        scope.as_str(),
        now,
    )
    .await?
    {
        let stored = DB::lineage_get(&mut conn, consumer.as_str()).await?;
        if let Some(stored) = stored.filter(|s| !matches(s)) {
            return Err(refused(format!(
                "it is recorded as {}, with effects scope {}; a consumer's lineage does not change (give the new lineage a new consumer name)",
                stored.0.map_or_else(
                    || "succeeding no consumer".to_owned(),
                    |p| format!("succeeding {p}")
                ),
                stored.1
            )));
        }
    }
    Ok(scope)
}

/// The effects scope of `predecessor`: its recorded scope, or its own name when it has no row;
/// `Err` with the chain when following its predecessors reaches `consumer`.
async fn scope_of<DB: Backend>(
    conn: &mut DB::Connection,
    predecessor: &Name,
    consumer: &Name,
) -> Result<Result<Name, String>, Error> {
    let Some((mut before, scope)) = DB::lineage_get(conn, predecessor.as_str()).await? else {
        return Ok(Ok(predecessor.clone()));
    };
    let mut chain = vec![consumer.to_string(), predecessor.to_string()];
    for _ in 0..MAX_DEPTH {
        let Some(at) = before else {
            break;
        };
        chain.push(at.clone());
        if at == consumer.as_str() {
            return Ok(Err(chain.join(" → ")));
        }
        before = DB::lineage_get(conn, &at).await?.and_then(|(p, _)| p);
    }
    let scope = Name::new("consumer", scope).map_err(|e| Error::CorruptRow {
        table: "idem_consumer_lineage",
        detail: format!("the effects scope of {predecessor} is not a name: {e}"),
    })?;
    Ok(Ok(scope))
}

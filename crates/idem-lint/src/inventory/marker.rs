//! The marker a handler keeps of processed events and whether it commits with the side effect:
//! the decision of `REL_MARKER_OUTSIDE_TX` (`checks::marker_commits`) and `REL_TTL_MARKER`
//! (`checks::ttl_marker_applies`), read per handler.

use crate::analysis::FnFacts;
use crate::checks::{marker_commits, ttl_marker_applies};
use crate::ir::{Call, Expr, OpKind};
use crate::words::norm;

/// The marker a handler keeps of the events it processed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum MarkerKind {
    /// It calls idem (a runner or an inbox claim): idem's inbox row is the marker.
    Idem,
    /// Its own processed-events table: the dedup-table insert `REL_MARKER_OUTSIDE_TX` reads.
    Table,
    /// A Redis key (`SET NX`, a "seen" key or set).
    Redis,
    /// None found.
    None,
}

impl MarkerKind {
    /// `idem`, `table`, `redis` or `none`.
    pub fn as_str(self) -> &'static str {
        match self {
            MarkerKind::Idem => "idem",
            MarkerKind::Table => "table",
            MarkerKind::Redis => "redis",
            MarkerKind::None => "none",
        }
    }
}

/// Whether a handler's marker commits with its side effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum MarkerVerdict {
    /// The marker commits in the transaction of every side effect (idem's claim always does:
    /// docs/design.md C2).
    SameTransaction,
    /// A side effect commits apart from the marker: a crash between the two loses the event or
    /// repeats the effect (what `REL_MARKER_OUTSIDE_TX` or `REL_TTL_MARKER` reports).
    OutsideTransaction,
    /// No marker.
    NotApplicable,
}

impl MarkerVerdict {
    /// `same_transaction`, `outside_transaction` or `not_applicable`.
    pub fn as_str(self) -> &'static str {
        match self {
            MarkerVerdict::SameTransaction => "same_transaction",
            MarkerVerdict::OutsideTransaction => "outside_transaction",
            MarkerVerdict::NotApplicable => "not_applicable",
        }
    }
}

/// The marker kind and verdict of one handler (helpers inlined). idem wins over a table, a
/// table over Redis: the strongest marker is the one a duplicate meets.
pub(super) fn judge(facts: &FnFacts<'_>) -> (MarkerKind, MarkerVerdict) {
    if calls_idem(facts) {
        return (MarkerKind::Idem, MarkerVerdict::SameTransaction);
    }
    let commits = marker_commits(facts);
    let verdict = |apart: bool| {
        if apart {
            MarkerVerdict::OutsideTransaction
        } else {
            MarkerVerdict::SameTransaction
        }
    };
    let tables: Vec<_> = commits.iter().filter(|c| !c.redis).collect();
    if !tables.is_empty() {
        return (
            MarkerKind::Table,
            verdict(tables.iter().any(|c| c.apart.is_some())),
        );
    }
    // A Redis marker deciding a database effect is REL_TTL_MARKER's shape: the two systems
    // never commit together, whether the marker is a SET NX or a "seen" read.
    let ttl = ttl_marker_applies(facts);
    if ttl || commits.iter().any(|c| c.redis) {
        return (
            MarkerKind::Redis,
            verdict(ttl || commits.iter().any(|c| c.apart.is_some())),
        );
    }
    (MarkerKind::None, MarkerVerdict::NotApplicable)
}

/// Whether the handler calls idem: a call on a receiver or function whose name's first word is
/// `idem` (`idem.run`, `idemRunner.run`, `idem_inbox.claim`), or an inbox claim
/// (`inbox.claim(…)`, `inbox.claim_many(…)`).
fn calls_idem(facts: &FnFacts<'_>) -> bool {
    facts.func.ops.iter().any(|op| match &op.kind {
        OpKind::Call(c) => is_idem_call(c),
        OpKind::Assign {
            value: Expr::Call(c),
            ..
        } => is_idem_call(c),
        _ => false,
    })
}

fn is_idem_call(c: &Call) -> bool {
    let idem_word = |s: &str| {
        let first: String = s
            .split(['_', '-', '\''])
            .next()
            .unwrap_or("")
            .chars()
            .take_while(|ch| ch.is_alphanumeric())
            .collect();
        // `idemRunner`: the first camel-case word; `Idem`, `idem`.
        let camel: String = first
            .char_indices()
            .take_while(|(i, ch)| *i == 0 || !ch.is_uppercase())
            .map(|(_, ch)| ch)
            .collect();
        camel.eq_ignore_ascii_case("idem")
    };
    let method = c.method();
    c.callee.iter().any(|s| idem_word(s))
        || (method.starts_with("claim")
            && c.receiver_words()
                .iter()
                .any(|w| norm(w).ends_with("inbox")))
}

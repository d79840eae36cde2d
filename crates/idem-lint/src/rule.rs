//! The checks' stable ids, with the one-line summary and fix each finding carries.

use std::fmt;
use std::str::FromStr;

use crate::error::LintError;

/// A check's stable id. The string form (`REL_KEY_VOLATILE`, …) is what reports, `--rules`,
/// the config file and `idem-lint: allow` comments use; it never changes once released.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum RuleId {
    /// A dedup or idempotency key built from something that changes between deliveries.
    RelKeyVolatile,
    /// "Does it exist?" then "insert it" with nothing to referee two concurrent copies.
    RelCheckThenAct,
    /// The processed marker committed in another transaction than the side effect.
    RelMarkerOutsideTx,
    /// An INSERT of an event's payload with no conflict clause or unique key.
    DatUnconditionalInsert,
    /// An increment on delivery not guarded by an event-id ledger.
    DatRelativeUpdate,
    /// A broker publish or creating HTTP call beside a database write, with no outbox.
    ArcDualWrite,
    /// A duplicate answered with 4xx/5xx or an error.
    RelDuplicateNot2xx,
    /// A webhook signature checked over a parsed or re-serialised body.
    SecSigParsedBody,
    /// State overwritten from an event with no version comparison.
    OrdLastWriteWins,
    /// The delivery acknowledged (ack, offset commit, 2xx) before the effect commits.
    RelAckBeforeCommit,
    /// A broker publish or outbound creating call inside an open database transaction.
    ArcPublishInTx,
    /// The dedup marker kept in another system than the effect (Redis with a TTL, memory).
    RelTtlMarker,
    /// An `idem-lint: allow` comment without a reason.
    LintAllowWithoutReason,
}

impl RuleId {
    /// Every rule, in report order.
    pub const ALL: [RuleId; 13] = [
        RuleId::RelKeyVolatile,
        RuleId::RelCheckThenAct,
        RuleId::RelMarkerOutsideTx,
        RuleId::DatUnconditionalInsert,
        RuleId::DatRelativeUpdate,
        RuleId::ArcDualWrite,
        RuleId::RelDuplicateNot2xx,
        RuleId::SecSigParsedBody,
        RuleId::OrdLastWriteWins,
        RuleId::RelAckBeforeCommit,
        RuleId::ArcPublishInTx,
        RuleId::RelTtlMarker,
        RuleId::LintAllowWithoutReason,
    ];

    /// Every rule's id, comma-separated, in report order (for error messages).
    pub fn id_list() -> String {
        let ids: Vec<&str> = RuleId::ALL.iter().map(|r| r.as_str()).collect();
        ids.join(", ")
    }

    /// The stable id.
    pub fn as_str(self) -> &'static str {
        match self {
            RuleId::RelKeyVolatile => "REL_KEY_VOLATILE",
            RuleId::RelCheckThenAct => "REL_CHECK_THEN_ACT",
            RuleId::RelMarkerOutsideTx => "REL_MARKER_OUTSIDE_TX",
            RuleId::DatUnconditionalInsert => "DAT_UNCONDITIONAL_INSERT",
            RuleId::DatRelativeUpdate => "DAT_RELATIVE_UPDATE",
            RuleId::ArcDualWrite => "ARC_DUAL_WRITE",
            RuleId::RelDuplicateNot2xx => "REL_DUPLICATE_NOT_2XX",
            RuleId::SecSigParsedBody => "SEC_SIG_PARSED_BODY",
            RuleId::OrdLastWriteWins => "ORD_LAST_WRITE_WINS",
            RuleId::RelAckBeforeCommit => "REL_ACK_BEFORE_COMMIT",
            RuleId::ArcPublishInTx => "ARC_PUBLISH_IN_TX",
            RuleId::RelTtlMarker => "REL_TTL_MARKER",
            RuleId::LintAllowWithoutReason => "LINT_ALLOW_WITHOUT_REASON",
        }
    }

    /// What the rule finds, in one sentence.
    pub fn summary(self) -> &'static str {
        match self {
            RuleId::RelKeyVolatile => {
                "dedup or idempotency key built from a value that changes between deliveries of one event"
            }
            RuleId::RelCheckThenAct => {
                "existence check then insert, with no unique key, lock or conflict clause to referee concurrent copies"
            }
            RuleId::RelMarkerOutsideTx => {
                "processed marker committed in another transaction than the side effect"
            }
            RuleId::DatUnconditionalInsert => {
                "insert of a row derived from an event with no conflict clause or unique key a duplicate would hit"
            }
            RuleId::DatRelativeUpdate => "increment on delivery not guarded by an event-id ledger",
            RuleId::ArcDualWrite => {
                "broker publish or creating HTTP call beside a database write, with no outbox or effect ledger"
            }
            RuleId::RelDuplicateNot2xx => {
                "duplicate delivery answered with an error status or exception, so the sender retries it"
            }
            RuleId::SecSigParsedBody => {
                "webhook signature verified over a parsed or re-serialised body instead of the raw bytes"
            }
            RuleId::OrdLastWriteWins => {
                "state overwritten from an event with no comparison of version or time against what is stored"
            }
            RuleId::RelAckBeforeCommit => {
                "delivery acknowledged (broker ack, offset commit, 2xx) before the effect's transaction commits"
            }
            RuleId::ArcPublishInTx => {
                "broker publish or outbound creating call made inside an open database transaction"
            }
            RuleId::RelTtlMarker => {
                "dedup marker kept in another system than the effect (a cache key with a TTL, an in-memory set)"
            }
            RuleId::LintAllowWithoutReason => "idem-lint: allow comment without a reason",
        }
    }

    /// The fix, in one sentence.
    pub fn fix(self) -> &'static str {
        match self {
            RuleId::RelKeyVolatile => {
                "derive the key from the provider's event id or the event's own fields (aggregate id and sequence)"
            }
            RuleId::RelCheckThenAct => {
                "insert with ON CONFLICT DO NOTHING (or SET NX) on a unique key and act only when the insert took"
            }
            RuleId::RelMarkerOutsideTx => {
                "write the marker and the side effect in one transaction, or record the effect in an effect ledger"
            }
            RuleId::DatUnconditionalInsert => {
                "add a unique key on the event id and insert with ON CONFLICT DO NOTHING, or upsert"
            }
            RuleId::DatRelativeUpdate => {
                "claim the event id in a dedup table in the same transaction before applying the increment"
            }
            RuleId::ArcDualWrite => {
                "insert the message into an outbox table in the database transaction and let a relay publish it"
            }
            RuleId::RelDuplicateNot2xx => {
                "answer a duplicate with 200 (or ack it) since it was already applied"
            }
            RuleId::SecSigParsedBody => {
                "verify the signature over the raw request bytes (express.raw, await req.text(), request.body, io.ReadAll)"
            }
            RuleId::OrdLastWriteWins => {
                "add WHERE version < $new (or compare updated_at/sequence) so an older event cannot overwrite a newer state"
            }
            RuleId::RelAckBeforeCommit => {
                "acknowledge, commit the offset or answer 2xx only after the transaction holding the effect has committed"
            }
            RuleId::ArcPublishInTx => {
                "write the message to an outbox table in the transaction, or publish from an after-commit hook"
            }
            RuleId::RelTtlMarker => {
                "claim the event id by a unique key in the effect's own database and transaction; keep the cache only to save work"
            }
            RuleId::LintAllowWithoutReason => {
                "write why the finding is allowed after the rule id: idem-lint: allow RULE_ID reason"
            }
        }
    }

    /// The rule's doc page, relative to the crate (`docs/rules/REL_KEY_VOLATILE.md`).
    pub fn doc_path(self) -> String {
        format!("docs/rules/{}.md", self.as_str())
    }
}

impl fmt::Display for RuleId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for RuleId {
    type Err = LintError;

    /// Parses a stable id (case-insensitive); an unknown one is [`LintError::UnknownRule`].
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        RuleId::ALL
            .into_iter()
            .find(|r| r.as_str().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| LintError::UnknownRule {
                given: s.to_string(),
                expected: RuleId::id_list(),
            })
    }
}

//! Names and the vocabularies checks match them against: identifiers are compared
//! normalised (lowercase, without `_`, `-`, `$` or spaces), so `dedup_key`, `dedupKey` and
//! `Dedup-Key` are one name.

/// `dedup_key`, `dedupKey`, `Dedup-Key` → `dedupkey`.
pub(crate) fn norm(name: &str) -> String {
    name.chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect()
}

/// A table or model name compared across SQL, Prisma, Django and GORM: normalised, a final
/// plural `s` dropped (`processed_events` and `ProcessedEvent` are one name).
pub(crate) fn table_key(name: &str) -> String {
    let last = name.rsplit('.').next().unwrap_or(name);
    // A class named for being the table's entity (`TransactionEntity`, `PaymentJpaEntity`,
    // JPA's and TypeORM's convention) is the table its repository (`transactionDao`) reads.
    let last = ["JpaEntity", "Entity"]
        .iter()
        .find_map(|s| last.strip_suffix(s).filter(|rest| rest.len() > 1))
        .unwrap_or(last);
    let mut n = norm(last.trim_matches(|c| c == '"' || c == '`' || c == '[' || c == ']'));
    if n.ends_with("ies") && n.len() > 4 {
        n.truncate(n.len() - 3);
        n.push('y');
    } else if n.ends_with('s') && !n.ends_with("ss") && n.len() > 2 {
        n.pop();
    }
    n
}

/// Whether the normalised `name` contains any of `parts`.
pub(crate) fn has_any(name: &str, parts: &[&str]) -> bool {
    let n = norm(name);
    parts.iter().any(|p| n.contains(p))
}

/// Whether a word of a condition asks only whether a value or row is there, in either
/// polarity (`blank?`, `nil?`, `present?`, `exists`, `is_none()`, `rows.next()` on a
/// cursor): not what it holds. The front ends lower Ruby's `blank?` as a presence test.
pub(crate) fn tests_presence(word: &str) -> bool {
    matches!(
        norm(word).as_str(),
        "blank"
            | "nil"
            | "present"
            | "empty"
            | "isempty"
            | "none"
            | "isnone"
            | "issome"
            | "null"
            | "isnull"
            | "exists"
            | "any"
            | "next"
            | "first"
    )
}

/// Whether a key or collection is named for pacing or mutual exclusion (`ratelimit:<ip>`,
/// `lock:<id>`, a `ChatLimiter`'s map, `is_throttled`): it counts requests or holds a mutex,
/// so it is no processed marker.
pub(crate) fn paces_or_locks(name: &str) -> bool {
    has_any(
        name,
        &[
            "ratelimit",
            "throttl",
            "limiter",
            "cooldown",
            "debounce",
            "lock",
            "mutex",
            "semaphore",
        ],
    )
}

/// Names of dedup and idempotency keys (and of headers carrying them: `Idempotency-Key`,
/// `Nats-Msg-Id`, SQS `MessageDeduplicationId`).
pub(crate) fn is_key_name(name: &str) -> bool {
    has_any(
        name,
        &[
            "idempotencykey",
            "idempotencyid",
            "idempotencytoken",
            "idempotentkey",
            "idempotencekey",
            "dedupkey",
            "dedupekey",
            "dedupid",
            "dedupeid",
            "deduplicationid",
            "deduplicationkey",
            "natsmsgid",
            "msgid",
            "clienttoken",
        ],
    ) || matches!(
        norm(name).as_str(),
        "idempotency" | "dedup" | "dedupe" | "messageid" | "eventid" | "webhookid"
            // A webhook inbox's provider id (`WebhookEvent.find_by(source:, external_id:)`).
            | "externalid"
    )
}

/// Tables or models that record which events were handled (the inbox / processed marker).
pub(crate) fn is_marker_table(name: &str) -> bool {
    has_any(
        name,
        &[
            "processed",
            "inbox",
            "idempot",
            "dedup",
            "handledevent",
            "handledmessage",
            "seenevent",
            "seenmessage",
            "consumedevent",
            "consumedmessage",
            "webhookevent",
            "webhookdeliver",
            "eventreceipt",
        ],
    )
        // A table of the webhooks received (`stripe_webhooks`, `FiatOnrampWebhooks`), by its
        // plural name (a key such as `webhook:{id}` is no table); not one of endpoints or
        // subscriptions, which ends in those words.
        || name.to_lowercase().ends_with("webhooks") && !has_any(name, &["outgoing", "outbound"])
}

/// Tables of an outbox or effect ledger: rows a relay or worker turns into messages.
pub(crate) fn is_outbox_table(name: &str) -> bool {
    has_any(name, &["outbox", "effectledger", "pendingmessage"]) || table_key(name) == "effect"
}

/// Tables whose duplicates are harmless logs.
pub(crate) fn is_log_table(name: &str) -> bool {
    has_any(name, &["log", "audit", "trace", "metric"])
}

/// Columns that order versions of one entity.
pub(crate) fn is_order_column(name: &str) -> bool {
    let n = norm(name);
    [
        "version",
        "updatedat",
        "lastupdated",
        "modifiedat",
        "sequence",
        "seq",
        "revision",
        "eventtime",
        "occurredat",
        "lasteventat",
        "eventcreated",
        "lsn",
        "generation",
        "etag",
    ]
    .iter()
    .any(|p| n == *p || n.ends_with(p) || n.starts_with(p))
}

/// Columns holding a time an event carries (`endsAt`, `renews_at`, `current_period_end`,
/// `datePaid`): written from the event, they order its versions as much as `updated_at`.
pub(crate) fn is_event_time_column(name: &str) -> bool {
    let n = norm(name);
    let at = name.ends_with("At") || name.ends_with("_at");
    (at && !matches!(n.as_str(), "createdat" | "deletedat" | "lastloginat"))
        || n.starts_with("date") && n.len() > 4
        || ["startdate", "enddate", "expirydate", "renewaldate"]
            .iter()
            .any(|d| n.ends_with(d))
        // `active_until`, `paid_until`, `valid_until`: the end of a paid period.
        || n.ends_with("until") && n.len() > 5
        // Stripe's `cancel_at_period_end` is a flag, not a time.
        || n.contains("periodend") && !n.starts_with("cancelatperiodend")
        || n.contains("periodstart")
}

/// Words that say a condition or a message is about a duplicate delivery.
pub(crate) fn is_duplicate_word(word: &str) -> bool {
    // A message that says it was done before: "already credited", "was already paid".
    let lower = word.to_lowercase();
    let mut tokens = lower
        .split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty());
    while let Some(t) = tokens.next() {
        if t == "already"
            && tokens.next().is_some_and(|next| {
                next.ends_with("ed")
                    || matches!(
                        next,
                        "exists" | "exist" | "done" | "paid" | "sent" | "seen" | "taken"
                    )
            })
        {
            return true;
        }
    }
    let n = norm(word);
    [
        "duplicate",
        "alreadyprocessed",
        "alreadyhandled",
        "alreadyseen",
        "alreadyexists",
        "alreadyreceived",
        "alreadyapplied",
        "isdup",
        "isprocessed",
        "wasprocessed",
        "processedalready",
        "seenbefore",
        "replay",
        "23505",
        "p2002",
        "uniqueviolation",
        "integrityerror",
        "erdupentry",
        "uniqueconstraint",
        "duplicatekey",
        "recordnotunique",
    ]
    .iter()
    .any(|p| n.contains(p))
        || matches!(
            n.as_str(),
            "exists" | "existing" | "seen" | "processed" | "dup" | "already"
        )
}

/// Go `net/http`, Python `http.HTTPStatus` and Starlette/DRF status constants.
pub(crate) fn status_constant(name: &str) -> Option<u16> {
    if let Some(rest) = name.strip_prefix("HTTP_") {
        return rest.get(..3).and_then(|d| d.parse().ok());
    }
    let n = norm(name.strip_prefix("Status").unwrap_or(name));
    Some(match n.as_str() {
        "ok" => 200,
        "created" => 201,
        "accepted" => 202,
        "nocontent" => 204,
        "badrequest" => 400,
        "unauthorized" => 401,
        "forbidden" => 403,
        "notfound" => 404,
        "conflict" => 409,
        "gone" => 410,
        "preconditionfailed" => 412,
        "unprocessableentity" | "unprocessablecontent" => 422,
        "toomanyrequests" => 429,
        "internalservererror" => 500,
        "serviceunavailable" => 503,
        _ => return None,
    })
}

/// Calls that mint a fresh id (a normalised callee: `uuidv4`, `crypto.randomUUID`, `nanoid`,
/// `uuid.uuid4`, `uuid.New`): a column filled with one is no key a redelivery would hit.
pub(crate) fn is_id_minting(n: &str) -> bool {
    matches!(
        n,
        "uuidv4"
            | "v4"
            | "uuid"
            | "uuid4"
            | "uuiduuid4"
            | "randomuuid"
            | "cryptorandomuuid"
            | "nanoid"
            | "cuid"
            | "createid"
            | "ulid"
            | "uuidnew"
            | "uuidnewstring"
            | "uuidnewv4"
            | "uuidnewrandom"
            | "ksuidnew"
            | "xidnew"
            | "generateuuid"
            | "uuidv7"
            | "uuidnowv7"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_compare_across_conventions() {
        assert_eq!(table_key("processed_events"), table_key("ProcessedEvent"));
        assert_eq!(table_key("public.inventories"), "inventory");
        assert!(is_key_name("Idempotency-Key"));
        assert!(is_key_name("dedup_key"));
        assert!(!is_key_name("api_key"));
        assert_eq!(status_constant("StatusConflict"), Some(409));
        assert_eq!(status_constant("HTTP_409_CONFLICT"), Some(409));
        assert_eq!(status_constant("CONFLICT"), Some(409));
    }
}

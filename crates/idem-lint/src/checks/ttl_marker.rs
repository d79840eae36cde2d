//! `REL_TTL_MARKER`: the "already handled?" decision taken from a marker kept in another
//! system than the effect — a Redis or cache key (often with a TTL), an in-process set —
//! in front of a database write or an outside call. Two systems cannot commit together, and
//! a TTL forgets. Not a finding when the database itself referees (a dedup-table claim, a
//! unique key or conflict clause on the insert): the cache then only saves work. Takes
//! precedence over `REL_MARKER_OUTSIDE_TX` and `REL_CHECK_THEN_ACT` for such a marker.

use super::{Hit, describe, is_marker};
use crate::analysis::{Act, FnFacts};
use crate::finding::Confidence;
use crate::handlers::is_event;
use crate::ir::{Call, Expr, OpKind};
use crate::rule::RuleId;
use crate::sql::SqlStmt;
use crate::words::{has_any, is_marker_table, norm, paces_or_locks};

/// Words of a key or collection that hold "this event was handled".
const MARKER_WORDS: &[&str] = &[
    "seen",
    "evt",
    "processed",
    "dedup",
    "idempot",
    // `idem:${key}`: the usual short form.
    "idem",
    "handled",
    "event",
    "webhook",
    "delivery",
    "message",
    "msg",
    "done",
];

/// What the marker is, where it is checked, and the effect it decides.
struct Found {
    check: usize,
    effect: usize,
    what: String,
}

fn marker_key(key: &str) -> bool {
    let n = norm(key);
    !n.contains("cache") && (is_marker_table(key) || has_any(&n, MARKER_WORDS))
}

/// A cache or in-memory check of a marker at op `i`.
fn cache_check(facts: &FnFacts<'_>, i: usize) -> Option<String> {
    if let OpKind::Call(call) = &facts.func.ops[i].kind
        && let Some(what) = memory_helper(facts, i, call)
    {
        return Some(what);
    }
    match &facts.acts[i] {
        Act::RedisRead { key }
            if marker_key(key)
                || set_after_read(facts, i, key)
                || dedup_helper(facts, i).is_some() =>
        {
            Some(format!("Redis/cache key {key}"))
        }
        Act::RedisWrite { key, nx: true }
            if marker_key(key) || dedup_helper(facts, i).is_some() =>
        {
            Some(format!("Redis/cache claim (SET NX) of {key}"))
        }
        Act::Other => {
            let OpKind::Call(call) = &facts.func.ops[i].kind else {
                return None;
            };
            memory_check(call).or_else(|| memory_set_after_check(facts, i, call))
        }
        _ => None,
    }
}

/// The helper op `i` is written in, when it is named for the dedup it does
/// (`isProcessed(txId)`, `claimIdempotencyKey(id)`, `dedup.is_duplicate(&key)`,
/// `recently_seen.was_seen(id)`): a key read or claimed in it is a marker, whatever prefix
/// builds it.
fn dedup_helper<'f>(facts: &'f FnFacts<'_>, i: usize) -> Option<&'f str> {
    let helper = facts.func.ops[i].origin.as_ref()?.helper.as_str();
    has_any(
        &norm(helper),
        &[
            "processed",
            "idempot",
            "dedup",
            "duplicate",
            "handled",
            "consumed",
            "seen",
            "witnessed",
        ],
    )
    .then_some(helper)
}

/// A look-up in a field of the helper's own struct (`self.cache.get(key)`,
/// `self.lookup.contains(key)`) inlined from a helper named for the question it answers: a
/// marker kept in process memory, however the struct names its map.
fn memory_helper(facts: &FnFacts<'_>, i: usize, call: &Call) -> Option<String> {
    let helper = dedup_helper(facts, i)?;
    let looks_up = matches!(
        call.method().as_str(),
        "get" | "contains" | "contains_key" | "has" | "includes"
    );
    // `self.seen.contains(&id)`, or a module's own map (`const seen = new Map()` …
    // `seen.has(key)`): no database, Redis or ORM call.
    let in_memory = call.callee.first().is_some_and(|r| r == "self")
        || call.callee.len() == 2 && matches!(facts.acts[i], Act::Other);
    (looks_up && in_memory).then(|| format!("in-memory map behind {helper}()"))
}

/// A key read and then written by the handler (`get(req.path)` … `set(req.path, …)`): the
/// read asks "handled?" and the write answers it, whatever the key is named.
fn set_after_read(facts: &FnFacts<'_>, i: usize, key: &str) -> bool {
    let n = norm(key);
    !n.is_empty()
        && !n.contains("cache")
        && facts.acts[i + 1..]
            .iter()
            .any(|a| matches!(a, Act::RedisWrite { key: k, .. } if k == key))
}

/// `seen.has(id)`, `processedIds.includes(id)`: a marker kept in process memory.
fn memory_check(call: &Call) -> Option<String> {
    let m = call.method();
    // Java's `if (!processedIds.add(id)) return;`: `Set.add` answers whether it was absent.
    if !matches!(
        m.as_str(),
        "has"
            | "includes"
            | "contains"
            | "__contains__"
            | "add"
            | "containskey"
            | "contains_key"
            | "putifabsent"
    ) {
        return None;
    }
    let recv = call.receiver_words();
    let last = recv.last()?;
    (has_any(last, &["seen", "processed", "handled", "dedup"]))
        .then(|| format!("in-memory set {}", recv.join(".")))
}

/// A membership test in process memory whose key the handler then puts into the same
/// collection (`cache.contains(&sig)` … `cache.insert(sig)`): the test asks "handled?" and the
/// insert answers it, whatever the collection is named (as a Redis key read, then set).
fn memory_set_after_check(facts: &FnFacts<'_>, i: usize, call: &Call) -> Option<String> {
    if !matches!(
        call.method().as_str(),
        "has" | "includes" | "contains" | "contains_key" | "containskey" | "get"
    ) || call.callee.len() < 2
    {
        return None;
    }
    let recv = &call.callee[..call.callee.len() - 1];
    // A rate limiter's or lock's map (`last_reply.insert(chat, Instant::now())` in
    // `is_throttled`): when, not whether, the key was seen.
    let helper = facts.func.ops[i].origin.as_ref().map(|o| o.helper.as_str());
    if helper.is_some_and(paces_or_locks) || recv.iter().any(|r| paces_or_locks(r)) {
        return None;
    }
    let key = key_of(call.args.first()?);
    if key.is_empty() {
        return None;
    }
    let remembered = facts.func.ops[i + 1..]
        .iter()
        .zip(&facts.acts[i + 1..])
        .any(|(op, act)| {
            matches!(act, Act::Other)
                && matches!(&op.kind, OpKind::Call(c)
                if c.callee.len() == call.callee.len()
                    && c.callee[..c.callee.len() - 1] == *recv
                    && matches!(c.method().as_str(), "insert" | "add" | "put" | "set" | "push")
                    && c.args.first().is_some_and(|a| key_of(a) == key)
                    && !c.args.iter().skip(1).flat_map(Expr::words).any(|w| {
                        let w = norm(&w);
                        w == "now" || w == "instant"
                    }))
        });
    remembered.then(|| format!("in-memory set {}", recv.join(".")))
}

/// The words of a key as it is named, copies and conversions aside (`event.id.clone()` is
/// `event.id`).
fn key_of(e: &Expr) -> Vec<String> {
    match e {
        Expr::Call(c)
            if c.args.is_empty()
                && c.callee.len() > 1
                && matches!(
                    c.method().as_str(),
                    "clone" | "to_string" | "to_owned" | "into" | "as_str" | "as_ref"
                ) =>
        {
            c.callee[..c.callee.len() - 1].to_vec()
        }
        other => other.words(),
    }
}

/// A write or outside call the database does not referee.
fn unrefereed_effect(facts: &FnFacts<'_>, act: &Act) -> bool {
    match act {
        Act::Sql(SqlStmt::Insert {
            table,
            columns,
            conflict_clause,
            ..
        }) => !conflict_clause && !facts.schema.covers(table, Some(columns)),
        Act::OrmCreate {
            target,
            columns,
            safe,
        } => !safe && !facts.schema.covers(target, columns.as_deref()),
        Act::Publish | Act::HttpCreate => true,
        a => a.is_db_write(),
    }
}

/// A commit at `e` of a row changed after the check at `c` (`wallet.balance = new;
/// session.commit()`, SQLAlchemy's and JPA's unit of work): the commit writes it.
fn saves_changed_row(facts: &FnFacts<'_>, c: usize, e: usize) -> bool {
    matches!(facts.acts[e], Act::Commit)
        && facts.func.ops[c + 1..e].iter().any(|o| {
            matches!(&o.kind, OpKind::Assign { targets, .. } if targets.iter().any(|t| {
                t.contains('.') && !t.starts_with("self.") && !t.starts_with("this.")
            }))
        })
}

/// Whether the marker at `c` and the effect at `e` are both Redis's (a `PUBLISH` or `XADD`
/// after a Redis key check): one system, which a MULTI/EXEC can commit together.
fn redis_both(facts: &FnFacts<'_>, c: usize, e: usize) -> bool {
    let redis_marker = matches!(
        facts.acts[c],
        Act::RedisRead { .. } | Act::RedisWrite { .. }
    );
    let OpKind::Call(call) = &facts.func.ops[e].kind else {
        return false;
    };
    redis_marker
        && facts
            .receiver_words(call)
            .iter()
            .any(|w| has_any(w, &["redis"]))
}

/// Whether op `e` runs only on the path the check at `c` decided: in a branch, or after an
/// early return or throw.
fn decided(facts: &FnFacts<'_>, c: usize, e: usize) -> bool {
    let ops = &facts.func.ops;
    ops[e].conds.len() > ops[c].conds.len()
        || ops[c + 1..e]
            .iter()
            .any(|o| !o.conds.is_empty() && matches!(o.kind, OpKind::Return(_) | OpKind::Throw(_)))
}

fn find(facts: &FnFacts<'_>) -> Option<Found> {
    if !is_event(facts.func) {
        return None;
    }
    // The database claims the event itself: the cache in front only saves work.
    if database_claim(facts) {
        return None;
    }
    let n = facts.acts.len();
    (0..n).find_map(|c| {
        let what = cache_check(facts, c)?;
        let effect = (c + 1..n).find(|&e| {
            // A marker-table insert nothing referees (no conflict clause, no unique key)
            // is the effect the cache guards, not a claim.
            (unrefereed_effect(facts, &facts.acts[e]) || saves_changed_row(facts, c, e))
                && (!is_marker(&facts.acts[e])
                    || matches!(
                        facts.acts[e],
                        Act::Sql(SqlStmt::Insert { .. }) | Act::OrmCreate { .. }
                    ))
                && decided(facts, c, e)
                && !redis_both(facts, c, e)
        })?;
        Some(Found {
            check: c,
            effect,
            what,
        })
    })
}

/// Whether the function claims the event in the database in a way a duplicate cannot pass: a
/// dedup-table insert with a conflict clause, a get-or-create, or one a declared unique key
/// referees.
pub(crate) fn database_claim(facts: &FnFacts<'_>) -> bool {
    facts.acts.iter().any(|a| {
        is_marker(a)
            && match a {
                Act::Sql(SqlStmt::Insert {
                    table,
                    columns,
                    conflict_clause,
                    ..
                }) => *conflict_clause || facts.schema.covers(table, Some(columns)),
                Act::OrmCreate {
                    target,
                    columns,
                    safe,
                } => {
                    *safe
                        || facts.schema.knows(target)
                            && facts.schema.covers(target, columns.as_deref())
                }
                _ => false,
            }
    })
}

/// Whether the function keeps its dedup marker in another system than its effect (the
/// precedence test of the checks that see the same shape).
pub(crate) fn applies(facts: &FnFacts<'_>) -> bool {
    find(facts).is_some()
}

/// The expiry given to a marker anywhere in the function (`ex=`, `EX`, `setex`, `expire`).
fn expiry(facts: &FnFacts<'_>) -> bool {
    facts.func.ops.iter().any(|op| {
        let OpKind::Call(call) = &op.kind else {
            return false;
        };
        let m = call.method();
        matches!(m.as_str(), "setex" | "psetex" | "expire" | "pexpire" | "expireat")
            || ["ex", "px", "timeout", "ttl", "EX", "PX"]
                .iter()
                .any(|k| call.option(k).is_some())
            || call.args.iter().any(|a| {
                matches!(a, Expr::Str(s) if s.eq_ignore_ascii_case("ex") || s.eq_ignore_ascii_case("px"))
            })
    })
}

pub(super) fn check(facts: &FnFacts<'_>, out: &mut Vec<Hit>) {
    let Some(found) = find(facts) else { return };
    let op = &facts.func.ops[found.check];
    let ttl = if expiry(facts) {
        ", and its TTL forgets it while the sender may still redeliver"
    } else {
        ""
    };
    let memory = found.what.starts_with("in-memory");
    out.push(Hit {
        rule: RuleId::RelTtlMarker,
        pos: op.pos,
        origin: op.origin.clone(),
        message: format!(
            "dedup marker in another system than the effect: {} decides whether {} on line {} runs; the two cannot commit together{ttl}",
            found.what,
            describe(&facts.acts[found.effect]),
            facts.func.ops[found.effect].pos.line,
        ),
        confidence: if memory { Confidence::Medium } else { Confidence::High },
    });
}

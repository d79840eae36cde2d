//! `REL_MARKER_OUTSIDE_TX`: the "processed" marker (a dedup-table insert, a Redis `SET NX`)
//! is committed in another transaction than the side effect it stands for. A crash between
//! the two either loses the event (marker first) or repeats the effect (effect first).

use super::{Hit, describe, is_marker, is_unique_violation};
use crate::analysis::{Act, FnFacts};
use crate::finding::Confidence;
use crate::handlers::is_event;
use crate::ir::{Expr, OpKind};
use crate::rule::RuleId;
use crate::sql::SqlStmt;
use crate::words::{has_any, is_duplicate_word};

/// Logging calls: what a rescue says in them is how it reads the error.
const LOGS: &[&str] = &["log", "info", "debug", "warn", "warning", "error"];

/// Calls that are not side effects: logging, parsing, responses, validation.
const NOT_EFFECTS: &[&str] = &[
    "log",
    "info",
    "debug",
    "warn",
    "error",
    "print",
    "json",
    "parse",
    "stringify",
    "status",
    "send",
    "sendstatus",
    "validate",
    "assert",
    "dumps",
    "loads",
    "marshal",
    "unmarshal",
    "sprintf",
    "errorf",
    "printf",
    "println",
    "string",
    "tostring",
    "map",
    "filter",
    "push",
    "get",
    "has",
    "includes",
    "append",
    "len",
    "str",
    "int",
    "float",
    "format",
    "trace",
    "exception",
    "ack",
    "nack",
    "commit",
    "rollback",
    "close",
    "release",
    "end",
    "next",
    "header",
    "getheader",
    "verify",
    "constructevent",
    "construct_event",
    "isinstance",
    "sleep",
    "settimeout",
    "resolve",
    "reject",
    "emit",
    "wrap",
    "wrapf",
    "withfield",
    "withfields",
    "withmessage",
];

/// Whether op `i` is a side effect of handling the event: a write, publish or creating
/// call, or a function of the project given the event (`apply_event(&event)`).
pub(super) fn is_effect(facts: &FnFacts<'_>, i: usize) -> bool {
    let act = &facts.acts[i];
    if is_marker(act) {
        return false;
    }
    if act.is_db_write() || matches!(act, Act::Publish | Act::HttpCreate | Act::RedisIncr) {
        return true;
    }
    let OpKind::Call(call) = &facts.func.ops[i].kind else {
        return false;
    };
    // Building an object (`new ProcessedEvent(id)`) applies nothing.
    if !matches!(act, Act::Other) || call.is_new {
        return false;
    }
    let m = call.method();
    // `registry.get(kind)(event)`: a call on a call's result builds something, it applies
    // nothing yet.
    if NOT_EFFECTS.iter().any(|n| m == *n) || m.is_empty() || m == "?" {
        return false;
    }
    // The answer to the sender (`ErrorJSON(c, 500, …)`, `SuccessJSON(c, …)`, `respond(w, …)`)
    // is no effect.
    if ["json", "respond", "reply"].iter().any(|w| m.contains(w))
        || super::duplicate_not_2xx::status_of(call).is_some()
    {
        return false;
    }
    // Helpers that read or compute (`getClickEvent(evt)`, `parsePayload(evt)`) are no effect.
    const READS: &[&str] = &[
        "get",
        "find",
        "fetch",
        "load",
        "read",
        "list",
        "is",
        "has",
        "check",
        "validate",
        "parse",
        "verify",
        "resolve",
        "convert",
        "transform",
        "compute",
        "build",
        "format",
        "to",
        "extract",
        "lookup",
        "search",
        "count",
        "serialize",
        "deserialize",
        "decode",
        // `construct_event_from_request(payload, sig)`: the event, verified.
        "construct",
        // `initialize_payment_connector(&connector)`: a client built, nothing sent.
        "init",
        // `cache.invalidate_exact(key)`: a cache entry dropped, as often as it runs.
        "invalidate",
        "evict",
        // `sanitize_string(&req.memo)`, `hash_payload(&body)`: a value computed from another.
        "sanitize",
        "normalize",
        "escape",
        "encode",
        "hash",
    ];
    if READS.iter().any(|r| m.starts_with(r)) {
        return false;
    }
    // A local function or service method given the event: `applyEvent(event)`,
    // `this.orders.fulfil(order)`, `handle_payment(payload)`.
    let local = call.callee.len() == 1
        || matches!(
            call.callee.first().map(String::as_str),
            Some("this" | "self")
        )
        || facts.receiver_words(call).iter().any(|r| {
            has_any(
                r,
                &[
                    "service",
                    "handler",
                    "processor",
                    "usecase",
                    "app",
                    "repository",
                    "repo",
                    // A call through a trait object (`ProcessEventInterface.run(&ctx, event)`).
                    "interface",
                ],
            )
        });
    // `webhook = WebhookClass(event); webhook.process()`: an object built from the event
    // told to apply it.
    let applies = matches!(
        m.as_str(),
        "process" | "handle" | "apply" | "execute" | "run" | "dispatch" | "fulfil" | "fulfill"
    ) && call.callee.len() == 2
        && facts
            .values
            .get(&call.callee[0])
            .is_some_and(|v| facts.mentions_tainted(v));
    // `handlers.get(record.topic()).handle(record)`: a handler looked up for the message
    // told to apply it.
    let looked_up = matches!(
        m.as_str(),
        "process" | "handle" | "apply" | "dispatch" | "consume" | "onmessage"
    ) && call.receiver.as_deref().is_some_and(|r| {
        let mut named = false;
        Expr::Call(Box::new(r.clone())).walk(&mut |e| {
            let segs = match e {
                Expr::Path(p) => p,
                Expr::Call(c) => &c.callee,
                _ => return,
            };
            named |= segs
                .iter()
                .any(|s| has_any(s, &["handler", "processor", "listener"]));
        });
        named
    });
    applies
        || looked_up && call.args.iter().any(|a| facts.mentions_tainted(a))
        || local
            && call.args.iter().any(|a| {
            facts.mentions_tainted(a)
                && !matches!(a, Expr::Path(p) if p.len() == 1 && matches!(p[0].as_str(), "ctx" | "w" | "res" | "reply"))
        })
}

/// A publish or an outside call: no database transaction covers it, even one open around
/// it, so a marker that rolls back leaves it made (the page's "record it in an effect
/// ledger").
fn leaves_the_database(act: &Act) -> bool {
    matches!(act, Act::Publish | Act::HttpCreate)
}

/// An insert used as the claim by how its failure is read: a unique violation after it is
/// answered "duplicate" (`catch (e) { if (e.code === 11000) return { isDuplicate: true } }`).
fn claim_by_violation(facts: &FnFacts<'_>, m: usize) -> bool {
    let inserts = matches!(
        &facts.acts[m],
        Act::OrmCreate { safe: false, .. }
            | Act::Sql(crate::sql::SqlStmt::Insert {
                conflict_clause: false,
                ..
            })
    );
    if !inserts {
        return false;
    }
    let handled: Vec<usize> = facts
        .func
        .conds
        .iter()
        .enumerate()
        .filter(|(_, c)| c.test.words().iter().any(|w| is_unique_violation(w)))
        .map(|(k, _)| k)
        .collect();
    facts.func.ops[m + 1..].iter().any(|o| {
        o.conds.iter().any(|c| handled.contains(c))
            && match &o.kind {
                OpKind::Return(Some(e)) => e.words().iter().any(|w| is_duplicate_word(w)),
                OpKind::Assign { targets, value, .. } => targets
                    .iter()
                    .cloned()
                    .chain(value.words())
                    .any(|w| is_duplicate_word(&w)),
                // A rescue that only logs the violation as a duplicate (`rescue
                // RecordNotUnique => e; logger.warn("duplicated event …")`) ends the
                // redelivery quietly: the insert was the claim.
                OpKind::Call(c) => {
                    let m = c.method();
                    LOGS.contains(&m.as_str())
                        && c.args
                            .iter()
                            .flat_map(Expr::words)
                            .any(|w| is_duplicate_word(&w))
                }
                _ => false,
            }
    })
}

/// An insert into the table the handler looked the event up in and decided on (`if
/// Event.objects.filter(stripe_id=…).first(): return` … `Event.objects.create(stripe_id=…)`):
/// the row records that the event was handled, a marker by use.
fn claim_by_lookup(facts: &FnFacts<'_>, m: usize) -> bool {
    let target = match &facts.acts[m] {
        Act::OrmCreate { target, .. } => target,
        Act::Sql(crate::sql::SqlStmt::Insert { table, .. }) => table,
        _ => return false,
    };
    // Only a table of received events, or one whose unique key is the event's id: a
    // find-or-create of a customer or conversation records no delivery.
    if !super::is_event_log_table(target) && !keyed_by_event_id(facts, m) {
        return false;
    }
    let same = |t: &str| crate::words::table_key(t) == crate::words::table_key(target);
    (0..m).any(|k| {
        let read = match &facts.acts[k] {
            Act::OrmRead { target } => same(target),
            Act::Sql(crate::sql::SqlStmt::Select {
                tables,
                filtered: true,
                ..
            }) => tables.iter().any(|t| same(t)),
            _ => false,
        };
        read && matches!(&facts.func.ops[k].kind, OpKind::Call(c) if c.arg_exprs().iter().any(|e| facts.mentions_tainted(e)))
            && super::decided_by(facts, k, m)
    })
}

/// Whether the insert at `m` fills a declared unique key on a column named for the delivery's
/// own id (`event_id`, `stripe_event_id`, `message_id`): whatever the table is called, a
/// second copy of the event fails there, so the row records the delivery.
fn keyed_by_event_id(facts: &FnFacts<'_>, m: usize) -> bool {
    let Act::OrmCreate {
        target,
        columns: Some(columns),
        ..
    } = &facts.acts[m]
    else {
        return false;
    };
    columns.iter().any(|c| {
        let c = crate::words::norm(c);
        ["eventid", "messageid", "deliveryid"]
            .iter()
            .any(|id| c.ends_with(id))
            && facts.schema.covers(target, Some(std::slice::from_ref(&c)))
    })
}

/// A stored event's row marked handled after the work (`event.update!(processed_at:
/// Time.current)`, `record.update(processed: true)`): the update is the marker, and the
/// effects before it are what it stands for. The row may have been built by
/// `find_or_initialize_by` (a new row until saved), which the analysis reads as no ORM row.
/// Returns the row's model (or name), whose own save is no effect.
fn marks_handled(facts: &FnFacts<'_>, m: usize) -> Option<String> {
    // `UPDATE webhook_in_event SET processed_at = $1 WHERE id = $2` (SQL, or diesel's update
    // read as its SQL).
    if let Act::Sql(SqlStmt::Update { table, sets, .. }) = &facts.acts[m]
        && sets.iter().any(|s| {
            matches!(
                crate::words::norm(&s.column).as_str(),
                "processedat" | "handledat" | "processed" | "handled"
            )
        })
        && (super::is_event_log_table(table) || crate::words::table_key(table).contains("webhook"))
    {
        return Some(table.clone());
    }
    let OpKind::Call(call) = &facts.func.ops[m].kind else {
        return None;
    };
    let flag = ["processed", "processed_at", "handled", "handled_at"];
    let method = call.method();
    if !(method.starts_with("update") || method.ends_with("andupdate"))
        || !(flag.iter().any(|f| call.option(f).is_some()) || sets_done_status(call))
    {
        return None;
    }
    let target = match &facts.acts[m] {
        Act::OrmUpdate { target, .. } => target.clone(),
        // Else the model the row was built from, else the row's own name (`event`).
        _ => built_model(facts, call)
            .or_else(|| (call.callee.len() == 2).then(|| call.callee[0].clone()))
            .unwrap_or_default(),
    };
    // A received-webhook row marked done (`prisma.webhook.update({ data: { status:
    // PROCESSED } })`): a `webhooks` table may also list endpoints, hence the status.
    let webhook_log =
        sets_done_status(call) && crate::words::table_key(&target).contains("webhook");
    (super::is_event_log_table(&target) || webhook_log).then_some(target)
}

/// Whether an update's data marks its row done: `data: { status: WebhookStatus.PROCESSED }`,
/// `{ $set: { state: "completed" } }`, `{ processedAt: new Date() }`.
fn sets_done_status(call: &crate::ir::Call) -> bool {
    const DONE: &[&str] = &["processed", "handled", "completed", "done", "succeeded"];
    let mut hit = false;
    for e in call.arg_exprs() {
        e.walk(&mut |x| {
            let Expr::Object { fields, .. } = x else {
                return;
            };
            for (k, v) in fields {
                let k = crate::words::norm(k);
                hit |= matches!(
                    k.as_str(),
                    "processedat" | "handledat" | "processed" | "handled"
                ) || matches!(k.as_str(), "status" | "state")
                    && v.words().iter().any(|w| {
                        let w = crate::words::norm(w);
                        DONE.iter().any(|d| w.ends_with(d))
                    });
            }
        });
    }
    hit
}

/// The model a local row was built from (`record = Model.find_or_initialize_by(…)`).
fn built_model(facts: &FnFacts<'_>, call: &crate::ir::Call) -> Option<String> {
    let [row, _] = call.callee.as_slice() else {
        return None;
    };
    let Expr::Call(made) = facts.values.get(row)? else {
        return None;
    };
    made.callee
        .first()
        .filter(|c| c.chars().next().is_some_and(char::is_uppercase))
        .cloned()
}

/// One processed marker of a function (a dedup-table insert, a Redis `SET NX`) and what the
/// `REL_MARKER_OUTSIDE_TX` analysis decides about it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MarkerCommit {
    /// The op that writes the marker.
    pub(crate) marker: usize,
    /// The marker is a Redis key.
    pub(crate) redis: bool,
    /// A side effect committed apart from the marker (the one after it if any, else the one
    /// before it); `None` when every effect commits with it.
    pub(crate) apart: Option<usize>,
    /// A Redis marker whose finding is another check's: `REL_TTL_MARKER`'s when it decides a
    /// database effect, none when a database claim stands behind it.
    pub(crate) deferred: bool,
}

/// Every processed marker the function writes, with whether a side effect commits apart from
/// it. The check and the inventory (`idem lint --inventory`) both read this one decision.
pub(crate) fn marker_commits(facts: &FnFacts<'_>) -> Vec<MarkerCommit> {
    // A marker in Redis in front of a database effect is REL_TTL_MARKER's finding.
    let ttl_marker = super::ttl_marker::applies(facts);
    // A Redis claim in front of a database claim only saves work: the database decides.
    let db_claim = super::ttl_marker::database_claim(facts);
    let mut out = Vec::new();
    for (m, act) in facts.acts.iter().enumerate() {
        let by_use = !is_marker(act);
        let handled = by_use.then(|| marks_handled(facts, m)).flatten();
        if by_use
            && handled.is_none()
            && !claim_by_violation(facts, m)
            && !claim_by_lookup(facts, m)
        {
            continue;
        }
        let redis = matches!(act, Act::RedisWrite { .. });
        // An effect in a transaction that holds a claim of its own (idem's runner run twice,
        // one claim per consumer) commits with that claim.
        let own_claim = |e: usize| {
            facts.tx[e].is_some()
                && (0..facts.acts.len())
                    .any(|k| k != m && facts.tx[k] == facts.tx[e] && is_marker(&facts.acts[k]))
        };
        // Saving the row that is then marked handled is part of the marker.
        let own_row = |e: usize| handled.is_some() && facts.acts[e].target() == handled.as_deref();
        let outside = |e: usize| {
            e != m
                && !own_row(e)
                && is_effect(facts, e)
                && (redis
                    || facts.tx[m].is_none()
                    || facts.tx[e] != facts.tx[m]
                    || leaves_the_database(&facts.acts[e]))
                && !own_claim(e)
                && !crate::branches::exclusive(facts.func, m, e)
        };
        // A marker by use claims what follows it; what came before built the claim.
        let apart = (m + 1..facts.acts.len()).find(|&e| outside(e)).or_else(|| {
            (0..m)
                .filter(|_| !by_use || handled.is_some())
                .find(|&e| outside(e))
        });
        out.push(MarkerCommit {
            marker: m,
            redis,
            apart,
            deferred: redis && (ttl_marker || db_claim),
        });
    }
    out
}

pub(super) fn check(facts: &FnFacts<'_>, out: &mut Vec<Hit>) {
    if !is_event(facts.func) {
        return;
    }
    for found in marker_commits(facts) {
        let (m, redis) = (found.marker, found.redis);
        let Some(e) = found.apart.filter(|_| !found.deferred) else {
            continue;
        };
        let act = &facts.acts[m];
        let marker_name = match act {
            Act::Other => format!("{} marking the event handled", super::call_name(facts, m)),
            other => describe(other),
        };
        let where_ = if redis {
            "in Redis, outside the database transaction of".to_string()
        } else if facts.tx[m].is_none() {
            "with no transaction around it and".to_string()
        } else {
            "in another transaction than".to_string()
        };
        let effect_name = match &facts.acts[e] {
            Act::Other => super::call_name(facts, e),
            other => describe(other),
        };
        // A marker in Redis is in another system than the effect: by the precedence both
        // pages state, that is REL_TTL_MARKER's finding, whatever the key is named.
        out.push(Hit {
            rule: if redis {
                RuleId::RelTtlMarker
            } else {
                RuleId::RelMarkerOutsideTx
            },
            pos: facts.func.ops[m].pos,
            origin: facts.func.ops[m].origin.clone(),
            message: format!(
                "{}processed marker ({marker_name}) is committed {where_} the side effect {effect_name} on line {}",
                if redis {
                    "dedup marker in another system than the effect: "
                } else {
                    ""
                },
                facts.func.ops[e].pos.line
            ),
            confidence: if redis { Confidence::Medium } else { Confidence::High },
        });
    }
}

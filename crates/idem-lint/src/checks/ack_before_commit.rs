//! `REL_ACK_BEFORE_COMMIT`: the delivery acknowledged (a broker ack, an offset commit, the
//! HTTP 2xx) before the effect that applies the event is written and committed, or a
//! consumer set to acknowledge on receipt (`noAck: true`, `auto_ack=True`, Go amqp
//! `Consume(q, "", true, …)`, NATS `AckNone`). A crash in between loses the event.

use super::duplicate_not_2xx::status_of;
use super::{Hit, in_duplicate_branch};
use crate::analysis::{Act, FnFacts};
use crate::finding::Confidence;
use crate::handlers::is_event;
use crate::ir::{Call, Expr, Op, OpKind};
use crate::rule::RuleId;
use crate::words::has_any;

/// Receivers of an offset commit (a consumer, not a database session).
const CONSUMERS: &[&str] = &["consumer", "kafka", "reader", "offset", "subscription"];

/// What the call acknowledges, if it is an acknowledgement.
fn acknowledgement(call: &Call) -> Option<&'static str> {
    let m = call.method();
    let recv = call.receiver_words();
    let root = recv.first().map(String::as_str).unwrap_or("");
    match m.as_str() {
        "ack" | "basic_ack" | "acknowledge" | "acksync" | "doubleack" | "double_ack"
        | "basicack" => Some("acknowledges the message"),
        "commitoffsets"
        | "commitmessages"
        | "commit_offsets"
        | "commitasync"
        | "commitsync"
        | "store_offsets"
        | "commitoffset"
        | "mark_as_consumed"
        | "mark_message_as_processed" => Some("commits the offset"),
        // rdkafka.
        "commit_message" | "commit_consumer_state" | "store_offset_from_message" => {
            Some("commits the offset")
        }
        // SQS: deleting the message is its acknowledgement.
        "delete_message" | "deletemessage"
            if recv.iter().any(|w| has_any(w, &["sqs", "queue", "client"])) =>
        {
            Some("deletes (acknowledges) the message")
        }
        "commit" if recv.iter().any(|w| has_any(w, CONSUMERS)) => Some("commits the offset"),
        "sendstatus" | "send" | "json" | "end"
            if matches!(root, "res" | "reply" | "response") && answers_2xx(call) =>
        {
            Some("answers 2xx")
        }
        "writeheader"
            if call
                .args
                .first()
                .and_then(Expr::status_code)
                .is_some_and(ok) =>
        {
            Some("answers 2xx")
        }
        _ => None,
    }
}

fn ok(code: u16) -> bool {
    (200..300).contains(&code)
}

/// `res.sendStatus(200)`, `res.status(202).send()`, `res.json(…)` (200 by default).
fn answers_2xx(call: &Call) -> bool {
    if call.method() == "sendstatus" {
        return call
            .args
            .first()
            .and_then(Expr::status_code)
            .is_some_and(ok);
    }
    let mut r = call.receiver.as_deref();
    while let Some(inner) = r {
        if matches!(inner.method().as_str(), "status" | "code") {
            return inner
                .args
                .first()
                .and_then(Expr::status_code)
                .is_some_and(ok);
        }
        r = inner.receiver.as_deref();
    }
    true
}

/// A call that sets its consumer to acknowledge on receipt.
fn auto_ack(call: &Call) -> Option<&'static str> {
    let truthy =
        |e: &Expr| matches!(e, Expr::Path(p) if p.len() == 1 && p[0].eq_ignore_ascii_case("true"));
    for name in ["noAck", "no_ack", "auto_ack", "autoAck"] {
        if call.option(name).is_some_and(truthy) {
            return Some("acknowledges on receipt (auto-ack)");
        }
    }
    if call.args.iter().any(sets_auto_commit)
        || call.kwargs.iter().any(|(k, v)| auto_commit_on(k, v))
    {
        return Some(
            "commits offsets on a timer, whether or not the message was handled (enable_auto_commit)",
        );
    }
    if let Some(what) = crate::lang::jvm_vocab::auto_ack(call) {
        return Some(what);
    }
    let m = call.method();
    // amqprs: `BasicConsumeArguments::new(queue, tag).manual_ack(false)` acks on delivery.
    if m == "manual_ack"
        && matches!(call.args.first(), Some(Expr::Path(p)) if p.len() == 1 && p[0] == "false")
    {
        return Some("acknowledges on receipt (manual_ack(false))");
    }
    if m == "consume"
        && call.callee.len() > 1
        && call.args.len() >= 7
        && call.args.get(2).is_some_and(truthy)
    {
        return Some("acknowledges on receipt (autoAck true)");
    }
    // segmentio/kafka-go: ReadMessage commits the offset as it reads (with a consumer group).
    if m == "readmessage" && call.callee.len() > 1 {
        return Some(
            "commits the offset as it reads the message (kafka-go ReadMessage; FetchMessage then CommitMessages after the effect does not)",
        );
    }
    if m == "acknone" || call.callee.iter().any(|s| s == "AckNone") {
        return Some("acknowledges nothing (AckNone)");
    }
    None
}

/// Kafka's `enable_auto_commit=True` / `"enable.auto.commit": true`: offsets are committed on a
/// timer, so a message whose handling failed or had not finished is still marked consumed.
fn auto_commit_on(key: &str, value: &Expr) -> bool {
    matches!(crate::words::norm(key).as_str(), "enableautocommit")
        && matches!(value, Expr::Path(p) if p.len() == 1 && p[0].eq_ignore_ascii_case("true"))
}

/// A configuration object (a consumer's options) turning auto-commit on.
fn sets_auto_commit(e: &Expr) -> bool {
    matches!(e, Expr::Object { fields, .. } if fields.iter().any(|(k, v)| auto_commit_on(k, v)))
}

/// Whether op `k` applies the event: a database write or commit, a publish, an outside call.
fn is_effect(act: &Act, call: Option<&Call>) -> bool {
    match act {
        Act::Commit => {
            call.is_some_and(|c| !c.receiver_words().iter().any(|w| has_any(w, CONSUMERS)))
        }
        Act::Publish | Act::HttpCreate | Act::RedisIncr => true,
        a => a.is_db_write(),
    }
}

/// Whether the consumer's configuration also turns off `enable.auto.offset.store`: auto-commit
/// then commits only the offsets the handler stores itself (`store_offset_from_message` after
/// its commit), so the timer never covers an unfinished message (librdkafka's CONFIGURATION.md).
fn stores_offsets_by_hand(facts: &FnFacts<'_>) -> bool {
    let off = |k: &str, v: &Expr| {
        crate::words::norm(k) == "enableautooffsetstore"
            && match v {
                Expr::Str(s) => s.eq_ignore_ascii_case("false"),
                Expr::Path(p) => p.len() == 1 && p[0].eq_ignore_ascii_case("false"),
                _ => false,
            }
    };
    let object = |e: &Expr| matches!(e, Expr::Object { fields, .. } if fields.iter().any(|(k, v)| off(k, v)));
    facts.func.ops.iter().any(|op| match &op.kind {
        // rdkafka's `.set("enable.auto.offset.store", "false")`, one op per link of the chain.
        OpKind::Call(c) => {
            matches!(c.args.as_slice(), [Expr::Str(k), v] if c.method() == "set" && off(k, v))
                || c.args.iter().any(object)
        }
        OpKind::Assign { value, .. } => object(value),
        _ => false,
    })
}

pub(super) fn check(facts: &FnFacts<'_>, out: &mut Vec<Hit>) {
    let ops = &facts.func.ops;
    let by_hand = stores_offsets_by_hand(facts);
    for op in ops {
        if let OpKind::Assign { value, .. } = &op.kind
            && sets_auto_commit(value)
            && !by_hand
        {
            out.push(Hit {
                rule: RuleId::RelAckBeforeCommit,
                pos: op.pos,
                origin: op.origin.clone(),
                message: "the consumer's configuration commits offsets on a timer (enable_auto_commit), whether or not the message was handled: a crash while handling loses it".to_string(),
                confidence: Confidence::Medium,
            });
        }
        if let OpKind::Assign { targets, value, .. } = &op.kind
            && targets
                .iter()
                .any(|t| crate::lang::jvm_vocab::ack_mode_none(t, value))
        {
            out.push(Hit {
                rule: RuleId::RelAckBeforeCommit,
                pos: op.pos,
                origin: op.origin.clone(),
                message: "the listener container acknowledges on receipt (acknowledge mode NONE): a crash while handling loses the message".to_string(),
                confidence: Confidence::High,
            });
        }
        let OpKind::Call(call) = &op.kind else {
            continue;
        };
        if let Some(what) = auto_ack(call)
            && !(by_hand && what.contains("enable_auto_commit"))
        {
            out.push(Hit {
                rule: RuleId::RelAckBeforeCommit,
                pos: op.pos,
                origin: op.origin.clone(),
                message: format!(
                    "{}() {what}: a crash while handling loses the message",
                    call.name()
                ),
                // Whether the reader has a consumer group is not seen: medium.
                // A JVM consumer's `enable.auto.commit`: whether its loop hands messages to
                // later work is not seen either (as a configuration object's, medium).
                confidence: if what.contains("ReadMessage") || what.contains("enable.auto.commit") {
                    Confidence::Medium
                } else {
                    Confidence::High
                },
            });
        }
    }
    if !is_event(facts.func) {
        return;
    }
    if answers_before_detached_work(facts, out) || acks_inside_tx(facts, out) {
        return;
    }
    for (a, op) in ops.iter().enumerate() {
        let OpKind::Call(call) = &op.kind else {
            continue;
        };
        let Some(what) = acknowledgement(call) else {
            continue;
        };
        if in_catch(facts, op) || in_duplicate_branch(facts, a) {
            continue;
        }
        // An effect after it on every path the acknowledgement is on.
        let effect = (a + 1..ops.len()).find(|&k| {
            let call_k = match &ops[k].kind {
                OpKind::Call(c) => Some(c),
                _ => None,
            };
            is_effect(&facts.acts[k], call_k)
                && ops[k].conds.starts_with(&op.conds)
                && !ops[k].conds.iter().any(|&c| facts.func.conds[c].is_catch)
        });
        let Some(k) = effect else { continue };
        out.push(Hit {
            rule: RuleId::RelAckBeforeCommit,
            pos: op.pos,
            origin: op.origin.clone(),
            message: format!(
                "{}() {what} before the effect on line {} ({}) is written: a crash in between loses the event",
                call.name(),
                ops[k].pos.line,
                super::describe(&facts.acts[k]),
            ),
            confidence: Confidence::High,
        });
        break;
    }
}

/// A 2xx answered by any response call or returned response: `c.JSON(202, …)`,
/// `return new NextResponse(null, { status: 200 })`, `return Response.json(…)`.
fn answers_ok(op: &Op) -> Option<&'static str> {
    let call = match &op.kind {
        OpKind::Call(c) => {
            if let Some(what) = acknowledgement(c) {
                return Some(what);
            }
            c
        }
        OpKind::Return(Some(Expr::Call(c))) => c,
        // Flask's `return jsonify(body), 200`.
        OpKind::Return(Some(Expr::List(items))) => {
            return (items.last().and_then(Expr::status_code))
                .is_some_and(ok)
                .then_some("answers 2xx");
        }
        _ => return None,
    };
    let mut chain = Some(call);
    while let Some(c) = chain {
        if let Some(code) = status_of(c) {
            return ok(code).then_some("answers 2xx");
        }
        chain = c.receiver.as_deref();
    }
    // `Response.json(body)` / `NextResponse.json(body)` without a status: 200.
    let responds = call.callee.first().is_some_and(|r| r.ends_with("Response"))
        && matches!(call.method().as_str(), "json" | "text");
    // Fiber's `return c.JSON(body)`, Express's `res.json(body)`, Flask's `jsonify(body)`
    // returned: 200 unless a status is given.
    let framework = call.callee.len() == 2
        && matches!(call.callee[0].as_str(), "c" | "ctx" | "res" | "reply" | "w")
        && matches!(
            call.method().as_str(),
            "json" | "send" | "sendstring" | "jsonp"
        )
        && call.args.first().is_none_or(|a| a.status_code().is_none());
    let flask = call.name() == "jsonify" && matches!(op.kind, OpKind::Return(_));
    (responds && matches!(op.kind, OpKind::Return(_)) || framework || flask)
        .then_some("answers 2xx")
}

/// Whether two operations can both run on one path: one's conditions extend the other's.
fn same_path(a: &Op, b: &Op) -> bool {
    a.conds.starts_with(&b.conds) || b.conds.starts_with(&a.conds)
}

/// The acknowledgement or 2xx given after an effect started in work nobody waits for (a
/// goroutine, `setImmediate`, an unawaited call): the answer can precede the effect.
fn answers_before_detached_work(facts: &FnFacts<'_>, out: &mut Vec<Hit>) -> bool {
    let ops = &facts.func.ops;
    // Each detached work is reported at the first answer after it; a handler with two paths
    // that each spawn and answer has two findings.
    let mut reported: Vec<u32> = Vec::new();
    for (a, op) in ops.iter().enumerate() {
        if in_catch(facts, op) || in_duplicate_branch(facts, a) {
            continue;
        }
        let Some(what) = answers_ok(op) else {
            continue;
        };
        // Detached by another statement than the answer's (`db.insert(x).then(() =>
        // res.json(…))` answers after its own work).
        let started = (0..a).rev().find(|&k| {
            detached_effect(facts, k) && ops[k].detached != op.detached && same_path(&ops[k], op)
        });
        let Some(k) = started else { continue };
        if reported.contains(&ops[k].detached) {
            continue;
        }
        reported.push(ops[k].detached);
        let name = match &op.kind {
            OpKind::Call(c) => format!("{}()", c.name()),
            _ => "the returned response".to_string(),
        };
        out.push(Hit {
            rule: RuleId::RelAckBeforeCommit,
            pos: op.pos,
            origin: op.origin.clone(),
            message: format!(
                "{name} {what} while the effect on line {} ({}) runs in work nobody waits for (a goroutine, a deferred callback or an unawaited call): a crash or failure after the answer loses the event",
                ops[k].pos.line,
                detached_name(facts, k),
            ),
            confidence: Confidence::High,
        });
    }
    !reported.is_empty() || handler_ends_before_detached_work(facts, out)
}

/// A handler that starts its effect in work nobody waits for and then ends without an answer
/// the linter knows: ending normally is the 2xx of a route (Go's `net/http` writes 200, a
/// framework's own `return r.SendEnvelope(…)`) and the acknowledgement of a job or consumer
/// callback (kafkajs, Lambda, Celery). Reported at the handler's last statement.
fn handler_ends_before_detached_work(facts: &FnFacts<'_>, out: &mut Vec<Hit>) -> bool {
    let ops = &facts.func.ops;
    let Some(k) = (0..ops.len()).find(|&k| detached_effect(facts, k)) else {
        return false;
    };
    // The handler's own last statement, after the work started and not waiting for it; or,
    // when starting the work is the last thing it does (`go process(ev)` closing the
    // function), the statement that started it.
    let end = (k + 1..ops.len())
        .rev()
        .find(|&e| ops[e].origin.is_none() && ops[e].detached == 0);
    // Ending right after starting it counts only for work handed to a function of the tree
    // (`go process(ev)`, `void apply(ev)`): a bare unawaited client call last (amqplib's
    // synchronous `channel.publish`) is too often finished by then.
    // An answer given before the work started is the main check's finding.
    if end.is_none()
        && (ops[k].origin.is_none() || ops[..k].iter().any(|o| answers_ok(o).is_some()))
    {
        return false;
    }
    if let Some(end) = end {
        let waited = (k + 1..=end).any(|w| {
            ops[w].origin.is_none()
                && ops[w].detached == 0
                && matches!(&ops[w].kind, OpKind::Call(c) if awaits(c))
        });
        if waited
            || in_catch(facts, &ops[end])
            || !matches!(ops[end].kind, OpKind::Return(_) | OpKind::Call(_))
            || matches!(&ops[end].kind, OpKind::Return(Some(v)) if answers_error(v))
        {
            return false;
        }
    }
    out.push(Hit {
        rule: RuleId::RelAckBeforeCommit,
        pos: end.map_or(ops[k].pos, |e| ops[e].pos),
        origin: None,
        message: format!(
            "the handler ends (answering 2xx, acknowledging the delivery) while the effect on line {} ({}) runs in work nobody waits for (a goroutine, a deferred callback or an unawaited call): a crash or failure after it loses the event",
            ops[k].pos.line,
            detached_name(facts, k),
        ),
        confidence: Confidence::Medium,
    });
    true
}

/// Whether `op` is in the `catch` of a `try`.
fn in_catch(facts: &FnFacts<'_>, op: &Op) -> bool {
    op.conds.iter().any(|&c| facts.func.conds[c].is_catch)
}

/// Whether op `k` applies the event in work nobody waits for (outside any `catch`; not a
/// synchronous driver's statement, which has finished when the next one runs).
fn detached_effect(facts: &FnFacts<'_>, k: usize) -> bool {
    let op = &facts.func.ops[k];
    let call = match &op.kind {
        OpKind::Call(c) => Some(c),
        _ => None,
    };
    // The whole event handed to a function of the project that runs detached
    // (`tokio::spawn(process_message(msg))`) applies it there, whatever it does.
    op.detached != 0
        && !call.is_some_and(synchronous)
        && (is_effect(&facts.acts[k], call) || super::marker_outside_tx::is_effect(facts, k))
        && !in_catch(facts, op)
}

/// What the detached effect `k` is: its statement, or the project function's name when that
/// is all that is known of it.
fn detached_name(facts: &FnFacts<'_>, k: usize) -> String {
    match facts.acts[k] {
        Act::Other => super::call_name(facts, k),
        ref act => super::describe(act),
    }
}

/// A wait for started work (`wg.Wait()`, `Promise.all(…)`, `asyncio.gather(…)`).
fn awaits(call: &Call) -> bool {
    matches!(
        call.method().as_str(),
        "wait" | "all" | "allsettled" | "gather" | "join" | "result"
    )
}

/// A returned error or failure status: the sender retries, nothing is acknowledged.
fn answers_error(value: &Expr) -> bool {
    let mut bad = false;
    value.walk(&mut |e| {
        if let Expr::Call(c) = e {
            bad |= status_of(c).is_some_and(|s| s >= 400)
                || matches!(c.name().as_str(), "fmt.Errorf" | "errors.New");
        }
    });
    bad
}

/// A broker ack or offset commit inside the open transaction that holds the effect: the
/// transaction commits after the ack.
fn acks_inside_tx(facts: &FnFacts<'_>, out: &mut Vec<Hit>) -> bool {
    let ops = &facts.func.ops;
    for (a, op) in ops.iter().enumerate() {
        let OpKind::Call(call) = &op.kind else {
            continue;
        };
        let Some(tx) = op.lexical_tx else { continue };
        let Some(what) = acknowledgement(call) else {
            continue;
        };
        if what == "answers 2xx" || in_duplicate_branch(facts, a) {
            continue;
        }
        let write = ops
            .iter()
            .enumerate()
            .find(|(k, o)| o.lexical_tx == Some(tx) && facts.acts[*k].is_db_write());
        // A write the linter cannot see (a command bus, a library call) still commits with
        // the transaction: any other call in it is the work.
        // The nearest such call before the ack, else the first after it.
        let is_work = |(k, o): &(usize, &Op)| {
            *k != a
                && o.lexical_tx == Some(tx)
                && matches!(&o.kind, OpKind::Call(c) if !is_logging(c)
                    && acknowledgement(c).is_none()
                    && !matches!(c.method().as_str(), "get" | "str" | "int" | "len" | "dumps" | "loads"))
        };
        let work = ops[..a]
            .iter()
            .enumerate()
            .rfind(|x| is_work(x))
            .or_else(|| ops.iter().enumerate().skip(a + 1).find(|x| is_work(x)));
        let (k, confidence, what_k) = match (write, work) {
            (Some((k, _)), _) => (k, Confidence::High, super::describe(&facts.acts[k])),
            (None, Some((k, o))) => {
                let OpKind::Call(c) = &o.kind else { continue };
                (k, Confidence::Medium, format!("{}()", c.name()))
            }
            (None, None) => continue,
        };
        out.push(Hit {
            rule: RuleId::RelAckBeforeCommit,
            pos: op.pos,
            origin: op.origin.clone(),
            message: format!(
                "{}() {what} inside the open transaction of line {} ({what_k}), which commits only after it: a failed commit loses the event",
                call.name(),
                ops[k].pos.line,
            ),
            confidence,
        });
        return true;
    }
    false
}

/// `print(…)`, `console.log(…)`, `logger.info(…)`, `log.Printf(…)`: no work.
fn is_logging(call: &Call) -> bool {
    let root = call
        .callee
        .first()
        .map(|r| r.to_lowercase())
        .unwrap_or_default();
    call.callee.len() == 1 && matches!(root.as_str(), "print" | "println")
        || matches!(
            root.as_str(),
            "console" | "log" | "logger" | "logging" | "fmt" | "slog"
        )
}

/// A synchronous database call that needs no await: better-sqlite3's
/// `db.prepare(sql).run(…)`, whose unawaited statement has finished when the next one runs.
fn synchronous(call: &Call) -> bool {
    call.callee.iter().any(|s| s == "prepare")
        && matches!(
            call.method().as_str(),
            "prepare" | "run" | "all" | "get" | "iterate"
        )
}

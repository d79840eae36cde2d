//! `REL_KEY_VOLATILE`: a dedup or idempotency key built from the clock, a random value or
//! UUID minted in the handler, the host or pod, an attempt counter or an id minted per
//! delivery attempt. Provider event ids (`evt_…`, `X-GitHub-Delivery`, `webhook-id`) and the
//! event's own fields are stable and never reported.

use super::Hit;
use crate::analysis::{Act, FnFacts};
use crate::finding::Confidence;
use crate::handlers::{is_entry, is_event};
use crate::ir::{Expr, Op, OpKind, Pos};
use crate::rule::RuleId;
use crate::words::{is_key_name, norm};

/// Methods that cut a time down to a bucket (day, month) or a fixed part of it.
const TRUNCATING: &[&str] = &[
    "slice",
    "substring",
    "substr",
    "split",
    "getmonth",
    "getfullyear",
    "getdate",
    "getday",
    "todatestring",
    "tolocaledatestring",
    "startofday",
    "startofmonth",
    "format",
    "strftime",
    "date",
    "truncate",
    "replace",
    // Ruby: `Time.now.to_date`, `Time.current.beginning_of_day`.
    "to_date",
    "beginning_of_day",
    "beginning_of_hour",
    "beginning_of_month",
];

/// Whole names of delivery-attempt counters.
const PER_ATTEMPT_EXACT: &[&str] = &[
    "attempt",
    "attempts",
    "attemptnumber",
    "retries",
    "retry",
    "retrycount",
    "retryattempt",
];

/// Parts of names of per-delivery values.
const PER_ATTEMPT: &[&str] = &[
    "deliverycount",
    "deliveryattempt",
    "redeliverycount",
    "redelivered",
    "approximatereceivecount",
    "receivecount",
    "receipthandle",
    "deliverytag",
    "numdelivered",
    "xrequestid",
    "requestid",
];

/// A call without arguments named as minting a fresh value (`randomString()`,
/// `generateMessageId()`, `makeId()`): a deterministic key needs an input.
fn mints(c: &crate::ir::Call) -> bool {
    let m = norm(&c.method());
    c.args.is_empty()
        && c.kwargs.is_empty()
        && ["random", "generate", "gen", "make", "new", "create"]
            .iter()
            .any(|p| m.starts_with(p))
        && ["id", "key", "string", "str", "token", "uuid", "hex"]
            .iter()
            .any(|s| m.ends_with(s))
}

/// What makes a value volatile, if anything.
/// A header or context value read by a name that is per attempt (`ctx.GetHeader("x-request-id")`,
/// `request.headers.get("X-Request-Id")`, gin's `ctx.GetString("request_id")`): its name.
fn per_attempt_read(c: &crate::ir::Call) -> Option<String> {
    const GETTERS: &[&str] = &[
        "get",
        "getheader",
        "header",
        "getstring",
        "value",
        "headers",
    ];
    if !GETTERS.contains(&norm(&c.method()).as_str()) {
        return None;
    }
    let name = c.args.first()?.string_text()?;
    let n = norm(&name);
    (PER_ATTEMPT_EXACT.contains(&n.as_str()) || PER_ATTEMPT.iter().any(|a| n.contains(a)))
        .then_some(name)
}

fn volatile(facts: &FnFacts<'_>, e: &Expr, depth: u8) -> Option<(String, bool, Option<Pos>)> {
    let mut found: Option<(String, bool, Option<Pos>)> = None;
    e.walk(&mut |x| {
        if found.is_some() {
            return;
        }
        match x {
            Expr::Call(outer) => {
                // The call and the calls it is made on (`time.Now().UnixNano()`).
                let mut chain = Some(outer.as_ref());
                while let Some(c) = chain {
                    chain = c.receiver.as_deref();
                    if found.is_some() {
                        break;
                    }
                    // `new Date().toISOString().slice(0, 10)`, `now.getMonth()`: a deliberate
                    // time bucket (a daily job's key), not a per-delivery value.
                    if c.receiver.is_some() && TRUNCATING.contains(&c.method().as_str()) {
                        break;
                    }
                    let name = c.name();
                    let n = norm(&name);
                    let m = c.method();
                    let clock = matches!(
                        n.as_str(),
                        "datenow"
                            | "date"
                            | "performancenow"
                            | "timetime"
                            | "timetimens"
                            | "timemonotonic"
                            | "datetimenow"
                            | "datetimeutcnow"
                            | "datetimedatetimenow"
                            | "datetimedatetimeutcnow"
                            | "timezonenow"
                            | "timenow"
                            | "moment"
                            | "dayjs"
                            | "processhrtime"
                            | "now"
                            | "utcnow"
                            // Ruby: `Time.current`, `DateTime.current`, `Process.clock_gettime`.
                            | "timecurrent"
                            | "datetimecurrent"
                            | "processclockgettime"
                            // Rust: std, chrono, time.
                            | "systemtimenow"
                            | "chronoutcnow"
                            | "localnow"
                            | "chronolocalnow"
                            | "offsetdatetimenowutc"
                    ) || (c.is_new && n == "date" && c.args.is_empty())
                        || crate::lang::jvm_vocab::is_clock(&n);
                    let random = matches!(
                        n.as_str(),
                        "mathrandom"
                            | "uuidv4"
                            | "uuid"
                            | "v4"
                            | "uuidv1"
                            | "v1"
                            | "randomuuid"
                            | "cryptorandomuuid"
                            | "cryptorandombytes"
                            | "randombytes"
                            | "nanoid"
                            | "cuid"
                            | "createid"
                            | "ulid"
                            | "uuiduuid4"
                            | "uuid4"
                            | "uuiduuid1"
                            | "uuid1"
                            | "secretstokenhex"
                            | "secretstokenurlsafe"
                            | "randomrandom"
                            | "randomrandint"
                            | "osurandom"
                            | "uuidnew"
                            | "uuidnewstring"
                            | "uuidnewv4"
                            | "uuidnewrandom"
                            | "randint"
                            | "randomint"
                            | "cryptorandomint"
                            | "randintn"
                            | "randint63"
                            | "ksuidnew"
                            | "xidnew"
                            | "objectid"
                            | "bsonnewobjectid"
                            | "primitivenewobjectid"
                            | "generateuuid"
                            // Rust's uuid crate.
                            | "uuiduuidnewv4"
                            | "uuidnowv7"
                            | "uuiduuidnowv7"
                    ) || (m == "random" && c.callee.len() == 2)
                        // Ruby: `SecureRandom.uuid`, `SecureRandom.hex(8)`, `rand(1000)`.
                        || n.starts_with("securerandom")
                        || n == "rand"
                        || crate::lang::jvm_vocab::is_random(&n)
                        || mints(c);
                    let host = matches!(
                        n.as_str(),
                        "oshostname"
                            | "sockethostname"
                            | "socketgethostname"
                            | "gethostname"
                            | "platformnode"
                            | "osgetpid"
                            | "getpid"
                            | "processpid"
                    );
                    let hostenv = (n.starts_with("osgetenv")
                        || n.starts_with("osenvironget")
                        || n == "getenv"
                        || n == "systemgetenv")
                        && c.args.first().and_then(Expr::string_text).is_some_and(|s| {
                            let s = norm(&s);
                            s.contains("hostname") || s.contains("podname") || s.contains("podid")
                        });
                    if let Some(header) = per_attempt_read(c) {
                        found = Some((
                            format!("a per-attempt value ({name}({header:?}))"),
                            false,
                            Some(c.pos),
                        ));
                    } else if clock {
                        found = Some((format!("the clock ({name}())"), true, Some(c.pos)));
                    } else if random {
                        found = Some((
                            format!("a value minted per attempt ({name}())"),
                            true,
                            Some(c.pos),
                        ));
                    } else if host || hostenv {
                        found = Some((format!("the host ({name}())"), true, Some(c.pos)));
                    }
                }
            }
            Expr::Path(p) => {
                let joined = p.join(".");
                let n = norm(&joined);
                if n.starts_with("processenvhostname")
                    || n.ends_with("localhosthostname")
                    || n == "processpid"
                    || n.starts_with("osenvironhostname")
                    || n.starts_with("envhostname")
                {
                    found = Some((format!("the host ({joined})"), true, None));
                } else if let Some(last) = p.last() {
                    let l = norm(last);
                    // Names of delivery attempts and per-attempt ids (a business counter such
                    // as `invoice.failedAttempts` is stored, so stable across redeliveries).
                    let attempt = PER_ATTEMPT_EXACT.contains(&l.as_str())
                        || PER_ATTEMPT.iter().any(|a| l.contains(a));
                    if attempt {
                        found = Some((format!("a per-attempt value ({joined})"), false, None));
                    } else if p.len() == 1
                        && depth < 3
                        && let Some(v) = facts.values.get(&p[0])
                        && let Some((what, strong, _)) = volatile(facts, v, depth + 1)
                    {
                        found = Some((format!("{what} via {}", p[0]), strong, None));
                    }
                }
            }
            _ => {}
        }
    });
    found
}

/// `request.headers["Idempotency-Key"] || SecureRandom.uuid`: a value read from the
/// idempotency header is the request's key, whatever the variable holding it is called.
fn reads_idempotency_header(value: &Expr) -> bool {
    // A header's name (`Idempotency-Key`, Rack's `HTTP_IDEMPOTENCY_KEY`), not a setter
    // (`setIdempotencyKey(k)`) that only passes a key on.
    let header = |s: &str| {
        crate::words::norm(s).contains("idempotency") && (s.contains('-') || s.starts_with("HTTP_"))
    };
    let mut found = false;
    value.walk(&mut |e| match e {
        Expr::Path(p) => found |= p.iter().any(|s| header(s)),
        Expr::Str(s) => found |= header(s),
        _ => {}
    });
    found
}

/// Whether the value is minted only while the key is still missing (`update!(external_id:
/// SecureRandom.uuid) if account.external_id.blank?`): once stored, every later delivery
/// finds it and mints nothing, so the key is the row's, not the attempt's.
fn minted_once(facts: &FnFacts<'_>, op: &Op, key: &str) -> bool {
    let key = crate::words::norm(key.rsplit('.').next().unwrap_or(key));
    op.conds.iter().any(|&c| {
        let words = facts.func.conds[c].test.words();
        words.iter().any(|w| crate::words::norm(w) == key)
            && words.iter().any(|w| crate::words::tests_presence(w))
    })
}

pub(super) fn check(facts: &FnFacts<'_>, out: &mut Vec<Hit>) {
    // A key minted in a handler: helpers and scripts are left alone.
    if !is_event(facts.func) && !is_entry(facts.func) {
        return;
    }
    let mut report =
        |op: &Op, pos: Pos, key: &str, (what, strong, at): (String, bool, Option<Pos>)| {
            if minted_once(facts, op, key) {
                return;
            }
            // Point at the volatile call when it is on the statement's line or below (in the
            // handler: an inlined helper's positions are the helper's).
            let pos = if op.origin.is_some() {
                op.pos
            } else {
                at.filter(|p| p.line >= pos.line).unwrap_or(pos)
            };
            let confidence = if strong {
                Confidence::High
            } else {
                Confidence::Medium
            };
            out.push(Hit {
                rule: RuleId::RelKeyVolatile,
                pos,
                origin: op.origin.clone(),
                message: format!(
                    "key `{key}` is built from {what}, which differs on every delivery of one event"
                ),
                confidence,
            });
        };
    for (i, op) in facts.func.ops.iter().enumerate() {
        match &op.kind {
            OpKind::Assign { targets, value, .. } => {
                if let Some(t) = targets.iter().find(|t| {
                    is_key_name(t.rsplit('.').next().unwrap_or(t))
                        || reads_idempotency_header(value)
                }) && let Some(found) = volatile(facts, value, 0)
                {
                    report(op, op.pos, t, found);
                } else if matches!(value, Expr::Object { .. } | Expr::List(_)) {
                    // `const message = { ...event, messageId: generateMessageId() }`, also
                    // nested (`{ data: [{ event_id: orderId }] }`).
                    let mut fields: Vec<(&String, &Expr)> = Vec::new();
                    value.walk(&mut |e| {
                        if let Expr::Object { fields: f, .. } = e {
                            fields.extend(f.iter().map(|(k, v)| (k, v)));
                        }
                    });
                    if let Some((k, found)) = fields
                        .into_iter()
                        .filter(|(k, _)| is_key_name(k))
                        .find_map(|(k, v)| Some((k, volatile(facts, v, 0)?)))
                    {
                        report(op, op.pos, k, found);
                    }
                }
            }
            OpKind::Call(call) => {
                let mut keyed: Vec<(String, &Expr)> =
                    call.kwargs.iter().map(|(k, v)| (k.clone(), v)).collect();
                for a in call.args.iter().chain(call.kwargs.iter().map(|(_, v)| v)) {
                    a.walk(&mut |e| {
                        if let Expr::Object { fields, .. } = e {
                            keyed.extend(fields.iter().map(|(k, v)| (k.clone(), v)));
                        }
                    });
                }
                // `headers.set("Idempotency-Key", v)`, `req.Header.Set("Idempotency-Key", v)`
                // Rust's `HeaderMap::insert`/`append` too.
                // Java's `headers.put(SqsMessageHeaders.SQS_DEDUPLICATION_ID_HEADER, v)`: a
                // header map's entry named by a constant.
                if matches!(
                    call.method().as_str(),
                    "set" | "add" | "setheader" | "header" | "insert" | "append" | "put"
                ) && call.args.len() >= 2
                    && let Some(name) = call.args[0]
                        .string_text()
                        .or_else(|| header_constant(&call.args[0]))
                {
                    keyed.push((name, &call.args[1]));
                }
                for (k, v) in keyed {
                    if is_key_name(&k)
                        && !matches!(v, Expr::Path(p) if p.len() == 1 && is_key_name(&p[0]))
                        && let Some(found) = volatile(facts, v, 0)
                    {
                        report(op, call.pos, &k, found);
                    }
                }
                // A dedup insert (conflict-ignoring, or into a marker table) whose id is
                // minted here: the conflict it relies on never happens.
                if (matches!(facts.acts[i], Act::OrmCreate { safe: true, .. })
                    || super::is_marker(&facts.acts[i]))
                    && !conflict_on_other_key(facts, i)
                {
                    let mut ids: Vec<(String, &Expr)> = Vec::new();
                    for e in call.arg_exprs() {
                        if let Expr::Object { fields, .. } = e {
                            ids.extend(
                                fields
                                    .iter()
                                    .filter(|(k, _)| norm(k) == "id")
                                    .map(|(k, v)| (k.clone(), v)),
                            );
                        }
                    }
                    if let Some((k, found)) = ids
                        .into_iter()
                        .find_map(|(k, v)| Some((k, volatile(facts, v, 0)?)))
                    {
                        report(
                            op,
                            call.pos,
                            &format!("{k} (the dedup insert's key)"),
                            found,
                        );
                    }
                }
                // A dedup claim (`SET key NX`) whose key is volatile.
                if let Act::RedisWrite { nx: true, .. } = facts.acts[i] {
                    // A key variable named like one was already checked where it was built.
                    // Go's clients take the context first: `rdb.SetNX(ctx, key, …)`.
                    let key = call.args.iter().find(|a| !crate::analysis::is_context(a));
                    let named =
                        matches!(key, Some(Expr::Path(p)) if p.iter().any(|s| is_key_name(s)));
                    if let Some(k) = key.filter(|_| !named)
                        && let Some(found) = volatile(facts, k, 0)
                    {
                        report(op, call.pos, "SET NX key", found);
                    }
                }
            }
            _ => {}
        }
    }
}

/// A header's name given as a constant (`SqsMessageHeaders.SQS_DEDUPLICATION_ID_HEADER`):
/// its last segment, upper case.
fn header_constant(e: &Expr) -> Option<String> {
    let Expr::Path(p) = e else { return None };
    let last = p.last()?;
    (last.len() > 2
        && last
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
    .then(|| last.clone())
}

/// Whether the insert's chain names the column its conflict is on, and it is not the id
/// (Drizzle `.values({ id: randomUUID(), … }).onConflictDoNothing({ target: t.eventId })`):
/// the minted id is then only the row's surrogate key.
fn conflict_on_other_key(facts: &FnFacts<'_>, i: usize) -> bool {
    let OpKind::Call(call) = &facts.func.ops[i].kind else {
        return false;
    };
    facts.func.ops[i + 1..]
        .iter()
        .map_while(|op| match &op.kind {
            OpKind::Call(c) if c.callee.starts_with(&call.callee) => Some(c),
            _ => None,
        })
        .filter(|c| c.method().contains("onconflict"))
        .any(|c| {
            // The column is the target path's last segment (`plans.id` is the id).
            let mut other = false;
            for a in &c.args {
                a.walk(&mut |e| {
                    if let Expr::Path(p) = e
                        && p.len() > 1
                    {
                        other |= p.last().is_some_and(|col| norm(col) != "id");
                    }
                });
            }
            other
        })
}

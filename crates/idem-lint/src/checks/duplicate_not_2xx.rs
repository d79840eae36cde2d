//! `REL_DUPLICATE_NOT_2XX`: a duplicate delivery answered with 4xx/5xx, or refused with an
//! exception or a returned error. The event was already applied; an error makes the sender
//! retry it (Stripe for three days, GitHub and brokers until it dead-letters).

use super::{Hit, in_duplicate_branch, is_marker, is_marker_read};
use crate::analysis::{Act, FnFacts};
use crate::finding::Confidence;
use crate::handlers::is_event;
use crate::ir::{Call, Expr, OpKind};
use crate::rule::RuleId;
use crate::sql::SqlStmt;
use crate::words::{is_duplicate_word, norm, status_constant};

/// The status a call answers with, if it is a response: `res.status(409)`,
/// `reply.code(409)`, `HTTPException(status_code=409)`, `abort(409)`,
/// `http.Error(w, m, http.StatusConflict)`, `c.JSON(409, …)`, `new Response(b, {status})`.
pub(super) fn status_of(call: &Call) -> Option<u16> {
    if let Some(code) = crate::lang::jvm_vocab::response_status(call) {
        return Some(code);
    }
    let m = call.method();
    let first = call.args.first().and_then(Expr::status_code);
    match m.as_str() {
        "status"
        | "code"
        | "sendstatus"
        | "writeheader"
        | "abortwithstatus"
        | "abortwithstatusjson"
        | "abortwitherror"
        | "abort"
        | "json"
        | "string"
        | "nocontent"
        | "jsonp"
        | "html"
        | "xml"
        | "data"
        | "render"
        | "head"
        | "setstatus"
        | "status_code" => first.or_else(|| call.option("status").and_then(Expr::status_code)),
        "error" if call.callee.first().is_some_and(|r| r == "http") => {
            call.args.get(2).and_then(Expr::status_code)
        }
        _ => {
            let name = call.callee.last().map(String::as_str).unwrap_or("");
            let kw = ["status_code", "status", "code"]
                .iter()
                .find_map(|k| call.option(k).and_then(Expr::status_code));
            let lower = name.to_ascii_lowercase();
            if name.ends_with("Exception") || name.ends_with("Error") || name.contains("Response") {
                // `common.JSONError(w, http.StatusConflict, …)`: a project's answer helper
                // named for an error carries its status among the first arguments.
                kw.or(first)
                    .or_else(|| django_status(name))
                    .or_else(|| call.args.iter().take(3).find_map(Expr::status_code))
            } else if ["json", "error", "respond", "reply", "fail"]
                .iter()
                .any(|w| lower.contains(w))
            {
                // A project's own answer helper: `ErrorJSON(c, 500, "…", err)`,
                // `respondError(w, http.StatusConflict, …)`.
                kw.or_else(|| call.args.iter().take(3).find_map(Expr::status_code))
            } else {
                None
            }
        }
    }
}

fn django_status(name: &str) -> Option<u16> {
    name.strip_prefix("HttpResponse").and_then(status_constant)
}

/// Whether the expression raises or returns an error value (`throw new Error(…)`,
/// `raise ValueError(…)`, Go `return fmt.Errorf(…)` / `errors.New(…)`).
/// `throw new DuplicateEventException(…)` that the handler itself catches by its type
/// (`catch (DuplicateEventException e) { log… }`) and neither rethrows nor answers as an
/// error: the duplicate ends normally.
fn caught_quietly(facts: &FnFacts<'_>, i: usize) -> bool {
    let OpKind::Throw(Some(Expr::Call(thrown))) = &facts.func.ops[i].kind else {
        return false;
    };
    let Some(ty) = thrown.callee.last().map(|t| norm(t)) else {
        return false;
    };
    facts.func.conds.iter().enumerate().any(|(k, cond)| {
        let catches = cond.is_catch
            && matches!(&cond.test, Expr::List(items) if items.iter().any(
                |e| matches!(e, Expr::Path(p) if p.len() == 1 && norm(&p[0]) == ty)
            ));
        catches
            && !facts.func.ops.iter().any(|o| {
                o.conds.contains(&k)
                    && match &o.kind {
                        OpKind::Throw(_) => true,
                        OpKind::Return(Some(v)) => is_error_value(v),
                        OpKind::Call(c) => status_of(c).is_some_and(|s| s >= 400),
                        _ => false,
                    }
            })
    })
}

fn is_error_value(e: &Expr) -> bool {
    let mut found = false;
    e.walk(&mut |x| {
        if let Expr::Call(c) = x {
            let n = norm(&c.name());
            if matches!(
                n.as_str(),
                "errorsnew"
                    | "fmterrorf"
                    | "errorswrap"
                    | "errorswrapf"
                    | "statuserror"
                    | "statuserrorf"
            ) {
                found = true;
            }
        }
    });
    found
}

/// Whether op `i` is in the `catch` of a dedup claim: the last write before the catch is an
/// insert into a dedup table (`try { await createEvent(event.id) } catch { throw new
/// BadRequestException() }`), so what the catch sees is the duplicate.
fn claim_failed(facts: &FnFacts<'_>, i: usize) -> bool {
    let ops = &facts.func.ops;
    // The handler's own answer, directly in the catch, and a catch that does not tell errors
    // apart (one that branches on a unique violation answers the others with this).
    let Some(&c) = ops[i].conds.last() else {
        return false;
    };
    if ops[i].origin.is_some()
        || !facts.func.conds[c].is_catch
        || ops
            .iter()
            .any(|o| o.conds.contains(&c) && o.conds.last() != Some(&c))
    {
        return false;
    }
    let last_write = (0..i).rev().find(|&k| {
        !ops[k].conds.contains(&c) && (facts.acts[k].is_db_write() || is_marker(&facts.acts[k]))
    });
    // A claim that ignores conflicts (`ON CONFLICT DO NOTHING`, `skipDuplicates`, `SET NX`)
    // never fails on a duplicate: its catch sees only real failures.
    // A handler that answered the duplicate before claiming (`if (repo.existsByEventId(id))
    // return ok()`) sees in a catch that tells nothing apart the failures and the rare race,
    // whose retry meets that answer.
    last_write.is_some_and(|k| {
        is_marker(&facts.acts[k])
            && fails_on_duplicate(&facts.acts[k])
            && !(0..k).any(|j| matches!(ops[j].kind, OpKind::Return(_)) && on_marker_read(facts, j))
    })
}

/// Whether op `j` runs in the branch where a dedup look-up found the event (`if
/// (repo.existsByEventId(id)) return …`), or where a condition says it is a duplicate.
fn on_marker_read(facts: &FnFacts<'_>, j: usize) -> bool {
    let ops = &facts.func.ops;
    let reads: Vec<crate::ir::Pos> = (0..j)
        .filter(|&m| is_marker_read(&facts.acts[m]))
        .filter_map(|m| match &ops[m].kind {
            OpKind::Call(c) => Some(c.pos),
            _ => None,
        })
        .collect();
    in_duplicate_branch(facts, j)
        || ops[j].conds.iter().any(|&c| {
            let cond = &facts.func.conds[c];
            let mut found = false;
            cond.test.walk(&mut |e| {
                found |= matches!(e, Expr::Call(call) if reads.contains(&call.pos));
            });
            found && !cond.negated && !cond.is_catch
        })
}

/// Whether the handler catches the errors of `helper`: an `Err` arm or `if let Err` over its
/// call, or over a variable holding its result.
fn caught_by_caller(facts: &FnFacts<'_>, helper: &str) -> bool {
    let name = helper
        .rsplit(['.', ':'])
        .next()
        .unwrap_or(helper)
        .to_lowercase();
    if name.is_empty() {
        return false;
    }
    let names = |e: &Expr| {
        let mut hit = false;
        e.walk(&mut |x| {
            if let Expr::Call(c) = x {
                hit |= c.method() == name;
            }
        });
        hit
    };
    facts.func.conds.iter().filter(|c| c.is_catch).any(|c| {
        let Expr::Binary { op, left, .. } = &c.test else {
            return false;
        };
        op == "=="
            && (names(left)
                || matches!(left.as_ref(), Expr::Path(p) if p.len() == 1
                    && facts.values.get(&p[0]).is_some_and(names)))
    })
}

/// Whether a claim raises on a duplicate (a plain insert against a unique key).
fn fails_on_duplicate(act: &Act) -> bool {
    match act {
        Act::Sql(SqlStmt::Insert {
            conflict_clause, ..
        }) => !conflict_clause,
        Act::OrmCreate { safe, .. } => !safe,
        Act::RedisWrite { nx, .. } => !nx,
        _ => true,
    }
}

pub(super) fn check(facts: &FnFacts<'_>, out: &mut Vec<Hit>) {
    // A route not known as an event receiver is judged only on an answer that says itself
    // that it refuses a repeated event (`writeError(w, http.StatusConflict, "event already
    // processed")`): a 409 for a repeated user or order is an API's business.
    let any_route = !is_event(facts.func);
    if any_route && facts.func.kind != crate::ir::HandlerKind::Route {
        return;
    }
    // Variables holding the result of a dedup claim or look-up, and the claims and look-ups
    // a condition makes itself (`if (processedEvents.existsById(id))`).
    // Each with the op that assigned it.
    let mut claim_vars: Vec<(String, usize)> = Vec::new();
    let claim_calls: Vec<crate::ir::Pos> = facts
        .func
        .ops
        .iter()
        .zip(&facts.acts)
        .filter(|(_, act)| is_marker(act) || is_marker_read(act))
        .filter_map(|(op, _)| match &op.kind {
            OpKind::Call(c) => Some(c.pos),
            _ => None,
        })
        .collect();
    for (i, op) in facts.func.ops.iter().enumerate() {
        if let OpKind::Assign { targets, .. } = &op.kind
            && i > 0
            && (is_marker(&facts.acts[i - 1]) || is_marker_read(&facts.acts[i - 1]))
        {
            // A conflict-ignoring claim does not fail on a duplicate: its error is a failure.
            let ignores_conflicts = matches!(
                facts.acts[i - 1],
                Act::OrmCreate { safe: true, .. }
                    | Act::Sql(SqlStmt::Insert {
                        conflict_clause: true,
                        ..
                    })
            );
            claim_vars.extend(
                (targets.iter())
                    .filter(|t| {
                        !(ignores_conflicts && matches!(crate::ir::as_written(t), "err" | "error"))
                    })
                    .map(|t| (norm(t), i)),
            );
        }
    }
    // A claim's result still held at op `i`: `err` assigned by the claim and not by a later
    // call (`if err := s.parse(p); err != nil` after the claim is another failure).
    // A helper's `err` is its own variable, not the caller's: a condition reads the
    // variables of the function it is written in (that of the first op it governs).
    let scope = |k: usize| facts.func.ops[k].origin.as_ref().map(|o| &o.helper);
    let mut cond_scope = vec![None; facts.func.conds.len()];
    for (k, op) in facts.func.ops.iter().enumerate() {
        for &c in &op.conds {
            cond_scope[c].get_or_insert(scope(k));
        }
    }
    let holds_claim = |word: &str, i: usize, c: usize| {
        let word = norm(word);
        let last = (0..i).rev().find(|&k| {
            cond_scope[c].is_none_or(|s| s == scope(k))
                && matches!(&facts.func.ops[k].kind, OpKind::Assign { targets, .. }
                if targets.iter().any(|t| norm(t) == word))
        });
        last.is_some_and(|k| claim_vars.iter().any(|(v, at)| *v == word && *at == k))
    };
    for (i, op) in facts.func.ops.iter().enumerate() {
        let (what, message_words) = match &op.kind {
            OpKind::Call(call) => {
                let mut chain = Some(call);
                let mut status = None;
                let mut words = Vec::new();
                while let Some(c) = chain {
                    status = status
                        .or_else(|| status_of(c))
                        .or_else(|| status_given(facts, c));
                    // Ruby and Python give the message by keyword (`render json: { error: … },
                    // status: :conflict`).
                    let kw = c.kwargs.iter().map(|(_, v)| v);
                    words.extend(c.args.iter().chain(kw).flat_map(Expr::words));
                    chain = c.receiver.as_deref();
                }
                match status {
                    Some(s) if s >= 400 => (format!("answered {s}"), words),
                    _ => continue,
                }
            }
            // A helper's error its caller matches on (`match svc.place(o).await { Err(_) =>
            // … }`): the caller's arm answers, not the error.
            OpKind::Throw(_)
                if op
                    .origin
                    .as_ref()
                    .is_some_and(|o| caught_by_caller(facts, &o.helper)) =>
            {
                continue;
            }
            OpKind::Throw(value) => {
                let status = match value {
                    Some(Expr::Call(c)) => status_of(c),
                    _ => None,
                };
                if status.is_some_and(|s| s < 400) {
                    continue;
                }
                let what = status.map_or_else(
                    || "refused with an exception".to_string(),
                    |s| format!("answered {s}"),
                );
                (what, value.as_ref().map(Expr::words).unwrap_or_default())
            }
            OpKind::Return(Some(value)) if is_error_value(value) => {
                ("refused with a returned error".to_string(), value.words())
            }
            OpKind::Return(Some(Expr::List(items))) => {
                match items.last().and_then(Expr::status_code) {
                    Some(s) if s >= 400 => (
                        format!("answered {s}"),
                        items.iter().flat_map(Expr::words).collect(),
                    ),
                    _ => continue,
                }
            }
            _ => continue,
        };
        let by_message = message_words.iter().any(|w| is_duplicate_word(w));
        if any_route {
            // The branch's own words count too (`if errors.Is(err, ErrEventDuplicate)`): an
            // answer helper followed into its body leaves its message behind.
            let cond_words: Vec<String> = (op.conds.iter())
                .filter(|&&c| !facts.func.conds[c].is_catch)
                .flat_map(|&c| facts.func.conds[c].test.words())
                .collect();
            let refused = by_message || in_duplicate_branch(facts, i);
            // The answer's own field named `message` (`render json: { message: "App with
            // that name already exists" }`) names no delivery: its text may.
            let said: Vec<String> = (message_words.iter())
                .filter(|w| !matches!(w.as_str(), "message" | "msg"))
                .cloned()
                .collect();
            if !(refused && (names_delivery(&said) || names_delivery(&cond_words))) {
                continue;
            }
        }
        let by_claim = op.conds.iter().any(|&c| {
            let cond = &facts.func.conds[c];
            let mut makes_claim = false;
            cond.test.walk(&mut |e| {
                if let Expr::Call(call) = e {
                    makes_claim |= claim_calls.contains(&call.pos);
                }
            });
            !cond.is_catch
                && (makes_claim || cond.test.words().iter().any(|w| holds_claim(w, i, c)))
        });
        let by_catch = op.conds.iter().any(|&c| {
            let cond = &facts.func.conds[c];
            cond.is_catch && cond.test.words().iter().any(|w| is_duplicate_word(w))
        });
        // `rescue RecordNotUnique` then `raise … unless Order.exists?(…)`: the branch where the
        // row turned out missing is a real failure, not the duplicate.
        let absent_branch = op.conds.iter().any(|&c| {
            let cond = &facts.func.conds[c];
            let (test, not) = match &cond.test {
                Expr::Not(inner) => (inner.as_ref(), true),
                other => (other, false),
            };
            !cond.is_catch
                && cond.negated ^ not
                && matches!(test, Expr::Call(c) if {
                    let m = c.method();
                    m == "exists" || m.starts_with("find_by") || m == "findfirst" || m == "findone"
                })
        });
        let by_catch = by_catch && !absent_branch;
        let by_claim_catch = claim_failed(facts, i) && !absent_branch;
        let dup_branch =
            (in_duplicate_branch(facts, i) || found_by_event_id(facts, i)) && !absent_branch;
        if !(by_message || by_claim || by_catch || by_claim_catch || dup_branch) {
            continue;
        }
        if caught_quietly(facts, i) || after_claim(facts, i) && !by_claim && !by_claim_catch {
            continue;
        }
        // `except IntegrityError: if <it was this event>: return …; raise`: the duplicate was
        // answered above, the re-raise is for other conflicts.
        let rethrow = matches!(&op.kind, OpKind::Throw(None))
            || matches!(&op.kind, OpKind::Throw(Some(Expr::Path(p))) if p.len() == 1);
        // `if errors.Is(err, gorm.ErrDuplicatedKey) { … return }` then a 500: the duplicate
        // was answered in the branch above; the rest are failures.
        let answered_above = facts.func.ops[..i].iter().enumerate().any(|(j, o)| {
            matches!(o.kind, OpKind::Return(_))
                && o.conds.len() > op.conds.len()
                && o.conds.starts_with(&op.conds)
                && in_duplicate_branch(facts, j)
        });
        // `if event.persisted? && event.processed? then return 200`, later `if event.save …
        // else 422`: the duplicate was answered by the look-up before the claim; the claim's
        // failure is a validation error or a rare concurrent copy.
        let answered_before = facts.func.ops[..i].iter().enumerate().any(|(j, o)| {
            matches!(o.kind, OpKind::Return(_))
                && !o.conds.is_empty()
                && o.conds.iter().all(|c| !op.conds.contains(c))
                && in_duplicate_branch(facts, j)
        });
        if (by_claim || by_catch || by_claim_catch)
            && !by_message
            && (answered_above || answered_before && !dup_branch)
        {
            continue;
        }
        if by_catch
            && !by_message
            && rethrow
            && facts.func.ops[..i].iter().any(|o| {
                matches!(o.kind, OpKind::Return(_))
                    && o.conds.len() > op.conds.len()
                    && o.conds.starts_with(&op.conds)
            })
        {
            continue;
        }
        out.push(Hit {
            rule: RuleId::RelDuplicateNot2xx,
            pos: op.pos,
            origin: op.origin.clone(),
            message: format!("a duplicate delivery is {what}: the sender will retry it"),
            // A route known only by its refusal's words: medium.
            confidence: if !any_route
                && (by_message || by_catch || by_claim_catch || in_duplicate_branch(facts, i))
            {
                Confidence::High
            } else {
                Confidence::Medium
            },
        });
    }
}

/// Whether op `i`, in a helper, runs only after the caller claimed the event (a marker written
/// or read before the call, on a path to it): a redelivery stops at that claim, so the
/// helper's "already exists" is a conflict of the business (a second instance for one
/// customer), not a duplicate delivery.
fn after_claim(facts: &FnFacts<'_>, i: usize) -> bool {
    let ops = &facts.func.ops;
    let Some(helper) = ops[i].origin.as_ref().map(|o| &o.helper) else {
        return false;
    };
    (0..i).any(|k| {
        (is_marker(&facts.acts[k]) || is_marker_read(&facts.acts[k]))
            && ops[k].origin.as_ref().map(|o| &o.helper) != Some(helper)
            && !crate::branches::exclusive(facts.func, k, i)
    })
}

/// The status of an answer whose code was passed in (`c.JSON(status, …)` inside the project's
/// own `ErrorJSON(c, 409, …)`, inlined: `status` holds 409).
fn status_given(facts: &FnFacts<'_>, call: &Call) -> Option<u16> {
    let given = |e: &Expr| match e {
        Expr::Path(p) if p.len() == 1 => facts
            .values
            .get(&p[0])
            .filter(|v| v.status_code().is_some())
            .cloned(),
        _ => None,
    };
    if !call.args.iter().any(|a| given(a).is_some()) {
        return None;
    }
    let resolved = Call {
        args: call
            .args
            .iter()
            .map(|a| given(a).unwrap_or_else(|| a.clone()))
            .collect(),
        ..call.clone()
    };
    status_of(&resolved)
}

/// Whether an answer's words name a delivery rather than a business object: "event already
/// processed", "duplicate webhook", "duplicate delivery id".
fn names_delivery(words: &[String]) -> bool {
    words.iter().any(|w| {
        let lower = w.to_lowercase();
        let tokens: Vec<&str> = lower
            .split(|c: char| !c.is_alphanumeric())
            .filter(|t| !t.is_empty())
            .collect();
        // A word, or an error named for it (`ErrEventDuplicate`).
        let has = |d: &str| {
            tokens
                .iter()
                .any(|t| *t == d || t.starts_with("err") && t.contains(d))
        };
        // "event" alone is a calendar's or a ticket's as often: it names a delivery only
        // beside a word of handling ("event already processed", `ErrEventDuplicate`).
        // "Content change already received": what is received twice was delivered, whatever
        // it is called (a user or an order is created, not received).
        let received_again = tokens
            .windows(2)
            .any(|w| w[0] == "already" && matches!(w[1], "received" | "delivered"));
        received_again
            || ["webhook", "delivery", "notification", "message", "replay"]
                .iter()
                .any(|d| has(d))
            || has("event")
                && tokens.iter().any(|t| {
                    [
                        "processed",
                        "handled",
                        "received",
                        "delivered",
                        "consumed",
                        "duplicate",
                    ]
                    .iter()
                    .any(|h| t.contains(h))
                })
    })
}

/// Whether op `i` runs in the branch where a look-up by the event's own id found a row (`if
/// await repo.exist(db, transaction_id=data.transaction_id): raise HTTPException(400, …)`):
/// that branch is the redelivery.
fn found_by_event_id(facts: &FnFacts<'_>, i: usize) -> bool {
    facts.func.ops[i].conds.iter().any(|&c| {
        let cond = &facts.func.conds[c];
        let Expr::Call(call) = &cond.test else {
            return false;
        };
        let m = call.method();
        let lookup =
            m.starts_with("exist") || m == "count" || m.starts_with("findby") && m.ends_with("id");
        let by_id = |e: &Expr| {
            let mut hit = false;
            e.walk(&mut |x| {
                if let Expr::Path(p) = x
                    && p.len() > 1
                    && p.last().is_some_and(|l| norm(l).ends_with("id"))
                {
                    hit |= facts.mentions_tainted(x);
                }
            });
            hit
        };
        !cond.negated
            && !cond.is_catch
            && lookup
            && (call.arg_exprs().into_iter().any(by_id)
                || call.kwargs.iter().any(|(_, v)| by_id(v)))
    })
}

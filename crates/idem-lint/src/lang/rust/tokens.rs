//! Macro arguments: tree-sitter-rust leaves a macro's arguments as a token tree, so the
//! common shapes are read back from the tokens: comma-separated expressions made of paths,
//! literals, calls, method calls, field accesses, `json!`-style objects and binary operators
//! (`sqlx::query!("…", event.id)`, `format!("{}-{}", id, Utc::now())`, `json!({"id": id})`).

use tree_sitter::Node;

use super::super::builder::call_pos;
use super::chain::raw_string;
use super::{Lower, kids, vocab};
use crate::ir::{Call, Expr, OpKind};

/// All children of a token tree, punctuation included, without its delimiters.
fn tokens(tree: Node<'_>) -> Vec<Node<'_>> {
    let mut cursor = tree.walk();
    let all: Vec<Node<'_>> = tree
        .children(&mut cursor)
        .filter(|c| !matches!(c.kind(), "line_comment" | "block_comment"))
        .collect();
    let n = all.len();
    if n >= 2 && matches!(all[0].kind(), "(" | "[" | "{") {
        all[1..n - 1].to_vec()
    } else {
        all
    }
}

/// Splits tokens at top-level commas.
fn split<'t>(toks: &[Node<'t>]) -> Vec<Vec<Node<'t>>> {
    let mut out = vec![Vec::new()];
    for t in toks {
        if t.kind() == "," {
            out.push(Vec::new());
        } else if let Some(last) = out.last_mut() {
            last.push(*t);
        }
    }
    out.retain(|s| !s.is_empty());
    out
}

/// The positional and named (`name = value`) arguments of a macro.
pub(super) fn macro_args(
    lower: &mut Lower<'_>,
    tree: Node<'_>,
) -> (Vec<Expr>, Vec<(String, Expr)>) {
    let mut args = Vec::new();
    let mut kwargs = Vec::new();
    if !lower.b.enter() {
        return (args, kwargs);
    }
    let toks = tokens(tree);
    // `json!({ … })`: one object.
    let open = tree.child(0).map(|c| c.kind());
    if open == Some("{") {
        args.push(object(lower, &toks));
        lower.b.leave();
        return (args, kwargs);
    }
    for seg in split(&toks) {
        if seg.len() > 2
            && seg[0].kind() == "identifier"
            && seg[1].kind() == "="
            && seg[2].kind() != "="
        {
            let key = lower.b.text(seg[0]).to_string();
            kwargs.push((key, expr(lower, &seg[2..])));
        } else {
            args.push(expr(lower, &seg));
        }
    }
    lower.b.leave();
    (args, kwargs)
}

/// `{ "key": value, … }` as an object.
fn object(lower: &mut Lower<'_>, toks: &[Node<'_>]) -> Expr {
    let mut fields = Vec::new();
    for seg in split(toks) {
        let colon = seg.iter().position(|t| t.kind() == ":");
        match colon {
            Some(i) if i > 0 => {
                let key = lower.b.text(seg[0]).trim_matches('"').to_string();
                fields.push((key, expr(lower, &seg[i + 1..])));
            }
            _ => fields.push((String::new(), expr(lower, &seg))),
        }
    }
    Expr::Object {
        type_name: None,
        fields,
    }
}

const BINARY: &[&str] = &[
    "+", "-", "*", "/", "%", "==", "!=", "<", ">", "<=", ">=", "&&", "||",
];

/// One expression from its tokens.
fn expr(lower: &mut Lower<'_>, toks: &[Node<'_>]) -> Expr {
    if !lower.b.enter() {
        return Expr::Other(Vec::new());
    }
    let e = expr_inner(lower, toks);
    lower.b.leave();
    e
}

fn expr_inner(lower: &mut Lower<'_>, toks: &[Node<'_>]) -> Expr {
    let mut i = 0;
    // Prefixes that do not change the value for the checks.
    while i < toks.len() && matches!(lower.b.text(toks[i]), "&" | "mut" | "*" | "move") {
        i += 1;
    }
    let negate = i < toks.len() && lower.b.text(toks[i]) == "!";
    if negate {
        i += 1;
    }
    let (first, used) = operand(lower, &toks[i..]);
    i += used;
    let first = if negate {
        Expr::Not(Box::new(first))
    } else {
        first
    };
    if i < toks.len() {
        let op = lower.b.text(toks[i]).to_string();
        if BINARY.contains(&op.as_str()) && i + 1 < toks.len() {
            let right = expr(lower, &toks[i + 1..]);
            return Expr::Binary {
                op,
                left: Box::new(first),
                right: Box::new(right),
            };
        }
        // Something not read (a closure, a cast): keep the words.
        let mut rest = vec![first];
        for t in &toks[i..] {
            if matches!(t.kind(), "identifier" | "string_literal") {
                rest.push(leaf(lower, *t));
            }
        }
        return Expr::Other(rest);
    }
    first
}

fn leaf(lower: &Lower<'_>, t: Node<'_>) -> Expr {
    match t.kind() {
        "string_literal" => Expr::Str(lower.string(t)),
        "raw_string_literal" => Expr::Str(raw_string(lower.b.text(t))),
        "integer_literal" | "float_literal" => Expr::Num(
            lower
                .b
                .text(t)
                .replace('_', "")
                .trim_end_matches(|c: char| c.is_alphabetic())
                .parse()
                .unwrap_or(f64::NAN),
        ),
        _ => Expr::Path(vec![lower.b.text(t).to_string()]),
    }
}

/// An operand: a literal, or a path followed by calls, fields, method calls, `?` and
/// `.await`. Returns it and how many tokens it used.
fn operand(lower: &mut Lower<'_>, toks: &[Node<'_>]) -> (Expr, usize) {
    let Some(first) = toks.first() else {
        return (Expr::Other(Vec::new()), 0);
    };
    match first.kind() {
        "string_literal" | "raw_string_literal" | "integer_literal" | "float_literal" => {
            return (leaf(lower, *first), 1);
        }
        "token_tree" => {
            let open = first.child(0).map(|c| c.kind());
            let (args, _) = macro_args(lower, *first);
            let e = if open == Some("{") || args.len() == 1 && open == Some("(") {
                args.into_iter().next().unwrap_or(Expr::Other(Vec::new()))
            } else {
                Expr::List(args)
            };
            return (e, 1);
        }
        "identifier" | "self" | "crate" | "super" => {}
        _ => return (Expr::Other(Vec::new()), 1),
    }
    let mut i = 0;
    let mut segs: Vec<String> = Vec::new();
    // A path: `a::b::c`.
    while i < toks.len() && matches!(toks[i].kind(), "identifier" | "self" | "crate" | "super") {
        segs.push(lower.b.text(toks[i]).to_string());
        i += 1;
        if i < toks.len() && toks[i].kind() == "::" {
            i += 1;
        } else {
            break;
        }
    }
    while segs.len() > 1 && matches!(segs[0].as_str(), "crate" | "super" | "self") {
        segs.remove(0);
    }
    let mut value = Expr::Path(segs);
    while let Some(t) = toks.get(i) {
        match t.kind() {
            // A nested macro (`format!(…)` inside `json!`).
            "!" if toks.get(i + 1).is_some_and(|n| n.kind() == "token_tree") => {
                let callee = match &value {
                    Expr::Path(p) => p.clone(),
                    _ => vec!["?".into()],
                };
                let name = callee.last().map(String::as_str).unwrap_or("");
                value = if matches!(name, "format" | "format_args") {
                    let (args, named) = macro_args(lower, toks[i + 1]);
                    let mut args = args.into_iter();
                    match args.next() {
                        Some(Expr::Str(fmt)) => {
                            Expr::Template(vocab::interpolate(&fmt, args.collect(), &named))
                        }
                        _ => Expr::Other(args.collect()),
                    }
                } else if vocab::macro_kind(name).is_some() {
                    let (args, _) = macro_args(lower, toks[i + 1]);
                    Expr::Other(args)
                } else {
                    emit_call(lower, callee, None, toks[i + 1], *first)
                };
                i += 2;
            }
            "token_tree" if t.child(0).is_some_and(|o| o.kind() == "(") => {
                let (callee, receiver) = match &value {
                    Expr::Path(p) => (p.clone(), None),
                    Expr::Call(c) => (c.callee.clone(), Some(c.clone())),
                    _ => (vec!["?".into()], None),
                };
                value = emit_call(lower, callee, receiver, *t, *first);
                i += 1;
            }
            "." => {
                let Some(name) = toks.get(i + 1) else { break };
                let field = lower.b.text(*name).to_string();
                i += 2;
                if field == "await" {
                    continue;
                }
                let is_call = toks.get(i).is_some_and(|n| {
                    n.kind() == "token_tree" && n.child(0).is_some_and(|o| o.kind() == "(")
                });
                match (&value, is_call) {
                    (Expr::Call(c), true) => {
                        let mut callee = c.callee.clone();
                        callee.push(field);
                        value = emit_call(lower, callee, Some(c.clone()), toks[i], *name);
                        i += 1;
                    }
                    (Expr::Path(p), true) => {
                        let mut callee = p.clone();
                        callee.push(field);
                        value = emit_call(lower, callee, None, toks[i], *name);
                        i += 1;
                    }
                    _ => value = Expr::member(Some(value), field),
                }
            }
            "?" => i += 1,
            _ => break,
        }
    }
    (value, i.max(1))
}

/// Emits a call read from tokens and returns it as an expression.
fn emit_call(
    lower: &mut Lower<'_>,
    callee: Vec<String>,
    receiver: Option<Box<Call>>,
    args: Node<'_>,
    at: Node<'_>,
) -> Expr {
    let (a, kw) = macro_args(lower, args);
    let pos = call_pos(&lower.b, at, None);
    let call = Call {
        callee,
        receiver,
        args: a,
        kwargs: kw,
        is_new: false,
        pos,
    };
    if !vocab::constructs(&call) {
        lower.b.emit(OpKind::Call(call.clone()), pos);
    }
    Expr::Call(Box::new(call))
}

/// The first string literal among a token tree's top-level tokens (a macro's SQL).
pub(super) fn first_string(lower: &Lower<'_>, tree: Node<'_>) -> Option<String> {
    kids(tree).into_iter().find_map(|t| match t.kind() {
        "string_literal" => Some(lower.string(t)),
        "raw_string_literal" => Some(raw_string(lower.b.text(t))),
        _ => None,
    })
}

/// Words that start no operand in a macro's code body.
const KEYWORDS: &[&str] = &[
    "if", "else", "match", "return", "while", "for", "in", "loop", "async", "move", "await",
    "break", "continue", "mut", "ref", "let", "_",
];

/// A macro whose body is code with its own syntax (`tokio::select! { Some(m) = stream.next()
/// => { handle(m).await; } … }`, `join!(a(), b())`): every call in it is lowered in order,
/// and `let x = …` / `PATTERN = future =>` bind their variables. Conditions are not kept.
pub(super) fn scan(lower: &mut Lower<'_>, tree: Node<'_>) {
    if !lower.b.enter() {
        return;
    }
    let toks = tokens(tree);
    let mut i = 0;
    let mut pending: Vec<String> = Vec::new();
    while i < toks.len() {
        let t = toks[i];
        let text = lower.b.text(t);
        if text == "let" {
            // `let PATTERN: Type = value;`: the pattern's variables take the value.
            let eq = toks[i..]
                .iter()
                .position(|n| n.kind() == "=")
                .map(|p| p + i);
            let colon = toks[i..]
                .iter()
                .position(|n| n.kind() == ":")
                .map(|p| p + i);
            if let Some(eq) = eq {
                let end = colon.filter(|c| *c < eq).unwrap_or(eq);
                for p in &toks[i + 1..end] {
                    match p.kind() {
                        "identifier" if !KEYWORDS.contains(&lower.b.text(*p)) => {
                            pending.push(lower.b.text(*p).to_string())
                        }
                        "token_tree" => pending.extend(idents(lower, *p)),
                        _ => {}
                    }
                }
                i = eq + 1;
                continue;
            }
        }
        match t.kind() {
            "token_tree" => {
                scan(lower, t);
                i += 1;
            }
            "identifier" | "self" if !KEYWORDS.contains(&text) => {
                // `name =` (not `==`, `=>`): a binding of what follows.
                let assigns = toks.get(i + 1).is_some_and(|n| n.kind() == "=");
                if assigns
                    || toks.get(i + 1).is_some_and(|n| n.kind() == "token_tree")
                        && toks.get(i + 2).is_some_and(|n| n.kind() == "=")
                        && text.starts_with(char::is_uppercase)
                {
                    // `x =` or `Some(x) =`: the variables, bound to the next operand.
                    if assigns {
                        pending.push(text.to_string());
                        i += 2;
                    } else {
                        pending.extend(idents(lower, toks[i + 1]));
                        i += 3;
                    }
                    continue;
                }
                let (value, used) = operand(lower, &toks[i..]);
                if !pending.is_empty() {
                    let targets = std::mem::take(&mut pending);
                    lower.note_message_read(&targets, &value);
                    lower.bind(targets, value, lower.b.pos(t));
                }
                i += used.max(1);
            }
            _ => i += 1,
        }
    }
    lower.b.leave();
}

/// The lowercase identifiers inside a token tree (a pattern's bindings).
fn idents(lower: &Lower<'_>, tree: Node<'_>) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![tree];
    while let Some(n) = stack.pop() {
        for t in tokens(n) {
            match t.kind() {
                "token_tree" if stack.len() < 64 => stack.push(t),
                "identifier" => {
                    let s = lower.b.text(t);
                    if s.starts_with(|c: char| c.is_lowercase()) && !KEYWORDS.contains(&s) {
                        out.push(s.to_string());
                    }
                }
                _ => {}
            }
        }
    }
    out
}

//! The inventory (`idem lint --inventory`): every handler the linter finds — webhook routes,
//! broker consumers, jobs — with its consumer name, the marker it keeps of processed events and
//! whether that marker commits with the side effect. It answers, from the code, "which of our
//! consumers write a marker in the same transaction as their effect?".
//!
//! Each handler is judged as the checks judge it: with the helpers it calls inlined (call
//! following), and by the same `REL_MARKER_OUTSIDE_TX` / `REL_TTL_MARKER` analysis
//! (`checks::marker_commits`).

mod consumer_name;
mod handler_role;
mod marker;
mod registry;

use std::path::{Path, PathBuf};

use crate::analysis::FnFacts;
use crate::config::Config;
use crate::handlers::is_event;
use crate::ir::{Expr, Function, Module, OpKind};
use crate::lang::MODULE;
use crate::schema::Schema;
use crate::skipped::Skipped;
use crate::words::norm;

pub use consumer_name::{ConsumerName, NameSource};
pub use handler_role::HandlerRole;
pub use marker::{MarkerKind, MarkerVerdict};
pub use registry::{RegistryJoin, RegistryRow};

/// One handler of the inventory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handler {
    /// The file, as given or found under a scanned folder.
    pub path: PathBuf,
    /// The line the function is written on, from 1.
    pub line: u32,
    /// The function's name; `<anonymous>` for a callback written in its registration, `<module>`
    /// for a script's top-level consumer loop.
    pub function: String,
    /// How it is reached: webhook route, broker consumer or job.
    pub role: HandlerRole,
    /// The call that registers it, as the linter reads it (`app.post /webhooks/stripe`,
    /// `consumer.run eachMessage`), if any.
    pub registration: Option<String>,
    /// Its consumer name, when the code or the config names one.
    pub consumer: Option<ConsumerName>,
    /// The marker it keeps of processed events.
    pub marker: MarkerKind,
    /// Whether that marker commits with the side effect.
    pub verdict: MarkerVerdict,
}

/// The result of `idem lint --inventory`: handlers sorted by file and line, skipped files and
/// how many files were read.
#[derive(Debug, Clone, Default)]
pub struct Inventory {
    /// The handlers, sorted by path and line.
    pub handlers: Vec<Handler>,
    /// Files not read, with why (as [`Report::skipped`](crate::Report::skipped)).
    pub skipped: Vec<Skipped>,
    /// Source files parsed.
    pub files_linted: usize,
}

/// What listing one file needs: its module and path, the tree's schema and the helpers'
/// expansion (call following).
pub(crate) struct FileInput<'a> {
    pub(crate) path: &'a Path,
    pub(crate) module: &'a Module,
    pub(crate) schema: &'a Schema,
    pub(crate) implicit_tx: bool,
    pub(crate) config: &'a Config,
}

/// The handlers of one file. `expand` gives a handler with its helpers inlined, or `None`
/// when it calls none.
pub(crate) fn list(
    input: &FileInput<'_>,
    expand: &dyn Fn(&Function) -> Option<Function>,
) -> Vec<Handler> {
    let module = input.module;
    let mut out = Vec::new();
    for func in module.functions.iter().filter(|f| listed(module, f)) {
        let expanded = expand(func);
        let judged = expanded.as_ref().unwrap_or(func);
        let facts = FnFacts::new(judged, &module.globals, input.schema, input.implicit_tx);
        let (marker, verdict) = marker::judge(&facts);
        let consumer = input
            .config
            .consumer_name(input.path, &func.name)
            .map(|name| ConsumerName {
                name: name.to_string(),
                source: NameSource::Config,
            })
            .or_else(|| consumer_name::find(module, func, judged));
        out.push(Handler {
            path: input.path.to_path_buf(),
            line: line_of(func),
            function: display_name(func),
            role: handler_role::role(func, input.path),
            registration: func.registrations.first().cloned(),
            consumer,
            marker,
            verdict,
        });
    }
    out
}

/// A handler to list: an event handler that is not only a helper another handler of the
/// file calls (it is judged inside that handler).
fn listed(module: &Module, f: &Function) -> bool {
    is_event(f)
        && !(f.called_by_handler && f.registrations.is_empty())
        && !called_by_another(module, f)
}

/// Whether another event handler of the file calls `f` by name and nothing registers it: a
/// helper named like a handler (`processEvent`).
fn called_by_another(module: &Module, f: &Function) -> bool {
    if f.name.is_empty() || f.name == MODULE || !f.registrations.is_empty() {
        return false;
    }
    module.functions.iter().any(|g| {
        !std::ptr::eq(g, f)
            && is_event(g)
            && g.ops.iter().any(|op| {
                matches!(&op.kind, OpKind::Call(c)
                    if c.callee.len() <= 2 && c.callee.last() == Some(&f.name))
            })
    })
}

fn display_name(f: &Function) -> String {
    if f.name.is_empty() {
        "<anonymous>".to_string()
    } else {
        f.name.clone()
    }
}

/// The function's line; a script's top level is reported where it first reads from a
/// consumer it made (`for message in consumer:`), else at its first operation.
fn line_of(f: &Function) -> u32 {
    if f.pos.line > 0 {
        return f.pos.line;
    }
    let mut consumers: Vec<&str> = Vec::new();
    for op in &f.ops {
        match &op.kind {
            OpKind::Assign {
                targets,
                value: Expr::Call(c),
                ..
            } if norm(&c.name()).contains("consumer") => {
                consumers.extend(targets.first().map(String::as_str));
            }
            OpKind::Assign {
                value: Expr::Path(p),
                ..
            } if p.first().is_some_and(|r| consumers.contains(&r.as_str())) => {
                return op.pos.line;
            }
            _ => {}
        }
    }
    f.ops.first().map_or(1, |op| op.pos.line)
}

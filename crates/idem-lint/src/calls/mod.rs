//! Call following: a handler is judged on what the helpers it calls do. A call to a function
//! or method defined in the scanned tree is replaced, in a copy of the handler, by the
//! helper's operations (its parameters assigned from the call's arguments, its conditions
//! and transactions kept), up to [`MAX_DEPTH`] levels. Inlined operations keep the call's
//! position in the handler and remember where they are written ([`Origin`]), so a finding
//! points at the handler's line and names the helper's.
//!
//! Names resolve as the common cases need: the same file first, then the same folder (a Go
//! package, a Python package, a JavaScript module folder), then a function defined once in
//! the whole tree (an imported helper); `self.`/`this.` methods and Go receivers resolve in
//! the same file or folder; `module.func` resolves to a file or Go package named `module`.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use crate::ir::{Call, Expr, Function, Module, Op, OpKind, Origin, Pos};
use crate::lang::MODULE;

mod callback;
mod dispatch;
mod fields;
mod read_as_call;
mod rename;

use read_as_call::{generic_repository, returned_statement};

/// How many helper levels below a handler are followed.
pub(crate) const MAX_DEPTH: usize = 3;

/// How many calls are inlined into one handler at most (a bound on the work per handler).
const MAX_INLINED: u32 = 48;

/// Transaction ids of inlined helpers start here, far above the ids the lowering and the
/// analysis give, one block of ids per inlined call.
const TX_BASE: u32 = 2_000_000_000;
const TX_BLOCK: u32 = 100_000;

/// Roots of qualified calls that are libraries or framework objects, never the tree's code.
const LIBRARY_ROOTS: &[&str] = &[
    "json",
    "console",
    "logger",
    "log",
    "logging",
    "fmt",
    "errors",
    "strings",
    "time",
    "os",
    "math",
    "object",
    "promise",
    "res",
    "req",
    "ctx",
    "http",
    "crypto",
    "uuid",
    "date",
    "array",
    "string",
    "number",
    "path",
    "fs",
    "strconv",
    "bytes",
    "sort",
    "sync",
    "context",
    "io",
    "super",
    "reply",
    "response",
    "request",
    "assert",
    "require",
    // Database clients: `prisma.invoice.create(…)` is never the tree's `create`.
    "prisma",
    "supabase",
    "knex",
    "drizzle",
    "mongoose",
    "sequelize",
];

/// Method names libraries share with the tree's own code.
const COMMON_METHODS: &[&str] = &[
    "create",
    "save",
    "insert",
    "update",
    "delete",
    "remove",
    "find",
    "findone",
    "get",
    "set",
    "query",
    "exec",
    "execute",
    "publish",
    "send",
    "add",
    "commit",
    "begin",
    "transaction",
    "first",
    "where",
    "upsert",
    "put",
    "post",
    "patch",
    "run",
    "handle",
    "process",
    "emit",
    // Django querysets and SQLAlchemy queries chain these.
    "filter",
    "filter_by",
    "exclude",
    "order_by",
    "values",
    "annotate",
    "select_related",
    "prefetch_related",
    "get_or_create",
    "update_or_create",
    "aggregate",
    "exists",
    "count",
];

/// One file of the tree as the index sees it.
#[derive(Debug)]
struct File<'a> {
    path: Arc<Path>,
    module: &'a Module,
}

/// The functions of the scanned tree by name.
#[derive(Debug)]
pub(crate) struct CallIndex<'a> {
    files: Vec<File<'a>>,
    by_name: HashMap<&'a str, Vec<(usize, usize)>>,
    /// Struct fields of the tree declared as trait objects, and their traits (`None`: two
    /// structs declare the field with different traits, so its name says nothing).
    trait_fields: HashMap<&'a str, Option<&'a str>>,
}

/// Where the operations being copied are called from.
struct Site {
    /// Conditions of the call in the handler (indices into the copy's conditions).
    conds: Vec<usize>,
    /// Offset added to the helper's own condition indices.
    cond_offset: usize,
    /// The transaction open around the call in the handler.
    tx: Option<u32>,
    /// Offset added to the helper's own lexical transaction ids.
    tx_offset: u32,
    /// The call's position in the handler; `None` for the handler's own operations.
    pos: Option<Pos>,
    /// The helper's file and name; `None` for the handler's own operations.
    helper: Option<(usize, String)>,
    /// The calls in helpers that led here (see [`Origin::via`]).
    via: crate::ir::Via,
    /// The helper's locals renamed for this call (empty for the handler's own operations).
    names: HashMap<String, String>,
    /// Where every operation copied here is reported, when that is the call's own place (an
    /// entity's mutator: `stock.decrease(n)` is the line that matters, not its one-line body).
    at_call: Option<Option<Arc<Origin>>>,
    /// The call was work nobody waits for (its statement's id, 0: awaited): everything
    /// inlined from it is too.
    detached: u32,
}

/// The detached-statement id of an operation copied at `site`: the call's when the whole
/// helper runs detached, else the helper's own (offset like its transactions, so it cannot
/// meet an id of the handler's).
fn detached_id(op: &Op, site: &Site) -> u32 {
    match (site.detached, op.detached) {
        (0, 0) => 0,
        (0, own) => own.wrapping_add(site.tx_offset),
        (call, _) => call,
    }
}

/// Whether a method overrides a library's and calls it (`def save(self, *a, **kw): …
/// super().save(*a, **kw)`): the call still does what the library's does (a model's `save`
/// still writes its row), so it is kept beside what the override adds.
fn extends_library(callee: &Function) -> bool {
    callee.ops.iter().any(|op| {
        matches!(&op.kind, OpKind::Call(c)
            if c.callee.first().is_some_and(|r| r == "super")
                && c.callee.last() == Some(&callee.name))
    })
}

/// The call path to a helper called at `call_origin`: the calling helper's own path and then
/// the call itself, or nothing when the handler makes the call.
fn via_call(call_origin: &Option<Arc<Origin>>) -> crate::ir::Via {
    call_origin.as_ref().map_or_else(
        || Arc::from(Vec::new()),
        |o| {
            (o.via.iter().cloned())
                .chain([(o.path.clone(), o.pos)])
                .collect()
        },
    )
}

/// The state of one expansion.
struct Expansion {
    func: Function,
    stack: Vec<(usize, usize)>,
    inlined: u32,
}

impl<'a> CallIndex<'a> {
    /// Indexes the functions of `files` (path and lowered module each) by name.
    pub(crate) fn new(files: impl IntoIterator<Item = (&'a Path, &'a Module)>) -> Self {
        let mut index = CallIndex {
            files: Vec::new(),
            by_name: HashMap::new(),
            trait_fields: HashMap::new(),
        };
        for (fi, (path, module)) in files.into_iter().enumerate() {
            for (field, trait_name) in &module.trait_fields {
                let entry = index
                    .trait_fields
                    .entry(field.as_str())
                    .or_insert(Some(trait_name.as_str()));
                if *entry != Some(trait_name.as_str()) {
                    *entry = None;
                }
            }
            for (gi, f) in module.functions.iter().enumerate() {
                if !f.name.is_empty() && f.name != MODULE {
                    index
                        .by_name
                        .entry(f.name.as_str())
                        .or_default()
                        .push((fi, gi));
                }
            }
            index.files.push(File {
                path: Arc::from(path),
                module,
            });
        }
        index
    }

    /// The function `func` of file `file` with the helpers it calls inlined, or `None` when
    /// it calls none defined in the tree.
    pub(crate) fn expand(&self, file: usize, func: &Function) -> Option<Function> {
        let mut ex = Expansion {
            func: Function {
                ops: Vec::with_capacity(func.ops.len()),
                ..func.clone()
            },
            stack: Vec::new(),
            inlined: 0,
        };
        if let Some(gi) = self.files.get(file).and_then(|f| {
            f.module
                .functions
                .iter()
                .position(|g| std::ptr::eq(g, func))
        }) {
            ex.stack.push((file, gi));
        }
        let top = Site {
            conds: Vec::new(),
            cond_offset: 0,
            tx: None,
            tx_offset: 0,
            pos: None,
            helper: None,
            via: Arc::from(Vec::new()),
            names: HashMap::new(),
            at_call: None,
            detached: 0,
        };
        self.copy(&mut ex, file, func, &top, 0);
        (ex.inlined > 0).then_some(ex.func)
    }

    /// Copies `src`'s operations into the expansion, inlining the calls that resolve.
    fn copy(&self, ex: &mut Expansion, file: usize, src: &Function, site: &Site, depth: usize) {
        // Locals a called value may be held in (`event_handler = event_map.get(…)`): only a
        // call of one of them, or of a table look-up, can go through a dispatch table.
        let locals: std::collections::HashSet<&str> = (src.ops.iter())
            .filter_map(|op| match &op.kind {
                OpKind::Assign { targets, .. } if targets.len() == 1 => Some(targets[0].as_str()),
                _ => None,
            })
            .collect();
        // The type each local holds at this point, and `self`'s (the method's own type).
        let mut types: HashMap<&str, String> = HashMap::new();
        if let Some(owner) = &src.owner {
            types.insert("self", owner.clone());
        }
        for (at, op) in src.ops.iter().enumerate() {
            if let Some((local, ty)) = assigned_type(op) {
                match ty {
                    Some(ty) => types.insert(local, ty),
                    None => types.remove(local),
                };
            }
            let conds: Vec<usize> = site
                .conds
                .iter()
                .copied()
                .chain(op.conds.iter().map(|c| c + site.cond_offset))
                .collect();
            let tx = match op.lexical_tx {
                // A helper's transaction that joins the caller's open one is the caller's.
                Some(t) if site.tx.is_some() && src.joins_caller_tx == Some(t) => site.tx,
                own => own.map(|t| t.wrapping_add(site.tx_offset)).or(site.tx),
            };
            let origin = match (&site.at_call, &op.origin, &site.helper) {
                (Some(at), _, _) => at.clone(),
                (None, Some(o), _) => Some(o.clone()),
                (None, None, Some((hf, name))) => Some(Arc::new(Origin {
                    path: self.files[*hf].path.clone(),
                    pos: op.pos,
                    helper: name.clone(),
                    via: site.via.clone(),
                })),
                (None, None, None) => None,
            };
            let pos = site.pos.unwrap_or(op.pos);
            let mut kind = op.kind.clone();
            rename::op(&mut kind, &site.names);
            if let (OpKind::Call(original), OpKind::Call(call)) = (&op.kind, &kind)
                && depth < MAX_DEPTH
                && ex.inlined < MAX_INLINED
                && let Some(target) = self
                    .resolve_typed(file, original, &types)
                    .or_else(|| self.resolve(file, original))
                && let Some(target) = self.not_on_stack(target, original, &ex.stack)
                && !generic_repository(&self.files[target.0].module.functions[target.1])
            {
                let callee = &self.files[target.0].module.functions[target.1];
                // A query module's function that only returns its statement (`const putMetric
                // = () => \`INSERT INTO metrics …\``), called through the client that runs it:
                // the call runs that statement.
                if let Some(sql) = returned_statement(callee) {
                    ex.func.ops.push(Op {
                        kind: OpKind::Call(Call {
                            callee: vec!["db".into(), "query".into()],
                            receiver: None,
                            args: std::iter::once(Expr::Str(sql))
                                .chain(call.args.iter().cloned())
                                .collect(),
                            kwargs: Vec::new(),
                            is_new: false,
                            pos: call.pos,
                        }),
                        pos,
                        conds,
                        lexical_tx: tx,
                        origin,
                        detached: detached_id(op, site),
                    });
                    continue;
                }
                ex.inlined += 1;
                let detached = detached_id(op, site);
                // The handler's own lambda given to the helper runs where the helper runs it.
                let args_from = match depth {
                    0 => callback::args_start(&ex.func.ops, original.pos),
                    _ => ex.func.ops.len(),
                };
                let callee_from = ex.func.ops.len();
                self.inline(
                    ex,
                    call,
                    callee,
                    target,
                    (conds.clone(), tx, detached, pos, &origin),
                    depth,
                );
                callback::run_where_invoked(&mut ex.func.ops, call, callee, args_from, callee_from);
                // A project's client wrapper named for a publish (`tasks.enqueue_http(…)`,
                // `events.publishEvent(…)`) publishes whatever its body's calls are called.
                if !extends_library(callee) && !names_publish(call) {
                    continue;
                }
            } else if let (OpKind::Call(original), OpKind::Call(call)) = (&op.kind, &kind)
                && depth < MAX_DEPTH
                && match original.callee.as_slice() {
                    [local] => locals.contains(local.as_str()),
                    // `handlers[type](…)`, or Ruby's `handler.new(…).handle` on a local
                    // holding a table's class.
                    [local, index] => index == "[]" || locals.contains(local.as_str()),
                    _ => false,
                }
                && self.dispatch(
                    ex,
                    (file, src, at),
                    (original, call),
                    (&conds, tx, detached_id(op, site), pos, &origin),
                    depth,
                )
            {
                continue;
            }
            ex.func.ops.push(Op {
                kind,
                pos,
                conds,
                lexical_tx: tx,
                origin,
                detached: detached_id(op, site),
            });
        }
    }

    /// Follows a call through a dispatch table ([`dispatch`]): each function of the table is
    /// inlined under a condition of its own (one per table key, excluding each other, as a
    /// switch on the event type would). `at` is the call's file, function and op; the call as
    /// written and renamed; `site` its conditions, transaction, detached id, position and
    /// origin. Whether any was.
    fn dispatch(
        &self,
        ex: &mut Expansion,
        at: (usize, &Function, usize),
        (original, call): (&Call, &Call),
        site: (&[usize], Option<u32>, u32, Pos, &Option<Arc<Origin>>),
        depth: usize,
    ) -> bool {
        let (file, src, index) = at;
        let (conds, tx, detached, pos, origin) = site;
        let entries = dispatch::targets(src, index, &self.files[file].module.globals, original);
        let mut any = false;
        for (key, entry) in entries {
            let Some(target) = self.resolve(file, &entry) else {
                continue;
            };
            if ex.stack.contains(&target) || ex.inlined >= MAX_INLINED {
                continue;
            }
            ex.inlined += 1;
            let table = format!("<dispatch {}:{}>", pos.line, pos.column);
            ex.func.conds.push(crate::ir::Cond {
                test: Expr::binary(
                    "==".into(),
                    Expr::Path(vec![table]),
                    Expr::Str(key.unwrap_or_else(|| "<default>".into())),
                ),
                negated: false,
                is_catch: false,
            });
            let mut branch = conds.to_vec();
            branch.push(ex.func.conds.len() - 1);
            let entry = Call {
                args: call.args.clone(),
                kwargs: call.kwargs.clone(),
                ..entry
            };
            let callee = &self.files[target.0].module.functions[target.1];
            self.inline(
                ex,
                &entry,
                callee,
                target,
                (branch, tx, detached, pos, origin),
                depth,
            );
            any = true;
        }
        any
    }

    /// Inlines one call: the parameters assigned from the arguments, then the body.
    /// `at` is the call's conditions, open transaction, whether nobody waits for it, and its
    /// position in the handler, and where the call itself is reported.
    fn inline(
        &self,
        ex: &mut Expansion,
        call: &Call,
        callee: &Function,
        target: (usize, usize),
        at: (Vec<usize>, Option<u32>, u32, Pos, &Option<Arc<Origin>>),
        depth: usize,
    ) {
        let (conds, tx, detached, pos, call_origin) = at;
        // A value the helper's body starts with (a parameter, its `self`, a carried field),
        // assigned at the call.
        let bind = |ex: &mut Expansion, target: String, value: Expr| {
            ex.func.ops.push(Op {
                kind: OpKind::Assign {
                    targets: vec![target],
                    op: None,
                    value,
                },
                pos,
                conds: conds.clone(),
                lexical_tx: tx,
                origin: None,
                detached,
            });
        };
        let mut names = rename::locals(callee, ex.inlined);
        let mut at_call = None;
        // A JPA entity's (or document's) method called on a loaded row (`stock.decrease(n)`)
        // changes that row: its `this.quantity` and bare `quantity -= n` are `stock.quantity`.
        if !self.files[target.0].module.unique_keys.is_empty()
            && call.receiver.is_none()
            && let [root, _] = call.callee.as_slice()
            && !matches!(root.as_str(), "this" | "self")
        {
            rename::entity_fields(callee, root, &mut names);
            at_call = Some(call_origin.clone());
        }
        // `NewInvoice { … }.save(conn)`: the method's `self` is the literal.
        if let Some((_, object)) = call.kwargs.iter().find(|(k, _)| k == "self") {
            let target = format!("self'{}", ex.inlined);
            names.insert("self".to_string(), target.clone());
            bind(ex, target, object.clone());
        }
        for (i, param) in callee.params.iter().enumerate() {
            let (position, field) = callee.param_slots.get(i).copied().unwrap_or((i, false));
            let value = call
                .kwargs
                .iter()
                .find(|(k, _)| k == param)
                .map(|(_, v)| v.clone())
                .or_else(|| {
                    let arg = call.args.get(position)?;
                    match (field, arg) {
                        (false, _) => Some(arg.clone()),
                        // A field the object literal does not give is undefined.
                        (true, Expr::Object { .. }) => arg.field(param).cloned(),
                        (true, _) => Some(Expr::member(Some(arg.clone()), param.clone())),
                    }
                });
            if let Some(value) = value {
                let target = names.get(param).cloned().unwrap_or_else(|| param.clone());
                bind(ex, target, value);
            }
        }
        // The helper's fields keep their types when it is of another file.
        if ex.stack.first().is_some_and(|(f, _)| *f != target.0) {
            let handler = ex.stack.first().map(|(f, _)| self.files[*f].module);
            for (name, value) in fields::carried(handler, self.files[target.0].module, callee) {
                bind(ex, name, value);
            }
        }
        let site = Site {
            conds,
            cond_offset: ex.func.conds.len(),
            tx,
            tx_offset: TX_BASE.wrapping_add(ex.inlined.wrapping_mul(TX_BLOCK)),
            pos: Some(pos),
            helper: Some((target.0, callee.name.clone())),
            via: via_call(call_origin),
            names,
            at_call,
            detached,
        };
        ex.func.conds.extend(callee.conds.iter().map(|c| {
            let mut c = c.clone();
            rename::cond(&mut c, &site.names);
            c
        }));
        ex.stack.push(target);
        self.copy(ex, target.0, callee, &site, depth + 1);
        ex.stack.pop();
    }

    /// `Pay::Stripe::Subscription.sync(…)`, `Billing::Charge.new(x).call`: a method of a class
    /// in a namespace, defined in the file named for the class (`subscription.rb`) in the
    /// folder named for its namespace (`stripe/`), as Ruby's autoloading lays them out.
    fn by_constant_path(&self, call: &Call, cands: &[(usize, usize)]) -> Option<(usize, usize)> {
        let n = call.callee.len();
        let constant = |s: &String| s.chars().next().is_some_and(char::is_uppercase);
        if n < 3 || !constant(&call.callee[0]) || !call.callee[..n - 1].iter().all(constant) {
            return None;
        }
        let norm = crate::words::norm;
        let (class, namespace) = (norm(&call.callee[n - 2]), norm(&call.callee[n - 3]));
        cands.iter().copied().find(|(f, _)| {
            let p = &self.files[*f].path;
            let stem = p.file_stem().and_then(|s| s.to_str()).unwrap_or("");
            let folder = p
                .parent()
                .and_then(Path::file_name)
                .and_then(|s| s.to_str());
            norm(stem) == class && folder.is_some_and(|d| norm(d) == namespace)
        })
    }

    /// `Account.find(id).credit!(amount)`, `Order.find_by!(ref: r).mark_paid!`: a method of
    /// the row a model's finder returned, defined in the file named for the model
    /// (`account.rb`), as Rails lays models out.
    fn on_found_row(&self, call: &Call) -> Option<(usize, usize)> {
        let finder = call.receiver.as_deref()?;
        let model = finder.callee.first()?;
        let finds = matches!(
            finder.method().as_str(),
            "find" | "find_by" | "lock" | "first" | "last" | "take"
        );
        if !finds || !model.starts_with(|c: char| c.is_ascii_uppercase()) {
            return None;
        }
        let name = call.callee.last()?;
        let model = crate::words::norm(model);
        self.by_name
            .get(name.as_str())?
            .iter()
            .copied()
            .find(|(f, _)| {
                let stem = self.files[*f].path.file_stem().and_then(|s| s.to_str());
                stem.is_some_and(|s| crate::words::norm(s) == model)
            })
    }

    /// `target`, or when it is already being inlined another function of its file by the same
    /// name: Ruby's `def self.call(*args) = new(*args).call` reaches the instance's `call`, a
    /// Java overload calls its sibling.
    fn not_on_stack(
        &self,
        target: (usize, usize),
        call: &Call,
        stack: &[(usize, usize)],
    ) -> Option<(usize, usize)> {
        if !stack.contains(&target) {
            return Some(target);
        }
        let name = call.callee.last()?;
        self.by_name
            .get(name.as_str())?
            .iter()
            .copied()
            .find(|c| c.0 == target.0 && !stack.contains(c))
    }

    /// A method called on a local of a known type (see [`constructed_types`]): the method of
    /// that type's `impl` (Rust: the owner of a method, see `Function::owner`).
    fn resolve_typed(
        &self,
        file: usize,
        call: &Call,
        types: &HashMap<&str, String>,
    ) -> Option<(usize, usize)> {
        let [local, method] = call.callee.as_slice() else {
            return None;
        };
        if call.receiver.is_some() || call.is_new {
            return None;
        }
        let ty = types.get(local.as_str())?;
        let cands = self.by_name.get(method.as_str())?;
        let owned = |&&(f, i): &&(usize, usize)| {
            self.files[f].module.functions[i].owner.as_deref() == Some(ty.as_str())
        };
        (cands.iter().filter(owned).find(|(f, _)| *f == file))
            .or_else(|| cands.iter().find(owned))
            .copied()
    }

    /// The function a call reaches, if the tree defines it.
    fn resolve(&self, file: usize, call: &Call) -> Option<(usize, usize)> {
        if call.receiver.is_some() {
            return self.on_found_row(call);
        }
        if call.is_new {
            return None;
        }
        let name = call.callee.last()?;
        let cands = self.by_name.get(name.as_str())?;
        let dir = |f: usize| self.files[f].path.parent().map(Path::to_path_buf);
        let here = dir(file);
        let same_file = || cands.iter().copied().find(|(f, _)| *f == file);
        let same_dir = || cands.iter().copied().find(|(f, _)| dir(*f) == here);
        let unique = || match cands.as_slice() {
            [only] if name.len() >= 6 => Some(*only),
            _ => None,
        };
        if let Some(found) = self.by_constant_path(call, cands) {
            return Some(found);
        }
        // `Notifier.send(…)` (a call through a `dyn Notifier`, see the Rust lowering): the
        // method of the tree's `impl Notifier for …`.
        // `state.store.save(…)` on a field declared `store: Arc<dyn EventStore>`.
        let field_trait = match call.callee.as_slice() {
            [.., field, _] if call.callee.len() > 2 => self.trait_fields.get(field.as_str()),
            _ => None,
        };
        let owner = match call.callee.as_slice() {
            [owner, _] => Some(owner.as_str()),
            _ => field_trait.copied().flatten(),
        };
        if let Some(owner) = owner {
            let impls: Vec<(usize, usize)> = (cands.iter().copied())
                .filter(|&(f, i)| self.files[f].module.functions[i].owner.as_deref() == Some(owner))
                .collect();
            // Two implementations (a Postgres store and an in-memory one): the object could
            // be either, so the call is not followed, whatever the files are called.
            match impls.as_slice() {
                [one] => return Some(*one),
                [_, _, ..] => return None,
                [] => {}
            }
        }
        if let Some(found) = self.base_class_method(file, call, cands) {
            return Some(found);
        }
        let mut root = call.callee[0].to_lowercase();
        let mut len = call.callee.len();
        // `this.stripeService.createEvent(…)`: a service held in a field is named by it, as an
        // imported module is (`stripe.service.ts`).
        let via_field = len > 2 && matches!(root.as_str(), "self" | "this");
        if via_field {
            root = call.callee[1].to_lowercase();
            len -= 1;
        }
        // A bare call is a free function's, not a method's of the same name (Rust's
        // `fn is_processed(pool, sig)` beside `impl Repo { fn is_processed(&self, sig) }`).
        let free = || {
            (cands.iter().copied())
                .filter(|&(f, i)| self.files[f].module.functions[i].owner.is_none())
                .find(|(f, _)| *f == file || dir(*f) == here)
        };
        match len {
            1 => free().or_else(same_file).or_else(same_dir).or_else(unique),
            _ if matches!(root.as_str(), "self" | "this" | "cls") => same_file().or_else(same_dir),
            _ if LIBRARY_ROOTS.contains(&root.as_str()) && !local_object(call, via_field) => None,
            len => {
                // A field declared with its type (`private final OrderService service;`,
                // Kotlin's `private val service: OrderService`) names the type's file, or its
                // implementation's (`OrderServiceImpl`).
                let root_type = self.files[file]
                    .module
                    .globals
                    .iter()
                    .rev()
                    .find(|(g, _)| g.to_lowercase() == root)
                    .and_then(|(_, v)| match v {
                        Expr::Object {
                            type_name: Some(t),
                            fields,
                        } if fields.is_empty() => Some(crate::words::norm(t)),
                        _ => None,
                    });
                let named_module = cands.iter().copied().find(|(f, _)| {
                    let p = &self.files[*f].path;
                    let stem = p.file_stem().and_then(|s| s.to_str()).unwrap_or("");
                    let parent = p
                        .parent()
                        .and_then(Path::file_name)
                        .and_then(|s| s.to_str())
                        .unwrap_or("");
                    // `emailCore` names `email-core.js`, `order_service` `order-service.ts`.
                    let same = |a: &str| crate::words::norm(a) == crate::words::norm(&root);
                    let typed = root_type.as_ref().is_some_and(|t| {
                        let s = crate::words::norm(stem);
                        s == *t || s.strip_suffix("impl") == Some(t.as_str())
                    });
                    same(stem) || same(parent) || typed
                });
                // Or, named otherwise, the one class of the tree that implements the type
                // (`dedupe: EventDeduplicationPort` held by a `RedisEventDedupAdapter`).
                let named_module = named_module.or_else(|| {
                    let t = root_type.as_deref()?;
                    self.only_implementation(file, cands, t)
                });
                if len == 2 && named_module.is_some() {
                    return named_module;
                }
                // `this.repo.create(…)`, `db.Create(…)`: a library's method of the same name
                // as a method of this file is the library's.
                if COMMON_METHODS.contains(&name.to_lowercase().as_str()) {
                    // `self.log_records.create(…)`: a field's common method is its library's
                    // unless the field names a module of the tree; so is a typed field's
                    // (`orderRepository.save(…)` on a Spring Data interface) unless its type does.
                    // So is a type's or object's (`EventTable.insert { … }`, Exposed's
                    // extension on a table object) unless it names a module of the tree.
                    let type_root = call.callee[0].starts_with(|c: char| c.is_ascii_uppercase());
                    if via_field || root_type.is_some() || type_root {
                        return named_module;
                    }
                    return same_dir()
                        .filter(|(f, _)| *f != file)
                        .or(named_module)
                        .or_else(unique);
                }
                same_file()
                    .or_else(same_dir)
                    .or(named_module)
                    .or_else(unique)
            }
        }
    }
}

/// The local an operation assigns and the type it is built as, if it is built by a
/// constructor (`repo = ProcessedEventsRepo::new(pool)`, `row = NewInvoice { … }`; `None`: any
/// other value, which forgets the local's type).
fn assigned_type(op: &Op) -> Option<(&str, Option<String>)> {
    const CONSTRUCTORS: &[&str] = &["new", "default", "builder", "connect", "init", "create"];
    let OpKind::Assign { targets, value, .. } = &op.kind else {
        return None;
    };
    let [target] = targets.as_slice() else {
        return None;
    };
    let ty = match value {
        Expr::Call(c) => match c.callee.as_slice() {
            [ty, ctor]
                if ty.starts_with(|ch: char| ch.is_ascii_uppercase())
                    && CONSTRUCTORS.contains(&ctor.as_str()) =>
            {
                Some(ty.clone())
            }
            _ => None,
        },
        Expr::Object {
            type_name: Some(t), ..
        } => Some(t.rsplit("::").next().unwrap_or(t).to_string()),
        _ => None,
    };
    Some((target.as_str(), ty))
}

impl CallIndex<'_> {
    /// `super.consumeEvent(…)` in a class that extends a class of the tree
    /// (`CommunityConsumer : AbstractEventConsumer()`): the method in the file named for the
    /// base class (Java and Kotlin keep a class in its own file).
    fn base_class_method(
        &self,
        file: usize,
        call: &Call,
        cands: &[(usize, usize)],
    ) -> Option<(usize, usize)> {
        let [root, _] = call.callee.as_slice() else {
            return None;
        };
        if root != "super" {
            return None;
        }
        let bases = &self.files[file].module.supertypes;
        cands.iter().copied().find(|(f, _)| {
            *f != file
                && (self.files[*f].path.file_stem().and_then(|s| s.to_str()))
                    .is_some_and(|stem| bases.iter().any(|b| b == stem))
        })
    }

    /// The one candidate whose file declares a class implementing `ty` (normalised), when
    /// exactly one file does: with two implementations the field could hold either.
    /// Services of one repository built apart (`user-service/src/…`, `auth-service/src/…`)
    /// each implementing their own copy of the type: the caller's own build's is the one.
    fn only_implementation(
        &self,
        file: usize,
        cands: &[(usize, usize)],
        ty: &str,
    ) -> Option<(usize, usize)> {
        let implements = |f: usize| {
            (self.files[f].module.supertypes.iter()).any(|s| crate::words::norm(s) == ty)
        };
        let one = |found: Vec<(usize, usize)>| {
            let first = *found.first()?;
            found.iter().all(|(f, _)| *f == first.0).then_some(first)
        };
        let found: Vec<(usize, usize)> = cands
            .iter()
            .copied()
            .filter(|(f, _)| implements(*f))
            .collect();
        let here = source_root(&self.files[file].path);
        let same_build: Vec<(usize, usize)> = (found.iter().copied())
            .filter(|(f, _)| here.is_some() && source_root(&self.files[*f].path) == here)
            .collect();
        one(found).or_else(|| one(same_build))
    }
}

/// The folder holding a file's `src` folder (a build module of its own), if it has one.
fn source_root(path: &Path) -> Option<&Path> {
    path.ancestors()
        .find(|a| a.file_name().is_some_and(|n| n == "src"))
        .and_then(Path::parent)
}

/// `object.raise_event_for_update(…)`: a local named `object` (Ruby's usual name for a record
/// of a class chosen at run time) is the tree's object; only `Object.keys(…)`, written
/// capitalised, is JavaScript's global.
fn local_object(call: &Call, via_field: bool) -> bool {
    !via_field && call.callee[0] == "object"
}

/// Whether a call is named for sending a message or job: `publish…`, `enqueue…`, `produce…`
/// on a receiver.
fn names_publish(call: &Call) -> bool {
    let m = call.method();
    call.callee.len() > 1
        && ["publish", "enqueue", "produce"]
            .iter()
            .any(|p| m.starts_with(p))
}

//! The language-neutral form every language is lowered to: functions as ordered lists of
//! operations (calls, assignments, returns, throws), each with its enclosing conditions and
//! transaction, and the expressions they take. Checks read only this form, so a new language
//! needs a lowering and nothing else.

/// A 1-based line and column (column in characters of the line).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub(crate) struct Pos {
    pub(crate) line: u32,
    pub(crate) column: u32,
}

/// An expression, kept only as far as checks need it.
#[derive(Debug, Clone)]
pub(crate) enum Expr {
    /// A string literal (its decoded text).
    Str(String),
    /// An interpolated string: literal parts and expressions in order.
    Template(Vec<Expr>),
    /// A number literal.
    Num(f64),
    /// An identifier or member path (`req.body.id` is `["req", "body", "id"]`).
    Path(Vec<String>),
    /// A call (or `new`).
    Call(Box<Call>),
    /// An object, dict or struct literal: keys and values; Go struct literals carry their type.
    Object {
        type_name: Option<String>,
        fields: Vec<(String, Expr)>,
    },
    /// A list, array or tuple.
    List(Vec<Expr>),
    /// A binary operation (`+`, `<`, `===`, `and`, …).
    Binary {
        op: String,
        left: Box<Expr>,
        right: Box<Expr>,
    },
    /// A negation (`!x`, `not x`).
    Not(Box<Expr>),
    /// Anything else, with the expressions inside it.
    Other(Vec<Expr>),
}

impl Expr {
    /// `left op right`.
    pub(crate) fn binary(op: String, left: Expr, right: Expr) -> Expr {
        Expr::Binary {
            op,
            left: Box::new(left),
            right: Box::new(right),
        }
    }

    /// `object.name` (a member, attribute or field access): `object`'s path extended by `name`,
    /// or, when `object` is no path (a call's result, a literal), both kept under `Other`.
    pub(crate) fn member(object: Option<Expr>, name: String) -> Expr {
        match object {
            Some(Expr::Path(mut segs)) => {
                segs.push(name);
                Expr::Path(segs)
            }
            Some(other) => Expr::Other(vec![other, Expr::Path(vec![name])]),
            None => Expr::Path(vec![name]),
        }
    }

    /// `object[index]`: a string index on a path is one more segment (`ev["id"]` reads as
    /// `ev.id`); anything else is kept under `Other`.
    pub(crate) fn index(object: Option<Expr>, index: Option<Expr>) -> Expr {
        match (object, index) {
            (Some(Expr::Path(mut segs)), Some(Expr::Str(s))) => {
                segs.push(s);
                Expr::Path(segs)
            }
            (object, index) => Expr::Other(object.into_iter().chain(index).collect()),
        }
    }
}

/// A call: the callee's path (calls on a call's result join the inner callee's path, so
/// `crypto.createHmac(a).update(b)` has callee `["crypto", "createHmac", "update"]` and the
/// inner call as `receiver`), positional and keyword arguments.
#[derive(Debug, Clone)]
pub(crate) struct Call {
    pub(crate) callee: Vec<String>,
    pub(crate) receiver: Option<Box<Call>>,
    pub(crate) args: Vec<Expr>,
    pub(crate) kwargs: Vec<(String, Expr)>,
    pub(crate) is_new: bool,
    pub(crate) pos: Pos,
}

/// Links of a method chain kept with their receivers (`a.b().c()…`). A builder of hundreds of
/// links (a CLI's `.option(…)` list) would otherwise copy its whole chain into every link:
/// memory that grows with the cube of its length. No handler shape needs a longer one.
const MAX_CHAIN: usize = 24;

/// The callee and receiver of a call on the result of `inner`, cut to a bare method on an
/// unknown receiver past [`MAX_CHAIN`] links.
pub(crate) fn chained(callee: Vec<String>, inner: Call) -> (Vec<String>, Option<Box<Call>>) {
    if callee.len() > MAX_CHAIN {
        let method = callee.last().cloned().unwrap_or_default();
        (vec!["?".to_string(), method], None)
    } else {
        (callee, Some(Box::new(inner)))
    }
}

/// What an operation does.
#[derive(Debug, Clone)]
pub(crate) enum OpKind {
    /// A call (every call of a statement, inner ones first).
    Call(Call),
    /// `targets = value`, or `target op= value` with `op` set (`"+="`, `"-="`, `"++"`).
    Assign {
        targets: Vec<String>,
        op: Option<String>,
        value: Expr,
    },
    /// `return value`.
    Return(Option<Expr>),
    /// `throw` / `raise` of the expression.
    Throw(Option<Expr>),
}

/// A condition enclosing operations: an `if` test (with `negated` when its branch is the
/// `else`), or a `catch` / `except` clause (its error types and variable as `test`).
#[derive(Debug, Clone)]
pub(crate) struct Cond {
    pub(crate) test: Expr,
    pub(crate) negated: bool,
    pub(crate) is_catch: bool,
}

/// One operation in source order.
#[derive(Debug, Clone)]
pub(crate) struct Op {
    pub(crate) kind: OpKind,
    pub(crate) pos: Pos,
    /// Indices into [`Function::conds`], outermost first.
    pub(crate) conds: Vec<usize>,
    /// The transaction opened lexically around it (a transaction callback or `with` block).
    pub(crate) lexical_tx: Option<u32>,
    /// Where the operation is written when it was inlined from a helper (call following).
    pub(crate) origin: Option<std::sync::Arc<Origin>>,
    /// Work nobody waits for: started in a goroutine (`go f()`), a deferred callback
    /// (`setImmediate`, `setTimeout`, `process.nextTick`), an unawaited call, or inlined
    /// from one; it may not have finished when the next operation runs. The id of the
    /// statement that detached it (0: awaited), so operations of one detached statement (a
    /// `.then(…)` chain) can be told from a later statement's.
    pub(crate) detached: u32,
}

/// Where an inlined operation is written: the helper's file, its position there and the
/// helper's name, and the calls that led there from the handler's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Origin {
    pub(crate) path: std::sync::Arc<std::path::Path>,
    pub(crate) pos: Pos,
    pub(crate) helper: String,
    /// Each intermediate helper's call of the next (file and position), outermost first: empty
    /// when the handler calls the helper itself.
    /// Shared by every operation copied from one call (cloned per operation, it held most of
    /// a large tree's memory).
    pub(crate) via: Via,
}

/// The calls on the way to a helper, outermost first: each calling helper's file and the
/// position of its call (see [`Origin::via`]).
pub(crate) type Via = std::sync::Arc<[(std::sync::Arc<std::path::Path>, Pos)]>;

/// How a function is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HandlerKind {
    /// Receives events: a webhook route, a broker consumer callback, a job or event handler.
    Event,
    /// An HTTP route that is not a webhook.
    Route,
    /// Anything else.
    Other,
}

/// A function, method or callback with its operations (transaction callbacks inlined).
#[derive(Debug, Clone)]
pub(crate) struct Function {
    pub(crate) name: String,
    pub(crate) params: Vec<String>,
    /// For each parameter name, the argument position it takes and whether it is a field of
    /// that argument (`function f({ id, amount }, db)`: `id` and `amount` are fields of
    /// argument 0, `db` is argument 1). Empty when each name is its own position.
    pub(crate) param_slots: Vec<(usize, bool)>,
    /// The parameters' type annotations as written (Go types, Python annotations).
    pub(crate) param_types: Vec<String>,
    /// Route paths, decorators or the registering call's path (`app.post`, `consumer.run`).
    pub(crate) registrations: Vec<String>,
    pub(crate) ops: Vec<Op>,
    pub(crate) conds: Vec<Cond>,
    pub(crate) kind: HandlerKind,
    /// Where the function is written (its first character).
    pub(crate) pos: Pos,
    /// The position of the call that registers it when it is written as that call's argument
    /// (`consumer.run({ eachMessage: async … })`, `js.Subscribe("s", func(m *nats.Msg) {…})`).
    pub(crate) registered_at: Option<Pos>,
    /// An event handler only because an event handler of its file calls it (a helper).
    pub(crate) called_by_handler: bool,
    /// The transaction the function opens around its body when that transaction joins one
    /// already open where it is called (Spring's `@Transactional` with the default
    /// propagation, `REQUIRED`), rather than committing on its own.
    pub(crate) joins_caller_tx: Option<u32>,
    /// The trait whose `impl` block holds the method (Rust's `impl Notifier for Mailer`), so a
    /// call through a trait object (`notifier: &dyn Notifier`) finds it; the type for an
    /// inherent `impl Mailer` (`Mailer::new(…)`, `NewInvoice { … }.save(…)`).
    pub(crate) owner: Option<String>,
}

impl Function {
    pub(crate) fn new(name: String) -> Self {
        Function {
            name,
            params: Vec::new(),
            param_slots: Vec::new(),
            param_types: Vec::new(),
            registrations: Vec::new(),
            ops: Vec::new(),
            conds: Vec::new(),
            kind: HandlerKind::Other,
            pos: Pos::default(),
            registered_at: None,
            called_by_handler: false,
            joins_caller_tx: None,
            owner: None,
        }
    }
}

/// A unique key declared in a schema file or model: the table (or model) and its columns,
/// both as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UniqueKey {
    pub(crate) table: String,
    pub(crate) columns: Vec<String>,
}

/// One source file lowered.
#[derive(Debug, Clone, Default)]
pub(crate) struct Module {
    pub(crate) functions: Vec<Function>,
    /// Unique keys declared in this file (ORM models, `CREATE TABLE` strings).
    pub(crate) unique_keys: Vec<UniqueKey>,
    /// Columns an ORM compares on every update of their table (JPA `@Version`): the table
    /// (or model) and the column, as written.
    pub(crate) version_columns: Vec<(String, String)>,
    /// Top-level calls (outside every function): `app.use(express.json())` and the like.
    pub(crate) top_calls: Vec<Call>,
    /// Top-level assignments (`r = redis.Redis()`, `const producer = kafka.producer()`).
    pub(crate) globals: Vec<(String, Expr)>,
    /// Models stored in another model's or a named table (`self.table_name = "merchants"`,
    /// Rails single-table inheritance `ProviderMerchant < Merchant`): model, then where its
    /// keys are declared.
    pub(crate) table_aliases: Vec<(String, String)>,
    /// Struct fields declared as a trait object (Rust's `store: Arc<dyn EventStore>`): the
    /// field and its trait, so `state.store.save(…)` finds the trait's implementation.
    pub(crate) trait_fields: Vec<(String, String)>,
    /// The simple names of the types this file's classes implement or extend (Java
    /// `implements`/`extends`, Kotlin's supertypes): a field typed by one of them may hold
    /// this file's class.
    pub(crate) supertypes: Vec<String>,
    /// The file sets a background-job backend that stores jobs in the application's own
    /// database (Rails `config.active_job.queue_adapter = :good_job`): an enqueue is a row
    /// of its transaction.
    pub(crate) jobs_in_database: bool,
}

/// A name as written: an inlined helper's local carries a suffix (`ctx'3`, see `calls`),
/// which this drops.
pub(crate) fn as_written(name: &str) -> &str {
    name.split('\'').next().unwrap_or(name)
}

impl Expr {
    /// Visits this expression and every expression inside it, depth first.
    pub(crate) fn walk<'a>(&'a self, f: &mut dyn FnMut(&'a Expr)) {
        f(self);
        match self {
            Expr::Template(parts) | Expr::List(parts) | Expr::Other(parts) => {
                parts.iter().for_each(|p| p.walk(f))
            }
            Expr::Call(call) => call.walk_inner(f),
            Expr::Object { fields, .. } => fields.iter().for_each(|(_, v)| v.walk(f)),
            Expr::Binary { left, right, .. } => {
                left.walk(f);
                right.walk(f);
            }
            Expr::Not(inner) => inner.walk(f),
            Expr::Str(_) | Expr::Num(_) | Expr::Path(_) => {}
        }
    }

    /// The literal text of a string, or of an interpolated string with `?` for each hole.
    pub(crate) fn string_text(&self) -> Option<String> {
        match self {
            Expr::Str(s) => Some(s.clone()),
            Expr::Template(parts) => Some(
                parts
                    .iter()
                    .map(|p| match p {
                        Expr::Str(s) => s.clone(),
                        _ => "?".to_string(),
                    })
                    .collect(),
            ),
            _ => None,
        }
    }

    /// The value of a number literal or a known HTTP status constant (`http.StatusConflict`,
    /// `status.HTTP_409_CONFLICT`, `HTTPStatus.CONFLICT`).
    pub(crate) fn status_code(&self) -> Option<u16> {
        match self {
            Expr::Num(n) if (100.0..600.0).contains(n) => Some(*n as u16),
            Expr::Path(segs) => segs.last().and_then(|s| crate::words::status_constant(s)),
            _ => None,
        }
    }

    /// The field of an object literal.
    pub(crate) fn field(&self, name: &str) -> Option<&Expr> {
        match self {
            Expr::Object { fields, .. } => fields
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v),
            _ => None,
        }
    }

    /// Every identifier, member name, key and string fragment inside, lowercased: the words
    /// a condition or message is made of.
    pub(crate) fn words(&self) -> Vec<String> {
        let mut out = Vec::new();
        self.walk(&mut |e| match e {
            Expr::Str(s) => out.push(s.to_lowercase()),
            Expr::Path(segs) => out.extend(segs.iter().map(|s| s.to_lowercase())),
            Expr::Call(c) => out.extend(c.callee.iter().map(|s| s.to_lowercase())),
            Expr::Object { fields, .. } => out.extend(fields.iter().map(|(k, _)| k.to_lowercase())),
            Expr::Num(n) => out.push(format!("{n}")),
            _ => {}
        });
        out
    }
}

impl Call {
    fn walk_inner<'a>(&'a self, f: &mut dyn FnMut(&'a Expr)) {
        if let Some(r) = &self.receiver {
            r.walk_inner(f);
        }
        self.args.iter().for_each(|a| a.walk(f));
        self.kwargs.iter().for_each(|(_, v)| v.walk(f));
    }

    /// The last segment of the callee, lowercased (`"query"` for `db.query`).
    pub(crate) fn method(&self) -> String {
        self.callee
            .last()
            .map(|s| s.to_lowercase())
            .unwrap_or_default()
    }

    /// The callee's segments before the method, lowercased.
    pub(crate) fn receiver_words(&self) -> Vec<String> {
        let n = self.callee.len().saturating_sub(1);
        self.callee[..n].iter().map(|s| s.to_lowercase()).collect()
    }

    /// The callee as written, dotted (an inlined helper's renamed local, `reader'1`, shows as
    /// written: `reader`).
    pub(crate) fn name(&self) -> String {
        self.callee
            .iter()
            .map(|s| as_written(s))
            .collect::<Vec<_>>()
            .join(".")
    }

    /// A keyword argument or, for JavaScript, a field of an object argument.
    pub(crate) fn option(&self, name: &str) -> Option<&Expr> {
        self.kwargs
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
            .or_else(|| self.args.iter().find_map(|a| a.field(name)))
    }

    /// Every expression of the arguments (receiver calls included), depth first.
    pub(crate) fn arg_exprs(&self) -> Vec<&Expr> {
        let mut out = Vec::new();
        self.walk_inner(&mut |e| out.push(e));
        out
    }
}

//! A route's `filter`: an expression in CEL, the Common Expression Language of Kubernetes,
//! Envoy and Google's APIs (<https://github.com/google/cel-spec>), over an event's parsed body,
//! its headers and its type, read by the `cel` crate.
//!
//! The crate parses but does not type-check, so what is caught when the configuration is read
//! is: a syntax error (with its line and column) and a name other than `body`, `headers` and
//! `type` (a macro's own variable, as `x` in `body.items.exists(x, x.price > 0)`, is fine).
//! What only an event can show — a field missing from a payload, a function that does not
//! exist, a comparison of a string with a number, a result that is not a boolean — is a
//! [`FilterError`] at evaluation, which ingest counts as "no match".

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, LazyLock};

use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue};
use cel::objects::{Key, Map};
use cel::{Context, Program, Value};

/// The names an expression may use: the event's parsed body, its headers (lower-cased names),
/// its type.
pub(crate) const FILTER_NAMES: [&str; 3] = ["body", "headers", "type"];

/// The standard functions (`size`, `has`, `matches`, `startsWith`, `exists`, …), registered
/// once: each evaluation adds its three variables in a scope of its own above them.
static FUNCTIONS: LazyLock<Context<'static, 'static>> = LazyLock::new(Context::default);

/// How often a route's filter errors are logged: once per this many milliseconds (a minute).
const ERROR_LOG_INTERVAL_MS: i64 = 60_000;

/// A compiled route filter. Cheap to clone.
#[derive(Clone)]
pub struct RouteFilter {
    text: Arc<str>,
    program: Arc<Program>,
    /// The header names it reads by name (`headers['x-tag']`, `headers.x_tag` is not a valid
    /// header name and is not kept): kept with the event so that replay sees them too.
    header_names: Arc<[String]>,
    /// When an evaluation error was last logged, in ms since the epoch (`i64::MIN`: never).
    error_logged_at: Arc<AtomicI64>,
}

impl std::fmt::Debug for RouteFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("RouteFilter").field(&self.text).finish()
    }
}

/// Why a filter's text was refused when the configuration was read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FilterSyntaxError {
    /// Not a CEL expression: the parser's message and where (1-based line and column).
    #[error("line {line}, column {column}: {message}")]
    Syntax {
        /// The line, from 1.
        line: usize,
        /// The column, from 1.
        column: usize,
        /// The parser's message.
        message: String,
    },
    /// A name the expression reads that is none of [`FILTER_NAMES`].
    #[error("unknown name {name:?}: a filter reads body, headers and type")]
    UnknownName {
        /// The name.
        name: String,
    },
    /// Longer than [`MAX_FILTER_BYTES`] or nested deeper than [`MAX_NESTING`]: the parser
    /// and the interpreter recurse, and a thread's stack is finite.
    #[error(
        "the filter is too large ({what}); expected at most {MAX_FILTER_BYTES} bytes and {MAX_NESTING} levels of brackets"
    )]
    TooLarge {
        /// How large it is.
        what: String,
    },
    /// A header read by a name with capitals: `headers` holds lower-cased names, so it would
    /// never be found.
    #[error(
        "headers[{name:?}] is never found: header names are lower-case in `headers`; write headers[{lower:?}]"
    )]
    UpperCaseHeader {
        /// The name as written.
        name: String,
        /// The name to write.
        lower: String,
    },
    /// A header idem never keeps with an event nor forwards (a credential, a signature, a
    /// connection header): reading it would keep and forward it.
    #[error(
        "headers[{name:?}] is a credential, signature or connection header, which idem never keeps or forwards; filter on another header, on the body or on the type"
    )]
    ProtectedHeader {
        /// The name.
        name: String,
    },
}

/// The longest filter, in bytes.
pub(crate) const MAX_FILTER_BYTES: usize = 2048;
/// The deepest nesting of `(`, `[` and `{` in a filter.
pub(crate) const MAX_NESTING: usize = 16;

/// Header names a filter may not read: credentials, cookies, the senders' signatures and the
/// connection's own headers (RFC 9110 §7.6.1), which a filter would keep and forward.
fn is_protected_header(name: &str) -> bool {
    const HOP_BY_HOP: [&str; 10] = [
        "host",
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "content-length",
        "expect",
    ];
    const SECRET_WORDS: [&str; 6] = ["auth", "cookie", "signature", "hmac", "token", "secret"];
    HOP_BY_HOP.contains(&name) || SECRET_WORDS.iter().any(|w| name.contains(w))
}

/// The deepest nesting of brackets in `text`, outside string literals.
fn nesting(text: &str) -> usize {
    let (mut depth, mut deepest, mut quote, mut escaped) = (0_usize, 0_usize, None, false);
    for c in text.chars() {
        match quote {
            Some(q) => {
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == q {
                    quote = None;
                }
            }
            None => match c {
                '\'' | '"' => quote = Some(c),
                '(' | '[' | '{' => {
                    depth += 1;
                    deepest = deepest.max(depth);
                }
                ')' | ']' | '}' => depth = depth.saturating_sub(1),
                _ => {}
            },
        }
    }
    deepest
}

/// Why one evaluation gave no answer: ingest counts it as "no match".
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum FilterError {
    /// The interpreter stopped: a missing field, an unknown function, mismatched types.
    #[error("{0}")]
    Execution(#[from] cel::ExecutionError),
    /// The expression gave a value that is not a boolean.
    #[error("the filter gave {0}, not true or false")]
    NotBoolean(String),
}

/// What a filter reads of one event.
#[derive(Debug)]
pub struct FilterInput {
    body: Value,
    headers: Value,
    event_type: Value,
}

impl FilterInput {
    /// The event's `body` parsed as JSON (`null` when it is not JSON), its `headers` (name
    /// and value pairs) as a map of lower-cased names to values (several values of one name
    /// joined by `", "`) and its `type` (`null` when it has none).
    pub fn new<'a>(
        headers: impl IntoIterator<Item = (&'a str, &'a str)>,
        body: &[u8],
        event_type: Option<&str>,
    ) -> Self {
        let body = serde_json::from_slice::<serde_json::Value>(body)
            .map(|json| json_value(&json))
            .unwrap_or(Value::Null);
        let mut joined: HashMap<Key, String> = HashMap::new();
        for (name, value) in headers {
            joined
                .entry(Key::from(name.to_ascii_lowercase()))
                .and_modify(|v| {
                    v.push_str(", ");
                    v.push_str(value);
                })
                .or_insert_with(|| value.to_owned());
        }
        let headers = Value::Map(Map {
            map: Arc::new(
                joined
                    .into_iter()
                    .map(|(k, v)| (k, Value::from(v)))
                    .collect(),
            ),
        });
        Self {
            body,
            headers,
            event_type: event_type.map_or(Value::Null, Value::from),
        }
    }
}

impl RouteFilter {
    /// Compiles `text` and checks the names it reads.
    ///
    /// # Errors
    /// [`FilterSyntaxError`]: not CEL (with the position), or a name other than `body`,
    /// `headers` and `type`.
    pub fn compile(text: &str) -> Result<Self, FilterSyntaxError> {
        let depth = nesting(text);
        if text.len() > MAX_FILTER_BYTES || depth > MAX_NESTING {
            return Err(FilterSyntaxError::TooLarge {
                what: format!("{} bytes, {depth} levels of brackets", text.len()),
            });
        }
        let program = parse(text)?;
        let mut names = BTreeSet::new();
        free_names(program.expression(), &mut Vec::new(), &mut names);
        if let Some(name) = names
            .into_iter()
            .find(|n| !FILTER_NAMES.contains(&n.as_str()))
        {
            return Err(FilterSyntaxError::UnknownName { name });
        }
        let mut header_names = BTreeSet::new();
        named_headers(program.expression(), &mut header_names);
        for name in &header_names {
            let lower = name.to_ascii_lowercase();
            if *name != lower {
                return Err(FilterSyntaxError::UpperCaseHeader {
                    name: name.clone(),
                    lower,
                });
            }
            if is_protected_header(name) {
                return Err(FilterSyntaxError::ProtectedHeader { name: name.clone() });
            }
        }
        Ok(Self {
            text: text.into(),
            program: Arc::new(program),
            header_names: header_names.into_iter().collect(),
            error_logged_at: Arc::new(AtomicI64::new(i64::MIN)),
        })
    }

    /// The header names the expression reads by name (`headers['x-tag']`, `headers.tag`; all
    /// lower-case, none a credential, signature or connection header). The gateway keeps them
    /// with the event and forwards them.
    pub fn header_names(&self) -> &[String] {
        &self.header_names
    }

    /// Whether an evaluation error at `now_ms` (ms since the epoch) is to be logged: true at
    /// most once a minute per route (every gateway task shares the answer).
    pub fn error_log_due(&self, now_ms: i64) -> bool {
        let last = self.error_logged_at.load(Ordering::Relaxed);
        now_ms.saturating_sub(last) >= ERROR_LOG_INTERVAL_MS
            && self
                .error_logged_at
                .compare_exchange(last, now_ms, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }

    /// The expression as configured.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether the event `input` passes.
    ///
    /// # Errors
    /// [`FilterError`]: the expression failed on this event or gave a value that is not a
    /// boolean.
    pub fn matches(&self, input: &FilterInput) -> Result<bool, FilterError> {
        let mut scope = FUNCTIONS.new_inner_scope();
        scope.add_variable_from_value("body", input.body.clone());
        scope.add_variable_from_value("headers", input.headers.clone());
        scope.add_variable_from_value("type", input.event_type.clone());
        match self.program.execute(&scope)? {
            Value::Bool(b) => Ok(b),
            other => Err(FilterError::NotBoolean(format!("{other:?}"))),
        }
    }
}

/// The stack the parser runs on: CEL's generated parser recurses through a dozen rules per
/// bracket, more than a 2 MiB thread holds in a debug build at [`MAX_NESTING`] levels.
const PARSER_STACK_BYTES: usize = 32 << 20;

/// Parses `text` on a thread of its own with a [`PARSER_STACK_BYTES`] stack, so that the depth
/// allowed never depends on the caller's stack (a test thread, a tokio worker on reload).
fn parse(text: &str) -> Result<Program, FilterSyntaxError> {
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("cel-parser".into())
            .stack_size(PARSER_STACK_BYTES)
            .spawn_scoped(scope, || {
                Program::compile(text).map_err(|errors| syntax_error(text, &errors))
            })
            .map_err(|e| FilterSyntaxError::TooLarge {
                what: format!("no thread to parse it on: {e}"),
            })?
            .join()
            .unwrap_or_else(|_| {
                Err(FilterSyntaxError::TooLarge {
                    what: "the parser failed on it".into(),
                })
            })
    })
}

/// The first of the parser's errors, with its position made 1-based.
fn syntax_error(text: &str, errors: &cel::ParseErrors) -> FilterSyntaxError {
    let Some(first) = errors.errors.first() else {
        return FilterSyntaxError::Syntax {
            line: 1,
            column: 1,
            message: format!("not a CEL expression: {text:?}"),
        };
    };
    // The parser counts both from 1.
    FilterSyntaxError::Syntax {
        line: usize::try_from(first.pos.0).unwrap_or(1).max(1),
        column: usize::try_from(first.pos.1).unwrap_or(1).max(1),
        message: first.msg.clone(),
    }
}

/// The identifiers `expr` reads that no enclosing comprehension (a macro such as `exists` or
/// `map`) binds.
fn free_names(expr: &IdedExpr, bound: &mut Vec<String>, out: &mut BTreeSet<String>) {
    match &expr.expr {
        Expr::Ident(name) => {
            if !bound.contains(name) {
                out.insert(name.clone());
            }
        }
        Expr::Select(select) => free_names(&select.operand, bound, out),
        Expr::Call(call) => {
            if let Some(target) = &call.target {
                free_names(target, bound, out);
            }
            for arg in &call.args {
                free_names(arg, bound, out);
            }
        }
        Expr::List(list) => {
            for element in &list.elements {
                free_names(element, bound, out);
            }
        }
        Expr::Map(map) => entries(map.entries.iter().map(|e| &e.expr), bound, out),
        Expr::Struct(st) => entries(st.entries.iter().map(|e| &e.expr), bound, out),
        Expr::Comprehension(c) => {
            free_names(&c.iter_range, bound, out);
            free_names(&c.accu_init, bound, out);
            let depth = bound.len();
            bound.push(c.iter_var.clone());
            bound.extend(c.iter_var2.clone());
            bound.push(c.accu_var.clone());
            for part in [&c.loop_cond, &c.loop_step, &c.result] {
                free_names(part, bound, out);
            }
            bound.truncate(depth);
        }
        Expr::Literal(_) | Expr::Unspecified => {}
    }
}

/// The header names `expr` reads by name from the variable `headers`: `headers['x-tag']` and
/// `headers.tag`, as written.
fn named_headers(expr: &IdedExpr, out: &mut BTreeSet<String>) {
    let is_headers = |e: &IdedExpr| matches!(&e.expr, Expr::Ident(n) if n == "headers");
    match &expr.expr {
        Expr::Select(select) => {
            if is_headers(&select.operand) {
                out.insert(select.field.clone());
            }
            named_headers(&select.operand, out);
        }
        Expr::Call(call) => {
            if call.func_name == "_[_]"
                && let [target, index] = call.args.as_slice()
                && is_headers(target)
                && let Expr::Literal(LiteralValue::String(name)) = &index.expr
            {
                out.insert(name.inner().to_owned());
            }
            call.target.iter().for_each(|t| named_headers(t, out));
            call.args.iter().for_each(|a| named_headers(a, out));
        }
        Expr::List(list) => list.elements.iter().for_each(|e| named_headers(e, out)),
        Expr::Map(map) => map.entries.iter().for_each(|e| entry_headers(&e.expr, out)),
        Expr::Struct(st) => st.entries.iter().for_each(|e| entry_headers(&e.expr, out)),
        Expr::Comprehension(c) => {
            for part in [
                &c.iter_range,
                &c.accu_init,
                &c.loop_cond,
                &c.loop_step,
                &c.result,
            ] {
                named_headers(part, out);
            }
        }
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
    }
}

fn entry_headers(entry: &EntryExpr, out: &mut BTreeSet<String>) {
    match entry {
        EntryExpr::StructField(field) => named_headers(&field.value, out),
        EntryExpr::MapEntry(entry) => {
            named_headers(&entry.key, out);
            named_headers(&entry.value, out);
        }
    }
}

fn entries<'a>(
    entries: impl Iterator<Item = &'a EntryExpr>,
    bound: &mut Vec<String>,
    out: &mut BTreeSet<String>,
) {
    for entry in entries {
        match entry {
            EntryExpr::StructField(field) => free_names(&field.value, bound, out),
            EntryExpr::MapEntry(entry) => {
                free_names(&entry.key, bound, out);
                free_names(&entry.value, bound, out);
            }
        }
    }
}

/// `json` as a CEL value: integers as `int` when they fit (so `body.amount >= 100000` compares
/// like with like), else `uint`, other numbers as `double`.
fn json_value(json: &serde_json::Value) -> Value {
    match json {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Value::Int(i),
            (None, Some(u)) => Value::UInt(u),
            (None, None) => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        serde_json::Value::String(s) => Value::from(s.as_str()),
        serde_json::Value::Array(items) => {
            Value::List(Arc::new(items.iter().map(json_value).collect()))
        }
        serde_json::Value::Object(fields) => Value::Map(Map {
            map: Arc::new(
                fields
                    .iter()
                    .map(|(k, v)| (Key::from(k.clone()), json_value(v)))
                    .collect(),
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(body: &str, ty: Option<&str>) -> FilterInput {
        let headers = [("X-Request-Id", "r-1"), ("x-tag", "a"), ("x-tag", "b")];
        FilterInput::new(headers, body.as_bytes(), ty)
    }

    #[test]
    fn reads_body_headers_and_type() {
        let event = input(
            r#"{"data":{"object":{"amount":150000}},"livemode":true,"items":[{"p":1},{"p":5}]}"#,
            Some("invoice.paid"),
        );
        let cases = [
            ("body.data.object.amount >= 100000 && body.livemode", true),
            ("body.data.object.amount >= 200000", false),
            ("type.startsWith('invoice.')", true),
            ("type == 'customer.created'", false),
            ("headers['x-request-id'].startsWith('r-')", true),
            ("headers['x-tag'] == 'a, b'", true),
            ("body.items.exists(x, x.p > 4)", true),
            ("body.items.all(x, x.p > 4)", false),
            ("has(body.data.object.refunded)", false),
        ];
        for (text, expected) in cases {
            let filter = RouteFilter::compile(text).unwrap();
            assert_eq!(filter.matches(&event), Ok(expected), "{text}");
        }
    }

    #[test]
    fn a_missing_field_or_a_non_boolean_is_an_error() {
        let event = input(r#"{"a":1}"#, None);
        let missing = RouteFilter::compile("body.b.c == 1").unwrap();
        assert!(matches!(
            missing.matches(&event),
            Err(FilterError::Execution(_))
        ));
        let number = RouteFilter::compile("body.a + 1").unwrap();
        assert!(matches!(
            number.matches(&event),
            Err(FilterError::NotBoolean(_))
        ));
        // A body that is not JSON is null.
        let not_json = FilterInput::new([], b"a=1", None);
        let null = RouteFilter::compile("body == null && type == null").unwrap();
        assert_eq!(null.matches(&not_json), Ok(true));
    }

    #[test]
    fn a_syntax_error_says_where() {
        let err = RouteFilter::compile("body.amount >= ").unwrap_err();
        let FilterSyntaxError::Syntax { line, column, .. } = err else {
            panic!("{err:?}");
        };
        assert_eq!((line, column), (1, 16));
        let err = RouteFilter::compile("type == 'a' &&\n  body.x ==").unwrap_err();
        assert!(
            matches!(err, FilterSyntaxError::Syntax { line: 2, .. }),
            "{err:?}"
        );
    }

    /// Every prefix of real filters (what an operator's typing or a truncated file gives) is
    /// compiled or refused, never a panic: cel-interpreter 0.10's parser panicked on some.
    #[test]
    fn no_prefix_of_a_filter_panics() {
        let filters = [
            "body.data.object.amount >= 100000 && body.livemode",
            "type.startsWith('invoice.') || headers['x-github-event'] in ['push', 'ping']",
            "body.items.exists(x, x.price > 0 && has(x.sku)) ? true : false",
            "size(body.data) > 2 && body.a[0].b != null && !(type == \"x\")",
        ];
        for filter in filters {
            for end in (0..=filter.len()).filter(|&e| filter.is_char_boundary(e)) {
                let _ = RouteFilter::compile(&filter[..end]);
            }
        }
    }

    #[test]
    fn header_names_read_by_name_are_listed() {
        let filter = RouteFilter::compile(
            "headers['x-github-event'] == 'push' && headers.tag == 'a' && has(headers.other) \
             && body.items.exists(i, headers['x-in-macro'] == i)",
        )
        .unwrap();
        assert_eq!(
            filter.header_names(),
            ["other", "tag", "x-github-event", "x-in-macro"]
        );
    }

    #[test]
    fn capitals_secrets_and_deep_nesting_are_refused() {
        assert_eq!(
            RouteFilter::compile("headers['X-Tag'] == 'a'").unwrap_err(),
            FilterSyntaxError::UpperCaseHeader {
                name: "X-Tag".into(),
                lower: "x-tag".into()
            }
        );
        for name in [
            "authorization",
            "cookie",
            "host",
            "transfer-encoding",
            "x-hub-signature-256",
            "stripe-signature",
            "x-shopify-hmac-sha256",
            "x-gitlab-token",
        ] {
            let err = RouteFilter::compile(&format!("headers['{name}'] != ''")).unwrap_err();
            assert!(
                matches!(err, FilterSyntaxError::ProtectedHeader { .. }),
                "{name}: {err:?}"
            );
        }
        let deep = format!("{}true{}", "(".repeat(60), ")".repeat(60));
        assert!(matches!(
            RouteFilter::compile(&deep),
            Err(FilterSyntaxError::TooLarge { .. })
        ));
        let lists = format!("{}1{}", "[".repeat(50), "]".repeat(50));
        assert!(matches!(
            RouteFilter::compile(&lists),
            Err(FilterSyntaxError::TooLarge { .. })
        ));
        // Brackets inside a string literal are text.
        assert!(RouteFilter::compile(&format!("type == '{}'", "(".repeat(60))).is_ok());
        let long = vec!["type == 'a'"; 300].join(" || ");
        assert!(matches!(
            RouteFilter::compile(&long),
            Err(FilterSyntaxError::TooLarge { .. })
        ));
    }

    /// The largest filter allowed compiles (on the main thread, as the configuration is read)
    /// and evaluates on a thread with the stack of a tokio worker (2 MiB), where ingest
    /// evaluates it.
    #[test]
    fn the_largest_filter_runs_on_a_worker_stack() {
        let mut terms = Vec::new();
        while terms.join(" || ").len() + 20 < MAX_FILTER_BYTES {
            terms.push(format!("type == 't{}'", terms.len()));
        }
        let flat = terms.join(" || ");
        let nested = format!(
            "{}type == 'x'{}",
            "(".repeat(MAX_NESTING),
            ")".repeat(MAX_NESTING)
        );
        // Compiled where the configuration is read (the main thread), evaluated where ingest
        // runs (a tokio worker).
        let filters: Vec<RouteFilter> = [flat, nested]
            .iter()
            .map(|text| RouteFilter::compile(text).unwrap())
            .collect();
        std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(move || {
                let event = FilterInput::new([], b"{}", Some("x"));
                for filter in &filters {
                    let _ = filter.matches(&event);
                }
            })
            .unwrap()
            .join()
            .unwrap();
    }

    #[test]
    fn errors_are_logged_once_a_minute() {
        let filter = RouteFilter::compile("body.a").unwrap();
        assert!(filter.error_log_due(1_000_000));
        assert!(!filter.clone().error_log_due(1_030_000));
        assert!(filter.error_log_due(1_060_000));
    }

    #[test]
    fn only_body_headers_and_type_and_bound_names_are_read() {
        assert_eq!(
            RouteFilter::compile("bdy.amount > 1").unwrap_err(),
            FilterSyntaxError::UnknownName { name: "bdy".into() }
        );
        assert!(RouteFilter::compile("body.items.map(i, i.p).exists(p, p > 1)").is_ok());
        assert!(RouteFilter::compile("[1, 2].exists(x, x == body.n) && x > 1").is_err());
    }
}

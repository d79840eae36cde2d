//! The lowering on its own: bad input never panics; idioms lower as the checks expect.

use super::Rust;
use crate::ir::{Module, OpKind};
use crate::lang::Language;

fn lower(src: &str) -> Module {
    let mut parser = tree_sitter::Parser::new();
    parser
        .set_language(&Rust.grammar(std::path::Path::new("x.rs")))
        .expect("grammar loads");
    let tree = parser.parse(src, None).expect("parses");
    Rust.lower(&tree, src)
}

fn calls(m: &Module, name: &str) -> Vec<String> {
    m.functions
        .iter()
        .filter(|f| f.name == name)
        .flat_map(|f| &f.ops)
        .filter_map(|op| match &op.kind {
            OpKind::Call(c) => Some(format!("{} {:?}", c.name(), c.args.first())),
            _ => None,
        })
        .collect()
}

#[test]
fn bad_input_is_lowered_without_panic() {
    // Deep nesting, unbalanced text, macros of every shape, a truncated chain.
    let deep = format!(
        "fn f() {{ let x = {}1{}; }}",
        "(".repeat(5000),
        ")".repeat(5000)
    );
    let blocks = format!("fn g() {}{}", "{ if a ".repeat(3000), "}".repeat(3000));
    let plus = format!("fn h() {{ let s = {}; }}", vec!["a"; 20000].join(" + "));
    let elses = format!("fn e() {{ {} {{}} }}", "if a { f() } else ".repeat(20000));
    let chain = format!("fn c() {{ x{}; }}", ".m(y)".repeat(20000));
    let arms = format!(
        "fn m() {{ match x {{ {} }} }}",
        "A => match y { ".repeat(3000) + &"_ => 1 }".repeat(3000)
    );
    for src in [
        deep.as_str(),
        blocks.as_str(),
        plus.as_str(),
        elses.as_str(),
        chain.as_str(),
        arms.as_str(),
        r###"fn r() { let s = r#"abc"; }"###,
        r###"fn s() { sqlx::query!(r##"x"#); tokio::select! { Some(m) = s.next() => { let } } }"###,
        "fn f( { sqlx::query!(",
        "macro_rules! m { ($x:expr) => { $x } } fn f() { m!(a.b(c)?.d); json!({\"a\": [1, {\"b\": f(x)}]}); }",
        "fn f() { sqlx::query!().execute(); diesel::insert_into().values(); X::find().one(); }",
        "impl<T> A for B<T> where T: C { fn f(&self) -> Result<(), E> { Err(StatusCode::CONFLICT)? } }",
        "\u{feff}fn \u{1F600}() {}",
    ] {
        let _ = lower(src);
    }
}

#[test]
fn sqlx_chain_is_one_statement_on_its_executor() {
    let m = lower(
        r#"async fn h(pool: PgPool, e: Event) -> Result<(), Error> {
            let mut tx = pool.begin().await?;
            sqlx::query("INSERT INTO t (a) VALUES ($1)").bind(&e.id).execute(&mut *tx).await?;
            sqlx::query!("UPDATE u SET n = n + 1 WHERE id = $1", e.id).execute(&mut *tx).await?;
            tx.commit().await?;
            Ok(())
        }"#,
    );
    let c = calls(&m, "h");
    assert!(
        c.iter()
            .any(|c| c.starts_with("tx.execute Some(Str(\"INSERT")),
        "{c:?}"
    );
    assert!(
        c.iter()
            .any(|c| c.starts_with("tx.execute Some(Str(\"UPDATE u SET n = n + 1")),
        "{c:?}"
    );
    assert!(!c.iter().any(|c| c.starts_with("sqlx")), "{c:?}");
}

#[test]
fn diesel_and_sea_orm_chains_become_sql() {
    let m = lower(
        r#"fn h(conn: &mut PgConnection, e: Event) {
            diesel::insert_into(processed_events::table).values(event_id.eq(&e.id)).on_conflict_do_nothing().execute(conn)?;
            diesel::update(accounts.find(e.account)).set(balance.eq(balance + e.amount)).execute(conn)?;
        }
        async fn s(db: &DatabaseConnection, e: Event) {
            let found = orders::Entity::find().filter(orders::Column::ExternalId.eq(&e.id)).one(db).await?;
        }"#,
    );
    let h = calls(&m, "h");
    assert!(
        h.iter().any(|c| c.contains(
            "INSERT INTO processed_events (event_id) VALUES ($1) ON CONFLICT DO NOTHING"
        )),
        "{h:?}"
    );
    assert!(
        h.iter()
            .any(|c| c.contains("UPDATE accounts SET balance = balance + $1 WHERE id = $2")),
        "{h:?}"
    );
    let s = calls(&m, "s");
    assert!(
        s.iter()
            .any(|c| c.starts_with("db.one")
                && c.contains("SELECT * FROM orders WHERE ExternalId = $1")),
        "{s:?}"
    );
}

#[test]
fn allow_comments_suppress_rust_findings() {
    let src = |comment: &str| {
        format!(
            "pub async fn handle_message(pool: &PgPool, msg: &BorrowedMessage<'_>) -> anyhow::Result<()> {{\n    \
             {comment}\n    \
             sqlx::query!(\"UPDATE wallets SET balance = balance + $1 WHERE id = $2\", msg.amount, msg.wallet)\n        \
             .execute(pool)\n        .await?;\n    Ok(())\n}}\n"
        )
    };
    let lint = |text: &str| {
        crate::Linter::new()
            .lint_source(std::path::Path::new("consumer.rs"), text)
            .expect("lints")
            .into_iter()
            .map(|f| (f.rule, f.line))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        lint(&src("let _ = 1;")),
        vec![(crate::RuleId::DatRelativeUpdate, 3)]
    );
    assert!(
        lint(&src(
            "// idem-lint: allow DAT_RELATIVE_UPDATE the ledger dedups upstream"
        ))
        .is_empty()
    );
    assert_eq!(
        lint(&src("/* idem-lint: allow DAT_RELATIVE_UPDATE */")),
        vec![
            (crate::RuleId::LintAllowWithoutReason, 2),
            (crate::RuleId::DatRelativeUpdate, 3)
        ]
    );
}

fn function<'m>(m: &'m Module, name: &str) -> &'m crate::ir::Function {
    m.functions
        .iter()
        .find(|f| f.name == name)
        .expect("function lowered")
}

#[test]
fn routers_register_their_handlers_by_path() {
    let m = lower(
        r#"fn app() -> Router {
            Router::new().route("/webhooks/stripe", post(stripe_hook).get(health))
        }
        fn actix(cfg: &mut ServiceConfig) {
            cfg.service(web::resource("/hooks/github").route(web::post().to(github_hook)));
        }"#,
    );
    let routes: Vec<String> = m
        .functions
        .iter()
        .flat_map(|f| &f.ops)
        .filter_map(|op| match &op.kind {
            OpKind::Call(c) if c.callee.first().is_some_and(|r| r == "route") => {
                Some(format!("{} {:?}", c.name(), c.args))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        routes,
        vec![
            "route.get [Str(\"/webhooks/stripe\"), Path([\"health\"])]",
            "route.post [Str(\"/webhooks/stripe\"), Path([\"stripe_hook\"])]",
            "route.post [Str(\"/hooks/github\"), Path([\"github_hook\"])]",
        ]
    );
}

#[test]
fn select_bodies_format_strings_and_constructors() {
    let m = lower(
        r#"async fn run(consumer: StreamConsumer, pool: PgPool) {
            let mut stream = consumer.stream();
            loop {
                tokio::select! {
                    Some(Ok(msg)) = stream.next() => {
                        let key = format!("seen:{}:{id}", msg.topic(), id = msg.offset());
                        pool.execute("UPDATE t SET n = n + 1", Some(key)).await;
                    }
                    _ = shutdown.recv() => break,
                }
            }
        }"#,
    );
    let f = function(&m, "run");
    assert!(f.params.contains(&"msg".to_string()), "{:?}", f.params);
    assert!(f.registrations.contains(&"consumer loop".to_string()));
    let key = f.ops.iter().find_map(|op| match &op.kind {
        OpKind::Assign { targets, value, .. } if targets == &["key"] => value.string_text(),
        _ => None,
    });
    assert_eq!(key.as_deref(), Some("seen:?:?"));
    let names: Vec<String> = f
        .ops
        .iter()
        .filter_map(|op| match &op.kind {
            OpKind::Call(c) => Some(c.name()),
            _ => None,
        })
        .collect();
    assert!(names.contains(&"pool.execute".to_string()), "{names:?}");
    assert!(
        !names.iter().any(|n| n == "Some" || n == "format"),
        "{names:?}"
    );
}

#[test]
fn returns_are_answers_and_refusals() {
    let m = lower(
        r#"async fn hook() -> Result<impl IntoResponse, AppError> {
            if dup { return Ok((StatusCode::CONFLICT, "duplicate")); }
            if bad { return Err(AppError::BadRequest("no signature".into())); }
            Ok(HttpResponse::Ok().finish())
        }"#,
    );
    let f = function(&m, "hook");
    let kinds: Vec<String> = f
        .ops
        .iter()
        .filter_map(|op| match &op.kind {
            OpKind::Call(c) if c.name() == "response.status" => {
                Some(format!("status {:?}", c.args.first()))
            }
            OpKind::Throw(_) => Some("throw".into()),
            _ => None,
        })
        .collect();
    assert_eq!(
        kinds,
        vec![
            "status Some(Num(409.0))",
            "throw",
            "status Some(Num(200.0))"
        ]
    );
}

#[test]
fn use_declarations_name_the_crates_of_parameter_types() {
    assert_eq!(
        super::vocab::use_paths(
            "use async_nats::jetstream::{self, Message, consumer::Consumer as Pull};"
        ),
        vec![
            (
                "Message".to_string(),
                "async_nats::jetstream::Message".to_string()
            ),
            (
                "Pull".to_string(),
                "async_nats::jetstream::consumer::Consumer".to_string()
            ),
        ]
    );
    let m =
        lower("use async_nats::jetstream::Message;\nasync fn apply(db: &PgPool, m: Message) {}\n");
    assert_eq!(
        function(&m, "apply").registrations,
        vec!["consumer message".to_string()]
    );
}

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
    for src in [
        deep.as_str(),
        blocks.as_str(),
        plus.as_str(),
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

/// `IDEM_RS_DUMP=file.rs cargo test -p idem-lint dump -- --nocapture` prints a file's IR.
#[test]
fn dump() {
    if let Ok(path) = std::env::var("IDEM_RS_DUMP") {
        let src = std::fs::read_to_string(path).expect("reads");
        let m = lower(&src);
        for f in &m.functions {
            println!(
                "fn {} params {:?} types {:?} regs {:?}",
                f.name, f.params, f.param_types, f.registrations
            );
            for op in &f.ops {
                println!(
                    "  {}:{} conds {:?} tx {:?} det {} {:?}",
                    op.pos.line, op.pos.column, op.conds, op.lexical_tx, op.detached, op.kind
                );
            }
            for (i, c) in f.conds.iter().enumerate() {
                println!("  cond {i}: {:?}", c);
            }
        }
        println!("keys {:?}", m.unique_keys);
    }
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

//! `idem lint`: finds handler code that is wrong under redelivery, before it ships.
//!
//! Webhook senders and brokers deliver at least once, so a handler runs twice, concurrently,
//! late, or after a crash between its effect and its acknowledgement. The shapes that break
//! under that are visible in the code: a dedup key built from the clock, a processed marker
//! committed apart from the effect, an INSERT with no unique key, an increment with no event
//! ledger, a publish beside a database write. This crate parses TypeScript/TSX, JavaScript,
//! Python, Go, Ruby, Java, Kotlin and Rust with tree-sitter (SQL strings with `sqlparser`),
//! reads the unique keys of the migrations, Liquibase changelogs and models in the tree (and
//! Spring Boot's consumer settings), follows calls into the helpers a handler calls,
//! and reports twelve checks with stable ids ([`RuleId`]). The `idem-lint` binary is the `idem lint` command.
//!
//! # Lint a source text
//!
//! ```
//! use std::path::Path;
//! use idem_lint::{Confidence, Linter, RuleId};
//!
//! let handler = r#"
//! app.post("/webhooks/stripe", async (req, res) => {
//!   const event = req.body;
//!   await db.query("UPDATE accounts SET balance = balance - $1 WHERE id = $2",
//!                  [event.data.amount, event.data.account]);
//!   res.sendStatus(200);
//! });
//! "#;
//! let findings = Linter::new()
//!     .lint_source(Path::new("webhook.js"), handler)
//!     .expect("the text parses");
//! assert_eq!(findings.len(), 1);
//! assert_eq!(findings[0].rule, RuleId::DatRelativeUpdate);
//! assert_eq!(findings[0].line, 4);
//! assert_eq!(findings[0].confidence, Confidence::High);
//!
//! // The same update behind a dedup claim in one transaction is safe.
//! let safe = r#"
//! app.post("/webhooks/stripe", async (req, res) => {
//!   const event = req.body;
//!   await db.transaction(async (tx) => {
//!     const { rowCount } = await tx.query(
//!       "INSERT INTO processed_events (event_id) VALUES ($1) ON CONFLICT DO NOTHING", [event.id]);
//!     if (rowCount === 0) return;
//!     await tx.query("UPDATE accounts SET balance = balance - $1 WHERE id = $2",
//!                    [event.data.amount, event.data.account]);
//!   });
//!   res.sendStatus(200);
//! });
//! "#;
//! assert!(Linter::new().lint_source(Path::new("webhook.js"), safe).unwrap().is_empty());
//! ```
//!
//! # Lint a tree
//!
//! [`Linter::scan`] walks folders (respecting `.gitignore`), parses files in parallel, skips
//! binary, minified, generated and unparseable files (listed in [`Report::skipped`]) and
//! returns the findings; [`to_text`], [`to_json`] and [`to_sarif`] render them.
//! [`Config`] reads `idem-lint.toml`; [`ChangedLines`] keeps only lines changed since a git
//! revision. Each rule's page is `docs/rules/RULE_ID.md` in this crate.

mod analysis;
mod branches;
mod calls;
mod checks;
mod code_host;
mod config;
mod diff;
mod error;
mod finding;
mod handlers;
mod inventory;
mod ir;
mod lang;
mod liquibase;
mod mongoose;
mod output;
mod rule;
mod scan;
mod schema;
mod skipped;
mod spring_config;
mod sql;
mod suppress;
mod words;

pub use config::Config;
pub use diff::ChangedLines;
pub use error::{LintError, LintErrorKind};
pub use finding::{CallSite, Confidence, Finding, HelperSite};
pub use inventory::{
    ConsumerName, Handler, HandlerRole, Inventory, MarkerKind, MarkerVerdict, NameSource,
    RegistryJoin, RegistryRow,
};
pub use output::{
    inventory_to_json, inventory_to_markdown, inventory_to_text, to_json, to_sarif, to_text,
};
pub use rule::RuleId;
pub use scan::{Linter, MAX_FILE_BYTES, MAX_SCHEMA_BYTES, Report, Skipped};

/// Parses `high` or `medium` (case-insensitive), as `--fail-on` takes it.
pub fn parse_confidence(s: &str) -> Option<Confidence> {
    config::parse_confidence(s)
}

//! Rust (`.rs`): tree-sitter-rust. Handlers are axum/actix-web/rocket/warp functions (found by
//! their route attributes, their extractor parameters or the router call naming them) and
//! broker consumers (rdkafka, lapin, async-nats). `.await`, `?` and references are transparent;
//! `if let`/`match` arms are branches (an `Err(…)` arm is a catch); a returned `Err(…)` is a
//! refusal. Query builders are lowered to the SQL they send (see [`queries`]), so the checks
//! read sqlx, diesel, sea-orm and tokio-postgres alike.

mod chain;
mod closures;
mod entities;
mod expr;
mod macros;
mod queries;
mod statements;
mod stmt;
mod tokens;
mod vocab;

pub(crate) use vocab::parses_body;

use std::path::Path;

use tree_sitter::Node;

use super::builder::Builder;
use super::{Language, extension};
use crate::ir::Module;

/// Rust.
#[derive(Debug)]
pub(crate) struct Rust;

impl Language for Rust {
    fn name(&self, _: &Path) -> &'static str {
        "rust"
    }

    fn handles(&self, path: &Path) -> bool {
        extension(path) == "rs"
    }

    fn grammar(&self, _: &Path) -> tree_sitter::Language {
        tree_sitter_rust::LANGUAGE.into()
    }

    fn lower(&self, tree: &tree_sitter::Tree, source: &str) -> Module {
        let mut lower = Lower {
            b: Builder::new(source),
            frames: Vec::new(),
            impl_type: None,
            impl_trait: None,
            imports: Vec::new(),
            chain_pieces: 0,
            joined_spawn: false,
        };
        lower.items(tree.root_node());
        lower.b.finish()
    }
}

/// What the lowering remembers about the function being lowered.
#[derive(Default)]
struct FnFrame {
    /// Variables bound to messages read from a consumer (`while let Some(m) = stream.next()`).
    messages: Vec<String>,
    /// Struct literals bound to locals (`let am = processed::ActiveModel { … }`).
    structs: Vec<(String, crate::ir::Expr)>,
    /// The values of the `if`/`match`/block expressions being lowered for their value (`let
    /// event = match verify(…) { Ok(e) => e, Err(_) => return … }`), innermost last: their
    /// arms' last expressions go here instead of being returned.
    sinks: Vec<Vec<crate::ir::Expr>>,
    /// Parameters and locals holding a Redis client or connection (by their types).
    redis_vars: Vec<String>,
    /// Locals holding a stream of broker messages (`let mut stream = consumer.stream()`).
    sources: Vec<String>,
    /// Parameters holding a body an extractor parsed (`Json(payload): Json<Value>`): their
    /// `to_string()` re-serialises it.
    parsed_bodies: Vec<String>,
    /// Parameters and locals declared as a trait object or `impl Trait` (`notifier: &dyn
    /// Notifier`, `Arc<dyn Repo>`), with the trait: their method calls are the trait's.
    traits: Vec<(String, String)>,
}

struct Lower<'s> {
    b: Builder<'s>,
    frames: Vec<FnFrame>,
    /// The type of the `impl` block being lowered (`Self::f` resolves to its methods).
    impl_type: Option<String>,
    /// The trait the `impl` block being lowered implements (`impl Notifier for Mailer`).
    impl_trait: Option<String>,
    /// Names brought in by `use` declarations and their full paths (`Message` →
    /// `async_nats::jetstream::Message`), so a parameter's type says which crate it is from.
    imports: Vec<(String, String)>,
    /// How many pieces of an over-long call chain are being lowered (see `expr`).
    chain_pieces: u32,
    /// Lowering a spawn whose handle is awaited later (`let h = tokio::spawn(…); h.await`):
    /// its work is waited for, not detached.
    joined_spawn: bool,
}

/// The named children of a node without comments.
fn kids(node: Node<'_>) -> Vec<Node<'_>> {
    let mut cursor = node.walk();
    node.named_children(&mut cursor)
        .filter(|c| !matches!(c.kind(), "line_comment" | "block_comment"))
        .collect()
}

#[cfg(test)]
mod tests;

//! Kotlin (`.kt`, `.kts`): tree-sitter-kotlin-ng.

use std::path::Path;

use crate::ir::Module;
use crate::lang::builder::Builder;
use crate::lang::{Language, extension};

/// Kotlin.
#[derive(Debug)]
pub(crate) struct Kotlin;

impl Language for Kotlin {
    fn name(&self, _: &Path) -> &'static str {
        "kotlin"
    }

    fn handles(&self, path: &Path) -> bool {
        matches!(extension(path), "kt" | "kts")
    }

    fn grammar(&self, _: &Path) -> tree_sitter::Language {
        tree_sitter_kotlin_ng::LANGUAGE.into()
    }

    fn lower(&self, _tree: &tree_sitter::Tree, source: &str) -> Module {
        Builder::new(source).finish()
    }
}

//! Languages: each one says which files it reads, which tree-sitter grammar parses them, and
//! how a syntax tree is lowered to the [`ir`](crate::ir) that the checks read. Adding Java,
//! Kotlin, Ruby or Rust is one more implementation of [`Language`] in [`all`].

mod builder;

pub(crate) use builder::MODULE;
mod go;
mod java;
mod javascript;
mod jvm;
mod kotlin;
mod python;
mod ruby;
mod rust;

pub(crate) use jvm::derived as jvm_derived;
pub(crate) use jvm::vocab as jvm_vocab;
pub(crate) use rust::parses_body as rust_parses_body;

use std::path::Path;

use crate::ir::Module;

/// One source language.
pub(crate) trait Language: Send + Sync + std::fmt::Debug {
    /// The stable name used in reports (`typescript`, `javascript`, `python`, `go`, `ruby`,
    /// `java`, `kotlin`, `rust`).
    fn name(&self, path: &Path) -> &'static str;
    /// Whether this language reads the file (by its extension).
    fn handles(&self, path: &Path) -> bool;
    /// The grammar for the file (TypeScript and TSX differ).
    fn grammar(&self, path: &Path) -> tree_sitter::Language;
    /// Whether statements on a connection or session share one transaction until `commit()`
    /// (Python's DB-API and SQLAlchemy sessions) instead of committing one by one.
    fn implicit_transactions(&self) -> bool {
        false
    }
    /// Whether a tree with syntax errors is lowered anyway, because the errors lose no
    /// statement (by default such a file is skipped).
    fn lowers_with_errors(&self, _root: tree_sitter::Node<'_>) -> bool {
        false
    }
    /// Lowers a parsed file.
    fn lower(&self, tree: &tree_sitter::Tree, source: &str) -> Module;
}

/// Every language, in the order files are offered to them.
pub(crate) fn all() -> &'static [&'static dyn Language] {
    &[
        &javascript::JavaScript,
        &python::Python,
        &go::Go,
        &ruby::Ruby,
        &java::Java,
        &kotlin::Kotlin,
        &rust::Rust,
    ]
}

/// The language that reads `path`, if any.
pub(crate) fn for_path(path: &Path) -> Option<&'static dyn Language> {
    all().iter().copied().find(|l| l.handles(path))
}

/// `source`, read as a file named `path` and lowered (for tests).
#[cfg(test)]
pub(crate) fn lower_for_test(path: &str, source: &str) -> Module {
    let lang = for_path(Path::new(path)).expect("a language reads it");
    let mut parser = tree_sitter::Parser::new();
    parser
        .set_language(&lang.grammar(Path::new(path)))
        .expect("grammar");
    let tree = parser.parse(source, None).expect("parses");
    lang.lower(&tree, source)
}

fn extension(path: &Path) -> &str {
    path.extension().and_then(|e| e.to_str()).unwrap_or("")
}

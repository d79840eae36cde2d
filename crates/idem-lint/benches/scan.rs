//! Scans a generated 100,000-line tree of TypeScript, JavaScript, Python, Go, Java, Kotlin, Ruby
//! and Rust (copies of the fixtures, and generated JVM, Ruby and Rust handlers) and prints the time against baselines measured in the same run:
//! - read: walking the tree and reading every file (the I/O floor);
//! - parse: tree-sitter parsing every file in parallel (the floor of any tree-sitter linter);
//! - naive: the full lint on one thread.
//!
//! `cargo bench -p idem-lint --bench scan`. Exits non-zero when the full lint takes 5 s or more.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use idem_lint::Linter;
use rayon::prelude::*;

#[path = "scan/handlers.rs"]
mod handlers;

const TARGET_LINES: usize = 100_000;
const BUDGET: Duration = Duration::from_secs(5);

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            sources(&p, out);
        } else if matches!(
            p.extension().and_then(|x| x.to_str()),
            Some(
                "ts" | "js"
                    | "py"
                    | "go"
                    | "java"
                    | "kt"
                    | "rb"
                    | "rs"
                    | "sql"
                    | "prisma"
                    | "xml"
                    | "yml"
                    | "yaml"
            )
        ) {
            out.push(p);
        }
    }
}

/// Copies the fixtures, with a set of generated JVM, Ruby and Rust handlers per copy, into
/// `root` until it holds `TARGET_LINES` lines; returns the count of files and lines.
fn generate(root: &Path) -> (usize, usize) {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut files = Vec::new();
    sources(&fixtures, &mut files);
    files.sort();
    let texts: Vec<(PathBuf, String)> = files
        .iter()
        .filter_map(|p| {
            let text = std::fs::read_to_string(p).ok()?;
            let rel = p.strip_prefix(&fixtures).ok()?.to_path_buf();
            Some((rel, text))
        })
        .collect();
    let (mut lines, mut count, mut copy) = (0, 0, 0);
    while lines < TARGET_LINES {
        let generated: Vec<(PathBuf, String)> = handlers::files(copy)
            .into_iter()
            .map(|(rel, text)| (PathBuf::from(rel), text))
            .collect();
        for (rel, text) in texts.iter().chain(&generated) {
            let dest = root.join(format!("copy{copy:03}")).join(rel);
            if let Some(parent) = dest.parent() {
                std::fs::create_dir_all(parent).expect("create bench dir");
            }
            std::fs::write(&dest, text).expect("write bench file");
            lines += text.lines().count();
            count += 1;
        }
        copy += 1;
    }
    (count, lines)
}

fn time<T>(f: impl FnOnce() -> T) -> (Duration, T) {
    let start = Instant::now();
    let out = f();
    (start.elapsed(), out)
}

fn grammar(path: &Path) -> Option<tree_sitter::Language> {
    Some(match path.extension()?.to_str()? {
        "ts" => tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into(),
        "js" => tree_sitter_javascript::LANGUAGE.into(),
        "py" => tree_sitter_python::LANGUAGE.into(),
        "go" => tree_sitter_go::LANGUAGE.into(),
        "java" => tree_sitter_java::LANGUAGE.into(),
        "kt" => tree_sitter_kotlin_ng::LANGUAGE.into(),
        "rb" => tree_sitter_ruby::LANGUAGE.into(),
        "rs" => tree_sitter_rust::LANGUAGE.into(),
        _ => return None,
    })
}

fn main() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (files, lines) = generate(dir.path());
    let root = vec![dir.path().to_path_buf()];
    println!(
        "tree: {files} files, {lines} lines, {} threads",
        rayon::current_num_threads()
    );

    let (read, paths) = time(|| {
        let mut paths = Vec::new();
        for e in ignore::WalkBuilder::new(dir.path()).build().flatten() {
            if e.file_type().is_some_and(|t| t.is_file()) {
                paths.push(e.into_path());
            }
        }
        let bytes: usize = paths
            .par_iter()
            .map(|p| std::fs::read(p).map_or(0, |b| b.len()))
            .sum();
        (paths, bytes)
    });
    let (parse, parsed) = time(|| {
        paths
            .0
            .par_iter()
            .filter(|p| {
                let (Some(lang), Ok(src)) = (grammar(p), std::fs::read_to_string(p)) else {
                    return false;
                };
                let mut parser = tree_sitter::Parser::new();
                parser.set_language(&lang).is_ok() && parser.parse(&src, None).is_some()
            })
            .count()
    });
    let linter = Linter::new();
    let (naive, _) = time(|| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .expect("one-thread pool")
            .install(|| linter.scan(&root).expect("scan"))
    });
    let (full, report) = time(|| linter.scan(&root).expect("scan"));

    let s = |d: Duration| d.as_secs_f64();
    println!("read (walk + read {} bytes): {:>8.3} s", paths.1, s(read));
    println!(
        "parse ({parsed} files, tree-sitter only): {:>8.3} s",
        s(parse)
    );
    println!("naive (full lint, 1 thread): {:>8.3} s", s(naive));
    println!(
        "idem lint (full lint, parallel): {:>8.3} s  {} findings, {} files linted",
        s(full),
        report.findings.len(),
        report.files_linted
    );
    println!(
        "ratios: lint/read {:.1}x, lint/parse {:.2}x, naive/lint {:.2}x; {:.0} lines/s",
        s(full) / s(read),
        s(full) / s(parse),
        s(naive) / s(full),
        lines as f64 / s(full)
    );
    if full >= BUDGET {
        eprintln!("over budget: {:.3} s >= {} s", s(full), BUDGET.as_secs());
        std::process::exit(1);
    }
    println!("within budget: {:.3} s < {} s", s(full), BUDGET.as_secs());
}

//! Precision and recall per check and language.
//!
//! ```text
//! cargo run -p idem-lint --release --example accuracy                 # over the fixtures
//! cargo run -p idem-lint --release --example accuracy -- validation/labels.toml DIR
//! ```
//!
//! With a labels file and a directory, each labelled file (`DIR/<local>`) is linted on its
//! own and compared with its labels (see `validation/README.md`).

#[path = "../tests/it/score.rs"]
mod score;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use idem_lint::{Linter, RuleId};
use serde::Deserialize;

#[derive(Debug, Deserialize)]
struct Labels {
    file: Vec<Labelled>,
}

#[derive(Debug, Deserialize)]
struct Labelled {
    local: String,
    #[serde(default)]
    expect: Vec<Expect>,
}

#[derive(Debug, Deserialize)]
struct Expect {
    rule: String,
    line: u32,
}

fn fixtures() -> anyhow::Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut found = BTreeSet::new();
    let mut expected = BTreeSet::new();
    for unit in score::units(&root) {
        let report = Linter::new().scan(std::slice::from_ref(&unit))?;
        found.extend(
            report
                .findings
                .iter()
                .flat_map(|f| f.locations().map(|(p, l)| (f.rule, p.to_path_buf(), l))),
        );
        for p in score::sources(&unit) {
            expected.extend(score::expected_in(&p, &std::fs::read_to_string(&p)?));
        }
    }
    println!("fixtures: {} units\n", score::units(&root).len());
    print!("{}", score::table(&score::score(&found, &expected)));
    Ok(())
}

fn validation(labels: &Path, dir: &Path) -> anyhow::Result<()> {
    let text =
        std::fs::read_to_string(labels).with_context(|| format!("reading {}", labels.display()))?;
    let labels: Labels =
        toml::from_str(&text).with_context(|| format!("parsing {}", labels.display()))?;
    // The directory is scanned as one tree, so schema files in it (migrations, models) count.
    let report = Linter::new().scan(&[dir.to_path_buf()])?;
    for s in &report.skipped {
        eprintln!("skipped {}: {}", s.path.display(), s.reason);
    }
    let mut found = BTreeSet::new();
    let mut expected = BTreeSet::new();
    let mut missing = 0;
    for f in &labels.file {
        let path: PathBuf = dir.join(&f.local);
        if !path.is_file() {
            missing += 1;
            eprintln!("missing {}", path.display());
            continue;
        }
        found.extend(
            report
                .findings
                .iter()
                .filter(|x| x.path == path)
                .map(|x| (x.rule, x.path.clone(), x.line)),
        );
        for e in &f.expect {
            let rule: RuleId = e.rule.parse()?;
            expected.insert((rule, path.clone(), e.line));
        }
    }
    if missing == labels.file.len() {
        bail!(
            "none of the {} labelled files is in {}",
            missing,
            dir.display()
        );
    }
    let by = score::score(&found, &expected);
    println!(
        "validation: {} files ({} missing)\n",
        labels.file.len() - missing,
        missing
    );
    print!("{}", score::table(&by));
    for k in found.symmetric_difference(&expected) {
        let what = if found.contains(k) {
            "false positive"
        } else {
            "missed"
        };
        println!("{what}: {} {}:{}", k.0, k.1.display(), k.2);
    }
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [] => fixtures(),
        [labels, dir] => validation(Path::new(labels), Path::new(dir)),
        _ => bail!("usage: accuracy [LABELS.toml DIR]"),
    }
}

//! Every path docs/design.md cites exists: the design is a reader's map (§3, §5), and a map
//! that names a moved file sends the reader nowhere.
//!
//! A citation is a backticked path that starts at the workspace root (`crates/…`, `docs/…`,
//! `examples/…`, `scripts/…`, `testdata/…`, `.ci/…`). A `*` stands for one path segment; a
//! `:L` or `:L-M` suffix must fall inside the file (a moved function usually leaves its old
//! file shorter).

use std::path::{Path, PathBuf};

const ROOTS: [&str; 6] = [
    "crates/",
    "docs/",
    "examples/",
    "scripts/",
    "testdata/",
    ".ci/",
];

#[test]
fn every_path_design_md_cites_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let design = std::fs::read_to_string(root.join("docs/design.md")).expect("read docs/design.md");
    let cited = citations(&design);
    assert!(
        cited.len() > 20,
        "docs/design.md cites files; found {}",
        cited.len()
    );
    let missing: Vec<String> = cited
        .iter()
        .filter_map(|citation| check(&root, citation).err())
        .collect();
    assert!(
        missing.is_empty(),
        "docs/design.md cites what is not there:\n{}",
        missing.join("\n")
    );
}

#[test]
fn a_moved_file_and_a_line_past_the_end_are_caught() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let text = "see `crates/idem-testkit/src/gone.rs` and `docs/design.md:999999` and `docs/*.md`";
    let cited = citations(text);
    assert_eq!(cited.len(), 3);
    assert!(check(&root, &cited[0]).is_err());
    assert!(check(&root, &cited[1]).is_err());
    assert!(check(&root, &cited[2]).is_ok());
}

/// The backticked paths of `text`, each without what follows its first space.
fn citations(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter_map(|quoted| quoted.split_whitespace().next())
        .filter(|path| ROOTS.iter().any(|root| path.starts_with(root)))
        .map(str::to_owned)
        .collect()
}

/// `Ok` when the citation names an existing file or folder (and its line range fits), else a
/// line saying what is wrong.
fn check(root: &Path, citation: &str) -> Result<(), String> {
    let (path, lines) = match citation.split_once(':') {
        Some((path, lines)) => (path, Some(lines)),
        None => (citation, None),
    };
    let matches = expand(root, path);
    let Some(file) = matches.first() else {
        return Err(format!("{citation}: no such file or folder"));
    };
    let Some(lines) = lines else { return Ok(()) };
    let last: usize = lines
        .rsplit('-')
        .next()
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("{citation}: `{lines}` is not a line or range"))?;
    let count = std::fs::read_to_string(file).map_or(0, |text| text.lines().count());
    if last > count {
        return Err(format!(
            "{citation}: line {last} is past the end ({count} lines)"
        ));
    }
    Ok(())
}

/// The existing paths `path` names, with `*` matching any one segment.
fn expand(root: &Path, path: &str) -> Vec<PathBuf> {
    let mut found = vec![root.to_path_buf()];
    for segment in path.trim_end_matches('/').split('/') {
        found = found
            .into_iter()
            .flat_map(|dir| {
                if segment == "*" || segment.contains('*') {
                    let (prefix, suffix) = segment.split_once('*').unwrap_or((segment, ""));
                    std::fs::read_dir(&dir)
                        .into_iter()
                        .flatten()
                        .flatten()
                        .filter(|entry| {
                            let name = entry.file_name().to_string_lossy().into_owned();
                            name.starts_with(prefix) && name.ends_with(suffix)
                        })
                        .map(|entry| entry.path())
                        .collect::<Vec<_>>()
                } else {
                    let next = dir.join(segment);
                    if next.exists() { vec![next] } else { vec![] }
                }
            })
            .collect();
    }
    found
}

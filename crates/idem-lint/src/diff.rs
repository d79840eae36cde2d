//! Pull-request mode: the lines a pull request changes against its base branch. As GitHub
//! shows a pull request (three dots, `BASE...HEAD`), the changes are taken since the merge base
//! of `BASE` and `HEAD`, so commits that landed on the base branch meanwhile are not the pull
//! request's: `git diff --unified=0 $(git merge-base BASE HEAD)` against the working tree, which
//! adds uncommitted changes (staged or not) to the committed ones (hunk headers `@@ -a,b +c,d @@`
//! give the new lines c..c+d), plus every line of untracked files, which are new too. Renames
//! are found as git finds them (`--find-renames`, half the lines alike): a moved file counts
//! only its edited lines. The
//! merge base must be in the clone: a shallow clone needs the base branch's history down to it
//! (`fetch-depth: 0` in `actions/checkout`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::LintError;

/// Changed lines by file (absolute paths).
#[derive(Debug, Clone, Default)]
pub struct ChangedLines {
    files: HashMap<PathBuf, Vec<(u32, u32)>>,
    whole: Vec<PathBuf>,
}

fn git(dir: &Path, base: &str, args: &[&str]) -> Result<String, LintError> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .map_err(|e| LintError::Git {
            base: base.to_string(),
            dir: dir.to_path_buf(),
            reason: format!("cannot run git: {e}"),
        })?;
    if !out.status.success() {
        return Err(LintError::Git {
            base: base.to_string(),
            dir: dir.to_path_buf(),
            reason: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The merge base of `base` and `HEAD`, or an error that says what to fetch.
fn merge_base(dir: &Path, base: &str) -> Result<String, LintError> {
    git(
        dir,
        base,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{base}^{{commit}}"),
        ],
    )
    .map_err(|e| match e {
        LintError::Git { dir, .. } => LintError::Git {
            base: base.to_string(),
            dir,
            reason: format!("unknown revision {base}"),
        },
        other => other,
    })?;
    match git(dir, base, &["merge-base", base, "HEAD"]) {
        Ok(out) => Ok(out.trim().to_string()),
        Err(LintError::Git { dir, .. }) => Err(LintError::Git {
            base: base.to_string(),
            dir,
            reason: format!(
                "{base} and HEAD have no merge base in this clone: a shallow clone must fetch the history down to it (actions/checkout: fetch-depth: 0), or the two histories are unrelated"
            ),
        }),
        Err(other) => Err(other),
    }
}

impl ChangedLines {
    /// Runs git in `dir` (any folder of the repository) against revision `base`. Fails with
    /// [`LintError::Git`] when git is missing, `dir` is not in a repository or `base` is not
    /// a revision.
    pub fn since(dir: &Path, base: &str) -> Result<ChangedLines, LintError> {
        let top = PathBuf::from(git(dir, base, &["rev-parse", "--show-toplevel"])?.trim());
        let merge_base = merge_base(dir, base)?;
        let diff = git(
            dir,
            base,
            &[
                // Non-ASCII paths as they are, not quoted octal escapes.
                "-c",
                "core.quotePath=false",
                "diff",
                "--unified=0",
                "--no-color",
                "--no-ext-diff",
                // A moved file's unchanged lines are not the pull request's, as GitHub shows it.
                "--find-renames",
                &merge_base,
                "--",
            ],
        )?;
        let mut changed = ChangedLines::parse(&top, &diff);
        // NUL-separated: names as they are, whatever characters they hold.
        let untracked = git(
            dir,
            base,
            &[
                "ls-files",
                "-z",
                "--others",
                "--exclude-standard",
                "--full-name",
            ],
        )?;
        changed.whole.extend(
            untracked
                .split('\0')
                .filter(|l| !l.is_empty())
                .map(|l| top.join(l)),
        );
        // Compared canonicalised, once here rather than per finding.
        changed.files = changed
            .files
            .into_iter()
            .map(|(p, r)| (canonical(&p), r))
            .collect();
        changed.whole = changed.whole.iter().map(|p| canonical(p)).collect();
        Ok(changed)
    }

    /// Parses unified diff text whose paths are relative to `top`.
    pub fn parse(top: &Path, diff: &str) -> ChangedLines {
        let mut out = ChangedLines::default();
        let mut current: Option<PathBuf> = None;
        for line in diff.lines() {
            if let Some(path) = line.strip_prefix("+++ ") {
                current = new_path(path).map(|p| top.join(p));
            } else if let (Some(hunk), Some(file)) = (line.strip_prefix("@@ "), &current) {
                let Some(new) = hunk.split_whitespace().find(|w| w.starts_with('+')) else {
                    continue;
                };
                let mut parts = new.trim_start_matches('+').split(',');
                let start: u32 = parts.next().and_then(|s| s.parse().ok()).unwrap_or(0);
                let count: u32 = parts
                    .next()
                    .map_or(Some(1), |s| s.parse().ok())
                    .unwrap_or(1);
                if count > 0 {
                    out.files
                        .entry(file.clone())
                        .or_default()
                        .push((start, start + count - 1));
                }
            }
        }
        out
    }

    /// Whether `line` of `path` changed.
    pub fn contains(&self, path: &Path, line: u32) -> bool {
        let abs = canonical(path);
        self.whole.contains(&abs)
            || self
                .files
                .get(&abs)
                .is_some_and(|ranges| ranges.iter().any(|&(a, b)| (a..=b).contains(&line)))
    }
}

/// The path of a `+++ b/NAME` line: git ends a name holding a space with a tab, and writes
/// one holding `"`, `\\`, a tab or a newline C-quoted (`"b/q\\"uote.ts"`).
fn new_path(text: &str) -> Option<String> {
    let text = text.strip_suffix('\t').unwrap_or(text);
    let name = match text.strip_prefix('"').and_then(|t| t.strip_suffix('"')) {
        Some(quoted) => unquote(quoted)?,
        None => text.to_string(),
    };
    name.strip_prefix("b/").map(str::to_string)
}

/// Undoes git's C-style quoting of a path (`\\`, `\"`, `\t`, `\n`, octal bytes).
fn unquote(quoted: &str) -> Option<String> {
    let mut bytes = Vec::with_capacity(quoted.len());
    let mut chars = quoted.bytes();
    while let Some(b) = chars.next() {
        if b != b'\\' {
            bytes.push(b);
            continue;
        }
        match chars.next()? {
            b't' => bytes.push(b'\t'),
            b'n' => bytes.push(b'\n'),
            d @ b'0'..=b'7' => {
                let (d2, d3) = (chars.next()?, chars.next()?);
                let digit = |c: u8| c.checked_sub(b'0').filter(|v| *v < 8);
                bytes.push((digit(d)? << 6) | (digit(d2)? << 3) | digit(d3)?);
            }
            other => bytes.push(other),
        }
    }
    String::from_utf8(bytes).ok()
}

/// The canonical form of a path, or the path itself when it cannot be resolved.
fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hunks_give_new_lines() {
        let diff = "diff --git a/x.ts b/x.ts\n--- a/x.ts\n+++ b/x.ts\n@@ -3,0 +4,2 @@ fn\n+a\n+b\n@@ -10 +12 @@\n-c\n+d\n@@ -20,3 +22,0 @@\n";
        let c = ChangedLines::parse(Path::new("/r"), diff);
        let ranges = &c.files[Path::new("/r/x.ts")];
        assert_eq!(ranges, &[(4, 5), (12, 12)]);
    }

    #[test]
    fn names_git_quotes_or_ends_with_a_tab_are_read() {
        assert_eq!(new_path("b/a b.ts\t").as_deref(), Some("a b.ts"));
        assert_eq!(
            new_path("\"b/q\\\"uote.ts\"").as_deref(),
            Some("q\"uote.ts")
        );
        assert_eq!(
            new_path("\"b/tab\\tname.ts\"").as_deref(),
            Some("tab\tname.ts")
        );
        assert_eq!(
            new_path("\"b/back\\\\slash.ts\"").as_deref(),
            Some("back\\slash.ts")
        );
        assert_eq!(new_path("\"b/\\303\\251.ts\"").as_deref(), Some("é.ts"));
        assert_eq!(new_path("/dev/null"), None);
    }
}

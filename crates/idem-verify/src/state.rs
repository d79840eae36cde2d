//! State snapshots: the user's `--reset` and `--state` commands, canonicalised output, diffs.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::VerifyError;

/// The handler's state, canonicalised: JSON flattened to sorted `path = value` pairs (keys
/// named in `--ignore` removed at any depth), or text as its lines with trailing whitespace
/// and trailing blank lines removed (`--ignore` does not apply to text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Snapshot {
    /// JSON output: path (`objects.cus_1.status`, `rows[2].id`) to compact JSON value.
    Json(BTreeMap<String, String>),
    /// Text output: its lines.
    Text(Vec<String>),
}

impl Snapshot {
    /// Canonicalises the output of a `--state` command; `ignore` lists object keys to drop.
    pub fn parse(output: &str, ignore: &[String]) -> Snapshot {
        match serde_json::from_str::<Value>(output) {
            Ok(value) => {
                let mut flat = BTreeMap::new();
                flatten(&value, String::new(), ignore, &mut flat);
                Snapshot::Json(flat)
            }
            Err(_) => {
                let mut lines: Vec<String> =
                    output.lines().map(|l| l.trim_end().to_owned()).collect();
                while lines.last().is_some_and(String::is_empty) {
                    lines.pop();
                }
                Snapshot::Text(lines)
            }
        }
    }

    /// The differences from `expected` to `self`, one line each: `path: expected → got` for
    /// JSON (`(absent)` for a missing path), `- line` / `+ line` for text. Empty when equal.
    pub fn diff(&self, expected: &Snapshot) -> Vec<String> {
        match (expected, self) {
            (Snapshot::Json(a), Snapshot::Json(b)) => {
                let mut out = Vec::new();
                for (path, va) in a {
                    match b.get(path) {
                        Some(vb) if vb == va => {}
                        Some(vb) => out.push(format!("{path}: {va} → {vb}")),
                        None => out.push(format!("{path}: {va} → (absent)")),
                    }
                }
                for (path, vb) in b {
                    if !a.contains_key(path) {
                        out.push(format!("{path}: (absent) → {vb}"));
                    }
                }
                out
            }
            (Snapshot::Text(a), Snapshot::Text(b)) => {
                let mut out: Vec<String> = a
                    .iter()
                    .filter(|l| !b.contains(l))
                    .map(|l| format!("- {l}"))
                    .collect();
                out.extend(
                    b.iter()
                        .filter(|l| !a.contains(l))
                        .map(|l| format!("+ {l}")),
                );
                if out.is_empty() && a != b {
                    out.push("same lines in another order".into());
                }
                out
            }
            _ => vec!["one state is JSON, the other is text".into()],
        }
    }
}

fn flatten(value: &Value, path: String, ignore: &[String], out: &mut BTreeMap<String, String>) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (key, v) in map {
                if ignore.iter().any(|i| i == key) {
                    continue;
                }
                let p = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                flatten(v, p, ignore, out);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            for (i, v) in items.iter().enumerate() {
                flatten(v, format!("{path}[{i}]"), ignore, out);
            }
        }
        other => {
            out.insert(path, other.to_string());
        }
    }
}

/// The commands [`Target::deliver`](crate::Target::deliver) runs between steps: `--restart` after a crash point,
/// `--successor` before the first delivery to the successor.
#[derive(Debug, Clone, Copy, Default)]
pub struct Hooks<'a> {
    /// Kills and restarts the target, keeping its state.
    pub restart: Option<&'a str>,
    /// Moves the target to its successor consumer version, keeping its state.
    pub successor: Option<&'a str>,
}

/// The user's commands, run with `sh -c`.
#[derive(Debug, Clone)]
pub struct Commands {
    /// Returns the handler's state to empty.
    pub reset: String,
    /// Prints the state (JSON or text) on standard output.
    pub state: String,
    /// Object keys left out of JSON states (surrogate ids, timestamps).
    pub ignore: Vec<String>,
    /// `--restart`: kills and restarts the target, keeping its state (crash mode). It may
    /// return before the target answers: verify then polls the target for up to 30 s. Its
    /// output must not stay open (redirect a background server's output).
    pub restart: Option<String>,
    /// `--successor`: moves the target to its next consumer version (`billing_v2`
    /// succeeding `billing_v1`), keeping its state (rebuild mode). `--reset` must return the
    /// target to its first version as well as empty its state. It may return before the
    /// target answers: verify then polls the target for up to 30 s.
    pub successor: Option<String>,
}

impl Commands {
    /// The commands run between steps (`--restart`, `--successor`).
    pub fn hooks(&self) -> Hooks<'_> {
        Hooks {
            restart: self.restart.as_deref(),
            successor: self.successor.as_deref(),
        }
    }

    /// Runs `--reset`.
    ///
    /// # Errors
    /// [`VerifyError::Command`] when it cannot start or exits non-zero.
    pub async fn reset(&self) -> Result<(), VerifyError> {
        shell("reset", &self.reset).await.map(drop)
    }

    /// Runs `--state` and canonicalises what it prints.
    ///
    /// # Errors
    /// [`VerifyError::Command`] when it cannot start or exits non-zero.
    pub async fn snapshot(&self) -> Result<Snapshot, VerifyError> {
        let out = shell("state", &self.state).await?;
        Ok(Snapshot::parse(&out, &self.ignore))
    }
}

pub(crate) async fn shell(which: &'static str, command: &str) -> Result<String, VerifyError> {
    let fail = |reason: String| VerifyError::Command {
        which,
        command: command.to_owned(),
        reason,
    };
    let output = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .map_err(|e| fail(format!("cannot start sh: {e}")))?;
    if !output.status.success() {
        return Err(fail(format!(
            "{}: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_canonical_and_ignores_fields() {
        let ignore = vec!["row_id".to_owned()];
        let a = Snapshot::parse(r#"{"b":1,"a":{"x":"y","row_id":7}}"#, &ignore);
        let b = Snapshot::parse("{\"a\":{\"row_id\":9,\"x\":\"y\"},\n \"b\":1}", &ignore);
        assert_eq!(a, b);
        let c = Snapshot::parse(r#"{"b":2,"a":{"x":"y"}}"#, &ignore);
        assert_eq!(c.diff(&a), ["b: 1 → 2"]);
    }

    #[test]
    fn text_diff_names_lines() {
        let a = Snapshot::parse("x|1\ny|2  \n\n", &[]);
        let b = Snapshot::parse("x|1\ny|3\n", &[]);
        assert_eq!(b.diff(&a), ["- y|2", "+ y|3"]);
        assert!(a.diff(&Snapshot::parse("x|1\ny|2", &[])).is_empty());
    }
}

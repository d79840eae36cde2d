//! The config file, `idem-lint.toml`: rules to turn off, paths to skip, and rules scoped to
//! some paths.
//!
//! ```toml
//! disable = ["ARC_DUAL_WRITE"]          # off everywhere
//! exclude = ["vendor/**", "**/*.test.ts"] # never scanned
//! fail_on = "high"                      # default for --fail-on
//!
//! [rules.DAT_UNCONDITIONAL_INSERT]
//! paths = ["src/consumers/**"]          # only under these paths
//! exclude = ["src/consumers/legacy/**"] # but not these
//!
//! [rules.REL_KEY_VOLATILE]
//! enabled = false                       # same as listing it in `disable`
//!
//! [[inventory.names]]                   # consumer names for `--inventory`
//! path = "services/billing/**"          # the handlers under these paths
//! function = "handle_invoice"           # optional: only this one
//! consumer = "billing_v2"
//! ```

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::Deserialize;

use crate::error::LintError;
use crate::finding::Confidence;
use crate::rule::RuleId;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    disable: Vec<String>,
    #[serde(default)]
    exclude: Vec<String>,
    fail_on: Option<String>,
    #[serde(default)]
    rules: HashMap<String, RawScope>,
    #[serde(default)]
    inventory: RawInventory,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawInventory {
    #[serde(default)]
    names: Vec<RawName>,
}

/// `[[inventory.names]]`: the consumer name of the handlers under `path` (a glob), or only of
/// the one named `function` there.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawName {
    path: String,
    function: Option<String>,
    consumer: String,
}

/// A parsed `[[inventory.names]]` entry.
#[derive(Debug, Clone)]
struct ConsumerNaming {
    paths: GlobSet,
    function: Option<String>,
    consumer: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScope {
    enabled: Option<bool>,
    #[serde(default)]
    paths: Vec<String>,
    #[serde(default)]
    exclude: Vec<String>,
}

/// Where one rule applies.
#[derive(Debug, Clone, Default)]
struct Scope {
    only: Option<GlobSet>,
    not: Option<GlobSet>,
}

/// A parsed `idem-lint.toml` (or the defaults: every rule, everywhere).
#[derive(Debug, Clone, Default)]
pub struct Config {
    disabled: Vec<RuleId>,
    exclude: Vec<String>,
    exclude_set: Option<GlobSet>,
    fail_on: Option<Confidence>,
    scopes: HashMap<RuleId, Scope>,
    names: Vec<ConsumerNaming>,
}

/// Builds a glob set; `None` for no globs.
pub(crate) fn glob_set(globs: &[String]) -> Result<Option<GlobSet>, LintError> {
    if globs.is_empty() {
        return Ok(None);
    }
    let mut b = GlobSetBuilder::new();
    for g in globs {
        let glob = Glob::new(g).map_err(|e| LintError::Glob {
            glob: g.clone(),
            reason: e.kind().to_string(),
        })?;
        b.add(glob);
        // `vendor` and `vendor/**` both mean the folder and everything in it.
        if !g.contains('*')
            && let Ok(inner) = Glob::new(&format!("{}/**", g.trim_end_matches('/')))
        {
            b.add(inner);
        }
    }
    b.build().map(Some).map_err(|e| LintError::Glob {
        glob: globs.join(", "),
        reason: e.kind().to_string(),
    })
}

/// Parses `high` or `medium`.
pub(crate) fn parse_confidence(s: &str) -> Option<Confidence> {
    match s.trim().to_ascii_lowercase().as_str() {
        "high" => Some(Confidence::High),
        "medium" => Some(Confidence::Medium),
        _ => None,
    }
}

impl Config {
    /// Reads a config file. A missing or unreadable file is [`LintError::ConfigRead`]; bad
    /// TOML, an unknown key, an unknown rule id, a bad glob or a `fail_on` other than
    /// `high`/`medium` is [`LintError::Config`].
    pub fn load(path: &Path) -> Result<Config, LintError> {
        let text = std::fs::read_to_string(path).map_err(|source| LintError::ConfigRead {
            path: path.to_path_buf(),
            source,
        })?;
        Config::parse(&text).map_err(|reason| LintError::Config {
            path: path.to_path_buf(),
            reason,
        })
    }

    /// Parses the text of a config file; the error says what is wrong.
    pub fn parse(text: &str) -> Result<Config, String> {
        let raw: RawConfig = toml::from_str(text).map_err(|e| e.to_string())?;
        let rule = |s: &str| s.parse::<RuleId>().map_err(|e| e.to_string());
        let mut config = Config {
            exclude_set: glob_set(&raw.exclude).map_err(|e| e.to_string())?,
            exclude: raw.exclude,
            ..Config::default()
        };
        for d in &raw.disable {
            config.disabled.push(rule(d)?);
        }
        if let Some(f) = &raw.fail_on {
            config.fail_on = Some(
                parse_confidence(f)
                    .ok_or_else(|| format!("fail_on = {f:?}: expected \"high\" or \"medium\""))?,
            );
        }
        for (id, scope) in &raw.rules {
            let id = rule(id)?;
            if scope.enabled == Some(false) {
                config.disabled.push(id);
            }
            config.scopes.insert(
                id,
                Scope {
                    only: glob_set(&scope.paths).map_err(|e| e.to_string())?,
                    not: glob_set(&scope.exclude).map_err(|e| e.to_string())?,
                },
            );
        }
        for (i, n) in raw.inventory.names.iter().enumerate() {
            if n.consumer.trim().is_empty() {
                return Err(format!(
                    "inventory.names[{i}] (path {:?}): consumer is empty: expected the consumer's name",
                    n.path
                ));
            }
            config.names.push(ConsumerNaming {
                paths: glob_set(std::slice::from_ref(&n.path))
                    .map_err(|e| e.to_string())?
                    .unwrap_or_else(GlobSet::empty),
                function: n.function.clone(),
                consumer: n.consumer.clone(),
            });
        }
        Ok(config)
    }

    /// The consumer name `[[inventory.names]]` gives the handler `function` in the file at
    /// `path` (as displayed, relative to the directory the lint runs in): the first entry
    /// whose glob matches the path and whose `function`, when given, is the handler's.
    pub fn consumer_name(&self, path: &Path, function: &str) -> Option<&str> {
        let path = clean(path);
        self.names
            .iter()
            .find(|n| {
                n.paths.is_match(&path) && n.function.as_deref().is_none_or(|f| f == function)
            })
            .map(|n| n.consumer.as_str())
    }

    /// Whether `rule` applies to the file at `path` (as displayed, relative to the
    /// directory the lint runs in).
    pub fn applies(&self, rule: RuleId, path: &Path) -> bool {
        if self.disabled.contains(&rule) {
            return false;
        }
        let path = clean(path);
        match self.scopes.get(&rule) {
            Some(scope) => {
                scope.only.as_ref().is_none_or(|g| g.is_match(&path))
                    && !scope.not.as_ref().is_some_and(|g| g.is_match(&path))
            }
            None => true,
        }
    }

    /// Whether the file is excluded from scanning.
    pub fn excludes(&self, path: &Path) -> bool {
        self.exclude_set
            .as_ref()
            .is_some_and(|g| g.is_match(clean(path)))
    }

    /// The `fail_on` of the file, if set.
    pub fn fail_on(&self) -> Option<Confidence> {
        self.fail_on
    }

    /// Adds globs to the exclusions (`--exclude`).
    pub fn add_excludes(&mut self, globs: &[String]) -> Result<(), LintError> {
        self.exclude.extend(globs.iter().cloned());
        self.exclude_set = glob_set(&self.exclude)?;
        Ok(())
    }
}

/// `./src/a.ts` → `src/a.ts`.
fn clean(path: &Path) -> PathBuf {
    path.strip_prefix(".").unwrap_or(path).to_path_buf()
}

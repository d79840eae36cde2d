//! What a reload would change: the new configuration checked against the running one key by
//! key. Only a closed list of changes applies live (docs/gateway.md, "Reload"); anything else
//! is refused, naming the key, and the running configuration stays.

use std::collections::HashMap;

use crate::config::{Config, Destination, Source};
use crate::reload_request::ReloadError;

/// How one destination of the new configuration relates to the running one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Change {
    /// The same settings: its lane and dispatcher go on (`old` is its index in the running
    /// configuration).
    Kept { old: usize },
    /// Other settings (or TLS files, which are read again on every reload): a new lane and
    /// dispatcher replace the old ones once these have finished what they hold.
    Changed { old: usize },
    /// New: a lane and dispatcher of its own.
    Added,
}

/// A reload that may apply: the new configuration (its sources in the running order, the new
/// ones after them, so that a source's index stays its own), each of its destinations' change,
/// and the names of the destinations it removes.
#[derive(Debug)]
pub(super) struct Plan {
    pub(super) config: Config,
    /// One per destination of `config`, in its order.
    pub(super) destinations: Vec<Change>,
    pub(super) removed: Vec<String>,
    pub(super) added_sources: Vec<String>,
    pub(super) changed_sources: Vec<String>,
    pub(super) routes: RouteChanges,
}

/// The routes a reload adds, changes and removes, by name.
#[derive(Debug, Default)]
pub(super) struct RouteChanges {
    pub(super) added: Vec<String>,
    pub(super) changed: Vec<String>,
    pub(super) removed: Vec<String>,
}

impl RouteChanges {
    fn of(old: &Config, new: &Config) -> Self {
        let printed = |r: &crate::config::Route| format!("{r:?}");
        let mut changes = Self::default();
        for route in &new.routes {
            match old.routes.iter().find(|r| r.name == route.name) {
                None => changes.added.push(route.name.to_string()),
                Some(before) if printed(before) != printed(route) => {
                    changes.changed.push(route.name.to_string());
                }
                Some(_) => {}
            }
        }
        changes.removed = (old.routes.iter())
            .filter(|r| !new.routes.iter().any(|n| n.name == r.name))
            .map(|r| r.name.to_string())
            .collect();
        changes
    }

    fn is_empty(&self) -> bool {
        self.added.is_empty() && self.changed.is_empty() && self.removed.is_empty()
    }
}

impl Plan {
    /// Whether it changes nothing.
    pub(super) fn is_empty(&self, old: &Config) -> bool {
        self.removed.is_empty()
            && self.added_sources.is_empty()
            && self.changed_sources.is_empty()
            && (self.destinations.iter()).all(|c| matches!(c, Change::Kept { .. }))
            && self.destinations.len() == old.destinations.len()
            && self.routes.is_empty()
    }
}

/// Checks `new` against `old`: the keys that need a restart unchanged, no source removed, no
/// broker source added or changed, no webhook source's `kind` or `dedup_scope` changed.
///
/// # Errors
/// [`ReloadError::NeedsRestart`] naming the first such key; [`ReloadError::SourceRemoved`].
pub(super) fn plan(old: &Config, mut new: Config) -> Result<Plan, ReloadError> {
    if let Some(key) = fixed_key_changed(old, &new) {
        return Err(ReloadError::NeedsRestart { key });
    }
    let (added_sources, changed_sources) = check_sources(old, &mut new)?;
    // A rename carries the old name's rows over at start; one a reload introduces would leave
    // them behind (and the new name's version guard empty).
    for route in &new.routes {
        if let Some(from) = &route.renamed_from
            && !old.routes.iter().any(|r| r.name == route.name)
        {
            return Err(ReloadError::Rename {
                route: route.name.to_string(),
                from: from.to_string(),
            });
        }
    }
    let by_name: HashMap<&str, usize> = (old.destinations.iter().enumerate())
        .map(|(i, d)| (d.name.as_str(), i))
        .collect();
    let destinations = (new.destinations.iter())
        .map(|d| match by_name.get(d.name.as_str()) {
            None => Change::Added,
            Some(&old_index) if same(&old.destinations[old_index], d) => {
                Change::Kept { old: old_index }
            }
            Some(&old_index) => Change::Changed { old: old_index },
        })
        .collect();
    let removed = (old.destinations.iter())
        .filter(|d| !new.destinations.iter().any(|n| n.name == d.name))
        .map(|d| d.name.to_string())
        .collect();
    let routes = RouteChanges::of(old, &new);
    Ok(Plan {
        routes,
        config: new,
        destinations,
        removed,
        added_sources,
        changed_sources,
    })
}

/// Whether a destination's settings are the same. Compared as printed: the settings have no
/// `PartialEq` of their own (a route filter's program, a TLS client), and what prints alike
/// sends alike; the signing secret, which prints as `Secret(…)`, is compared itself. A
/// destination with TLS files is never the same: the files are read again on every reload,
/// so that a rotated certificate is taken.
fn same(old: &Destination, new: &Destination) -> bool {
    old.tls.is_none()
        && new.tls.is_none()
        && old.signing_secret.expose() == new.signing_secret.expose()
        && format!("{old:?}") == format!("{new:?}")
}

/// The sources of `new` put in `old`'s order with the added ones after them; returns the names
/// of the added and the changed ones.
fn check_sources(
    old: &Config,
    new: &mut Config,
) -> Result<(Vec<String>, Vec<String>), ReloadError> {
    let mut incoming: Vec<Option<Source>> = std::mem::take(&mut new.sources)
        .into_iter()
        .map(Some)
        .collect();
    let mut take = |name: &str| {
        (incoming.iter_mut())
            .find(|s| s.as_ref().is_some_and(|s| s.name.as_str() == name))
            .and_then(Option::take)
    };
    let mut sources = Vec::with_capacity(old.sources.len());
    let mut changed = Vec::new();
    for before in &old.sources {
        let name = before.name.as_str();
        let Some(after) = take(name) else {
            return Err(ReloadError::SourceRemoved {
                source_name: name.to_owned(),
            });
        };
        let key = |what: &str| ReloadError::NeedsRestart {
            key: format!("source {name:?} {what}"),
        };
        if before.kind != after.kind {
            return Err(key("kind"));
        }
        if before.dedup_scope != after.dedup_scope {
            return Err(key("dedup_scope"));
        }
        let printed = |s: &Source| format!("{s:?}");
        if before.broker().is_some() && printed(before) != printed(&after) {
            return Err(key(
                "settings (a broker source's reader is connected at start)",
            ));
        }
        // Reported when its settings print differently; a rotated secret (which prints as
        // `Secret(…)`) is not reported, but applies all the same.
        if printed(before) != printed(&after) {
            changed.push(name.to_owned());
        }
        sources.push(after);
    }
    let mut added = Vec::new();
    for after in incoming.into_iter().flatten() {
        if after.broker().is_some() {
            return Err(ReloadError::NeedsRestart {
                key: format!(
                    "source {:?} (a new broker source: its reader is connected at start)",
                    after.name.as_str()
                ),
            });
        }
        added.push(after.name.to_string());
        sources.push(after);
    }
    new.sources = sources;
    Ok((added, changed))
}

/// A key that needs a restart, and how its value is read for comparison.
type FixedKey = (&'static str, fn(&Config) -> String);

/// The first key outside the closed list whose value differs, as written in the file.
fn fixed_key_changed(old: &Config, new: &Config) -> Option<String> {
    let keys: [FixedKey; 18] = [
        ("listen", |c| format!("{:?}", c.listen)),
        ("admin_listen", |c| format!("{:?}", c.admin_listen)),
        ("metrics_listen", |c| format!("{:?}", c.metrics_listen)),
        ("database_url", |c| c.database_url.clone()),
        ("retention", |c| format!("{:?}", c.retention)),
        ("body_retention", |c| format!("{:?}", c.body_retention)),
        ("max_body_bytes", |c| c.max_body_bytes.to_string()),
        ("group_commit", |c| c.group_commit.to_string()),
        ("poll_interval", |c| format!("{:?}", c.poll_interval)),
        ("header_read_timeout", |c| {
            format!("{:?}", c.header_read_timeout)
        }),
        ("body_read_timeout", |c| {
            format!("{:?}", c.body_read_timeout)
        }),
        ("database_timeout", |c| format!("{:?}", c.database_timeout)),
        ("readyz_timeout", |c| format!("{:?}", c.readyz_timeout)),
        ("shutdown_grace", |c| format!("{:?}", c.shutdown_grace)),
        ("console", |c| format!("{:?}", c.console)),
        ("telemetry", |c| format!("{:?}", c.telemetry)),
        ("health_interval", |c| format!("{:?}", c.health_interval)),
        ("relay", |c| format!("{:?}", c.relays)),
    ];
    for (key, read) in keys {
        if read(old) != read(new) {
            return Some(key.to_owned());
        }
    }
    // The admin API is mounted at start or not at all: its token may change (a file re-read),
    // not whether there is one.
    (old.admin_token.is_some() != new.admin_token.is_some())
        .then(|| "admin_token_env / admin_token_file (whether the admin API is on)".to_owned())
}

//! What a configuration allows but an operator almost surely did not mean: a source whose events
//! no route takes, and an `event_types` pattern that matches none of the types its sender is
//! known to send (a typo: `pull-request` for `pull_request`). Events such a configuration
//! accepts are stored and answered `accepted` but sent nowhere, so `idem check-config` and
//! `idem serve` say so, and `--strict` refuses.

use std::sync::LazyLock;

use super::kind::SourceKind;
use super::model::{Config, type_matches};

/// Stripe's event types (data/stripe-event-types.txt names its origin).
static STRIPE_TYPES: LazyLock<Vec<&'static str>> =
    LazyLock::new(|| lines(include_str!("../../data/stripe-event-types.txt")));
/// GitHub's webhook event names (data/github-event-types.txt names its origin).
static GITHUB_TYPES: LazyLock<Vec<&'static str>> =
    LazyLock::new(|| lines(include_str!("../../data/github-event-types.txt")));

fn lines(text: &'static str) -> Vec<&'static str> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
}

/// The event types a kind of sender is known to send, for the kinds idem keeps a list of
/// (Stripe, GitHub); `None` for the others, whose types are the sender's own.
pub fn known_event_types(kind: SourceKind) -> Option<&'static [&'static str]> {
    match kind {
        SourceKind::Stripe => Some(&STRIPE_TYPES),
        SourceKind::GitHub => Some(&GITHUB_TYPES),
        _ => None,
    }
}

/// One thing [`Config::warnings`] found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigWarning {
    /// No route leaves the source: its events are stored and sent nowhere.
    #[error(
        "source {name:?} has no route: its events are accepted and stored but sent nowhere (add a [[route]] with source = {name:?}; `idem replay --backfill` sends the stored ones once it exists)"
    )]
    SourceWithoutRoute {
        /// The source's name.
        name: String,
    },
    /// An `event_types` pattern matches none of the types its source's sender is known to send.
    #[error(
        "route {route:?} event_types {pattern:?} matches none of the event types {kind} sends (a typo?); {hint}"
    )]
    UnknownEventType {
        /// The route.
        route: String,
        /// The pattern.
        pattern: String,
        /// The source's kind.
        kind: &'static str,
        /// Known types close to the pattern, or where the list comes from.
        hint: String,
    },
}

impl Config {
    /// What this configuration allows but an operator almost surely did not mean (see
    /// [`ConfigWarning`]), in the file's order: sources first, then routes.
    pub fn warnings(&self) -> Vec<ConfigWarning> {
        let mut found = Vec::new();
        for source in &self.sources {
            if !self.routes.iter().any(|r| r.source == source.name) {
                found.push(ConfigWarning::SourceWithoutRoute {
                    name: source.name.to_string(),
                });
            }
        }
        for route in &self.routes {
            let Some(source) = self.source(route.source.as_str()) else {
                continue;
            };
            let Some(known) = known_event_types(source.kind) else {
                continue;
            };
            for pattern in &route.event_types {
                if !known.iter().any(|t| type_matches(pattern, Some(t))) {
                    found.push(ConfigWarning::UnknownEventType {
                        route: route.name.to_string(),
                        pattern: pattern.clone(),
                        kind: source.kind.as_str(),
                        hint: hint(pattern, known),
                    });
                }
            }
        }
        found
    }
}

/// The known types nearest to `pattern` by edit distance (for a prefix pattern, against each
/// type's start of the same length), at most three, or where the lists are documented.
fn hint(pattern: &str, known: &[&str]) -> String {
    let (stem, prefix) = match pattern.strip_suffix('*') {
        Some(stem) => (stem, true),
        None => (pattern, false),
    };
    let mut near: Vec<(usize, &str)> = known
        .iter()
        .map(|t| {
            let compared: String = if prefix {
                t.chars().take(stem.chars().count()).collect()
            } else {
                (*t).to_owned()
            };
            (edit_distance(stem, &compared), *t)
        })
        .filter(|(d, _)| *d <= (stem.chars().count() / 4).max(2))
        .collect();
    near.sort();
    let mut names: Vec<String> = Vec::new();
    for (_, t) in near {
        // A prefix pattern suggests the prefix, once.
        let shown = if prefix {
            format!(
                "{}*",
                t.chars().take(stem.chars().count()).collect::<String>()
            )
        } else {
            t.to_owned()
        };
        if !names.contains(&shown) {
            names.push(shown);
        }
        if names.len() == 3 {
            break;
        }
    }
    if names.is_empty() {
        "the known types are listed in crates/idem-gateway/data/".to_owned()
    } else {
        format!("did you mean {}?", names.join(", "))
    }
}

/// Levenshtein distance of `a` and `b`, in characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lists_hold_the_common_types() {
        let stripe = known_event_types(SourceKind::Stripe).unwrap();
        for t in [
            "invoice.paid",
            "customer.subscription.updated",
            "charge.refunded",
        ] {
            assert!(stripe.contains(&t), "{t}");
        }
        let github = known_event_types(SourceKind::GitHub).unwrap();
        for t in ["push", "pull_request", "issues", "ping", "workflow_run"] {
            assert!(github.contains(&t), "{t}");
        }
        assert!(known_event_types(SourceKind::Generic).is_none());
    }

    #[test]
    fn a_near_miss_names_the_known_types_near_it() {
        let github = known_event_types(SourceKind::GitHub).unwrap();
        let h = hint("pull-request", github);
        assert!(h.starts_with("did you mean pull_request"), "{h}");
        let stripe = known_event_types(SourceKind::Stripe).unwrap();
        let h = hint("customer.subscripton.*", stripe);
        assert!(h.starts_with("did you mean customer.subscription*"), "{h}");
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}

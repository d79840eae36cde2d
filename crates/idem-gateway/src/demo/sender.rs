//! The demo's sender: real payloads from `testdata/`, signed as Stripe and GitHub sign them,
//! each sent three times (two copies at once), one Stripe object's events in reverse order,
//! and one delivery with a bad signature.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use idem_http::verify::{github, stripe};
use sha2::{Digest, Sha256};
use tokio::sync::{Mutex, Semaphore};

/// The Stripe corpus: one event per line.
const STRIPE_EVENTS: &str = include_str!("../../../../testdata/stripe-events/events.jsonl");
/// GitHub payloads with their `X-GitHub-Event` names.
const GITHUB_PAYLOADS: [(&str, &str, &[u8]); 4] = [
    (
        "push",
        "push",
        include_bytes!("../../../../testdata/github/push/payload.json"),
    ),
    (
        "ping",
        "ping",
        include_bytes!("../../../../testdata/github/ping/payload.json"),
    ),
    (
        "issues",
        "issues-opened",
        include_bytes!("../../../../testdata/github/issues/opened.payload.json"),
    ),
    (
        "pull_request",
        "pull_request-opened",
        include_bytes!("../../../../testdata/github/pull_request/opened.payload.json"),
    ),
];
/// How many Stripe objects are sent at once (each object's events in order).
const PARALLEL_OBJECTS: usize = 16;

/// A Stripe event of the corpus: its id, `created` and the line's bytes.
type StripeEvent = (String, i64, Vec<u8>);

/// One delivery to send: the source, its headers (signed when sent), the body.
#[derive(Debug, Clone)]
pub(crate) enum Delivery {
    Stripe {
        body: Vec<u8>,
    },
    GitHub {
        delivery: String,
        event: &'static str,
        body: &'static [u8],
    },
}

/// Everything the demo sends, and what must follow from it.
#[derive(Debug)]
pub(crate) struct Plan {
    /// Sequences sent one after the other; sequences run in parallel.
    pub sequences: Vec<Vec<Delivery>>,
    /// The Stripe event sent once more with a signature from the wrong secret.
    pub forged: Vec<u8>,
    /// The dedup key of every unique event.
    pub keys: Vec<String>,
    /// The keys that must be judged stale (the reversed object's older events).
    pub expected_stale: HashSet<String>,
    stripe_secret: String,
    github_secret: String,
}

impl Plan {
    /// The plan over the shipped test data.
    pub(crate) fn from_testdata(stripe_secret: &str, github_secret: &str) -> Self {
        // Group Stripe events by object, keeping the sender's order within each object.
        let mut objects: Vec<(String, Vec<StripeEvent>)> = Vec::new();
        for line in STRIPE_EVENTS.lines().filter(|l| !l.trim().is_empty()) {
            let Ok(value) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            let object = value["data"]["object"]["id"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let id = value["id"].as_str().unwrap_or_default().to_owned();
            let created = value["created"].as_i64().unwrap_or_default();
            let event = (id, created, line.as_bytes().to_vec());
            match objects.iter_mut().find(|(o, _)| *o == object) {
                Some((_, events)) => events.push(event),
                None => objects.push((object, vec![event])),
            }
        }
        // Reverse the first object with four or more events of distinct seconds: all but its
        // newest event then arrive after a newer one and are stale. (Equal seconds would tie,
        // and ties are delivered.)
        let reversed = objects.iter().position(|(_, events)| {
            let seconds: HashSet<i64> = events.iter().map(|e| e.1).collect();
            events.len() >= 4 && seconds.len() == events.len()
        });
        let mut expected_stale = HashSet::new();
        let mut keys = Vec::new();
        let mut sequences = Vec::new();
        for (i, (_, mut events)) in objects.into_iter().enumerate() {
            if Some(i) == reversed {
                events.reverse();
                let mut newest = i64::MIN;
                for (id, created, _) in &events {
                    if *created < newest {
                        expected_stale.insert(format!("stripe:{id}"));
                    }
                    newest = newest.max(*created);
                }
            }
            keys.extend(events.iter().map(|(id, _, _)| format!("stripe:{id}")));
            sequences.push(
                events
                    .into_iter()
                    .map(|(_, _, body)| Delivery::Stripe { body })
                    .collect(),
            );
        }
        for (event, name, body) in GITHUB_PAYLOADS {
            let delivery = guid(name);
            keys.push(format!("github:{delivery}"));
            sequences.push(vec![Delivery::GitHub {
                delivery,
                event,
                body,
            }]);
        }
        let forged = STRIPE_EVENTS
            .lines()
            .next()
            .unwrap_or("{}")
            .as_bytes()
            .to_vec();
        Self {
            sequences,
            forged,
            keys,
            expected_stale,
            stripe_secret: stripe_secret.to_owned(),
            github_secret: github_secret.to_owned(),
        }
    }

    /// How many unique events the plan sends.
    pub(crate) fn unique_events(&self) -> u64 {
        self.keys.len() as u64
    }
}

/// A GitHub-style delivery GUID derived from a name, so that runs are reproducible.
fn guid(name: &str) -> String {
    let digest = Sha256::digest(name.as_bytes());
    let hex = hex::encode(&digest[..16]);
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// The gateway's answers, counted.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Tally {
    pub sent: u64,
    pub accepted: u64,
    pub duplicates: u64,
    pub rejected: u64,
    /// Anything else: 5xx, transport errors.
    pub other: u64,
}

/// Sends the plan to the gateway at `base` (`http://addr`).
pub(crate) async fn send(base: &str, plan: &Plan) -> Tally {
    // Plain http:// to the demo's own gateway; built like every client, with its TLS
    // configured (reqwest has no process-wide crypto provider to fall back on).
    let client = match crate::tls::default_client_builder().build() {
        Ok(client) => client,
        Err(e) => {
            tracing::error!(error = %e, "cannot build the demo's HTTP client; nothing sent");
            return Tally::default();
        }
    };
    let tally = Arc::new(Mutex::new(Tally::default()));
    let permits = Arc::new(Semaphore::new(PARALLEL_OBJECTS));
    let mut tasks = tokio::task::JoinSet::new();
    for sequence in plan.sequences.clone() {
        let (client, tally, permits) = (client.clone(), Arc::clone(&tally), Arc::clone(&permits));
        let (base, stripe_secret, github_secret) = (
            base.to_owned(),
            plan.stripe_secret.clone(),
            plan.github_secret.clone(),
        );
        tasks.spawn(async move {
            let Ok(_permit) = permits.acquire().await else {
                return;
            };
            for delivery in sequence {
                let request = || build(&client, &base, &delivery, &stripe_secret, &github_secret);
                // Two copies at once (a lost 2xx and the sender's retry racing), then a third.
                let (a, b) = tokio::join!(request().send(), request().send());
                let c = request().send().await;
                let mut tally = tally.lock().await;
                for answer in [a, b, c] {
                    count(&mut tally, answer);
                }
            }
        });
    }
    while tasks.join_next().await.is_some() {}
    let forged = Delivery::Stripe {
        body: plan.forged.clone(),
    };
    let answer = build(&client, base, &forged, "whsec_not_the_secret", "")
        .send()
        .await;
    let mut tally = tally.lock().await;
    count(&mut tally, answer);
    *tally
}

fn build(
    client: &reqwest::Client,
    base: &str,
    delivery: &Delivery,
    stripe_secret: &str,
    github_secret: &str,
) -> reqwest::RequestBuilder {
    match delivery {
        Delivery::Stripe { body } => {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() as i64);
            client
                .post(format!("{base}/webhooks/stripe"))
                .header("content-type", "application/json")
                .header(
                    stripe::SIGNATURE_HEADER,
                    stripe::sign(stripe_secret, now, body),
                )
                .body(body.clone())
        }
        Delivery::GitHub {
            delivery,
            event,
            body,
        } => client
            .post(format!("{base}/webhooks/github"))
            .header("content-type", "application/json")
            .header("x-github-delivery", delivery.as_str())
            .header("x-github-event", *event)
            .header(github::SIGNATURE_HEADER, github::sign(github_secret, body))
            .body(body.to_vec()),
    }
}

fn count(tally: &mut Tally, answer: Result<reqwest::Response, reqwest::Error>) {
    tally.sent += 1;
    let Ok(response) = answer else {
        tally.other += 1;
        return;
    };
    let status = response.status();
    let idem_status = response
        .headers()
        .get(crate::STATUS_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    match (status.as_u16(), idem_status.as_str()) {
        (200, "accepted") => tally.accepted += 1,
        (200, "duplicate") => tally.duplicates += 1,
        (400..=499, _) => tally.rejected += 1,
        _ => tally.other += 1,
    }
}

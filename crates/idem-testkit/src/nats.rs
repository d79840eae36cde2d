//! A JetStream stream of its own for one test, on the local NATS server: what relay tests
//! publish to and read back.

use std::time::{Duration, Instant};

use async_nats::jetstream;

/// The local NATS server tests use.
pub const NATS_URL: &str = "nats://127.0.0.1:4222";

/// Keeps one stream in the account for as long as the server runs. nats-server (2.9) removes
/// the account's JetStream directory when its last stream is deleted, and a stream created in
/// that moment fails ("error creating store for stream", 10049): tests that create and delete
/// their own streams concurrently raced on it. A stream nobody deletes keeps the directory.
/// Call it before creating a stream.
///
/// # Panics
/// When the stream can be neither created nor found.
pub async fn keep_account_store(context: &jetstream::Context) {
    let config = jetstream::stream::Config {
        name: "IDEM_TESTS_KEEP".to_string(),
        subjects: vec!["idem-tests-keep.>".to_string()],
        ..Default::default()
    };
    // Creating an existing stream with the same configuration succeeds; a concurrent first
    // creation may still answer "in use", after which the stream is there.
    if context.create_stream(config).await.is_err() {
        context
            .get_stream("IDEM_TESTS_KEEP")
            .await
            .expect("the stream that keeps the account's JetStream store");
    }
}

/// A stream taking `{subject}.>`, named uniquely for one test, deleted by [`delete`](Self::delete).
#[derive(Debug)]
pub struct TestStream {
    context: jetstream::Context,
    /// The stream's name.
    pub name: String,
    /// The subject prefix it takes (`{subject}.>`).
    pub subject: String,
}

impl TestStream {
    /// Creates a fresh stream on [`NATS_URL`].
    ///
    /// # Panics
    /// When NATS cannot be reached or the stream cannot be created: the tests run against the
    /// real server and do not skip.
    pub async fn new() -> Self {
        let client = async_nats::connect(NATS_URL)
            .await
            .expect("NATS with JetStream on 127.0.0.1:4222");
        let context = jetstream::new(client);
        keep_account_store(&context).await;
        let name = crate::unique("IDEMRELAY");
        let subject = name.to_lowercase();
        context
            .create_stream(jetstream::stream::Config {
                name: name.clone(),
                subjects: vec![format!("{subject}.>")],
                ..Default::default()
            })
            .await
            .expect("create a stream");
        Self {
            context,
            name,
            subject,
        }
    }

    /// The `Nats-Msg-Id` and body of each message in the stream, in stream order, once there
    /// are at least `n` (waiting up to 15 s).
    ///
    /// # Panics
    /// When fewer than `n` arrive in time.
    pub async fn messages(&self, n: u64) -> Vec<(String, Vec<u8>)> {
        let deadline = Instant::now() + Duration::from_secs(15);
        let mut stream = self.context.get_stream(&self.name).await.expect("stream");
        loop {
            let count = stream.info().await.expect("stream info").state.messages;
            if count >= n {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{count} of {n} messages in the stream"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let last = stream
            .info()
            .await
            .expect("stream info")
            .state
            .last_sequence;
        let mut out = Vec::new();
        for seq in 1..=last {
            let message = stream.get_raw_message(seq).await.expect("a stored message");
            let id = message
                .headers
                .get("Nats-Msg-Id")
                .map(|v| v.as_str().to_owned())
                .unwrap_or_default();
            out.push((id, message.payload.to_vec()));
        }
        out
    }

    /// Deletes the stream.
    pub async fn delete(self) {
        let _ = self.context.delete_stream(&self.name).await;
    }
}

//! The storeless forwarder: the yardstick for end-to-end forwarding. The same HTTP work as the
//! gateway's forwarding with no store: verify the Stripe signature, read the event id, sign the
//! body for the application (Standard Webhooks, the gateway's `webhook-id`) and POST it there,
//! answering 200 once the application answered 2xx (502 otherwise). An axum server on a runtime
//! of its own, as a separate process would be.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use idem_gateway::dispatch::send::{EVENT_ID, webhook_id};
use idem_http::verify::standard_webhooks::{self, ID_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER};
use idem_http::verify::stripe::StripeVerifier;

use crate::gateway::{APP_SECRET, DESTINATION};
use crate::load::{SECRET, unix_now};
use crate::own_runtime::OwnRuntime;

/// The name of the forwarder's server threads (their CPU time is the forwarder's).
pub(crate) const THREADS: &str = "bench-forwarder";
/// The source's name, the scope of each `webhook-id` (as in the gateway's configuration).
const SOURCE: &str = "stripe";

struct Forwarder {
    verifier: StripeVerifier,
    client: reqwest::Client,
    /// The application's URL.
    destination: String,
}

/// Starts the forwarder, sending to the application at `destination`; its `url` takes the
/// webhooks.
pub(crate) fn start(destination: &str) -> OwnRuntime {
    let destination = destination.to_owned();
    OwnRuntime::serve(THREADS, "/webhooks/stripe", move || async move {
        let forwarder = Arc::new(Forwarder {
            verifier: StripeVerifier::new([SECRET]).expect("secret"),
            // reqwest's defaults, as the gateway's destinations have them.
            client: idem_testkit::http_client(),
            destination,
        });
        axum::Router::new()
            .route("/webhooks/stripe", post(handle))
            .with_state(forwarder)
    })
}

async fn handle(
    State(forwarder): State<Arc<Forwarder>>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let Some(id) = crate::baselines::verified_id(&forwarder.verifier, &headers, &body) else {
        return StatusCode::BAD_REQUEST;
    };
    let msg_id = webhook_id(SOURCE, &id, DESTINATION);
    let timestamp = unix_now();
    let Ok(signature) = standard_webhooks::sign(APP_SECRET, &msg_id, timestamp, &body) else {
        return StatusCode::INTERNAL_SERVER_ERROR;
    };
    let sent = forwarder
        .client
        .post(&forwarder.destination)
        .header(EVENT_ID, id)
        .header(ID_HEADER, msg_id)
        .header(TIMESTAMP_HEADER, timestamp)
        .header(SIGNATURE_HEADER, signature)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await;
    let Ok(answer) = sent else {
        return StatusCode::BAD_GATEWAY;
    };
    let success = answer.status().is_success();
    // The answer's body is read, as the gateway reads an excerpt: the connection goes back to
    // the pool.
    match answer.bytes().await {
        Ok(_) if success => StatusCode::OK,
        _ => StatusCode::BAD_GATEWAY,
    }
}

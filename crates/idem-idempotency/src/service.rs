//! The service: what happens to one request.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum_core::body::Body;
use bytes::Bytes;
use futures_util::FutureExt;
use http::header::HeaderValue;
use http::request::Parts;
use http::{Request, Response};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use idem_core::{FencingToken, Timestamp, Ttl};
use tower::Service;

use crate::config::{Config, Engine};
use crate::error::{BoxError, Rejection, StoreError};
use crate::fingerprint::Fingerprint;
use crate::future::ResponseFuture;
use crate::key::IdempotencyKey;
use crate::metric_definitions::REQUESTS_TOTAL;
use crate::record::{IDEMPOTENT_REPLAYED, StoredResponse};
use crate::store::{Claim, IdempotencyStore, OpenTransaction, Scope, TransactionalStore};

/// The Idempotency-Key middleware around the service `S`, made by
/// [`IdempotencyLayer`](crate::IdempotencyLayer).
///
/// `S` receives requests with an [`axum_core::body::Body`] (the buffered body for keyed
/// requests, the original one otherwise) and may answer with any body; the middleware answers
/// with a `Body` and passes `S`'s errors through (releasing the claim first).
#[derive(Clone)]
pub struct Idempotency<S> {
    inner: S,
    config: Arc<Config>,
}

impl<S> Idempotency<S> {
    pub(crate) fn new(inner: S, config: Arc<Config>) -> Self {
        Self { inner, config }
    }

    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S: std::fmt::Debug> std::fmt::Debug for Idempotency<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Idempotency")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<S, B, ResBody> Service<Request<B>> for Idempotency<S>
where
    S: Service<Request<Body>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
    ResBody: http_body::Body<Data = Bytes> + Send + 'static,
    ResBody::Error: Into<BoxError>,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        // The clone is not necessarily ready: keep the service that was polled ready.
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        ResponseFuture::new(handle(Arc::clone(&self.config), inner, request))
    }
}

fn outcome(name: &'static str) {
    metrics::counter!(REQUESTS_TOTAL, "outcome" => name).increment(1);
}

fn reject(config: &Config, rejection: Rejection) -> Response<Body> {
    rejection.to_response(&config.problem_type_base)
}

async fn handle<S, B, ResBody>(
    config: Arc<Config>,
    inner: S,
    request: Request<B>,
) -> Result<Response<Body>, S::Error>
where
    S: Service<Request<Body>, Response = Response<ResBody>> + Send + 'static,
    S::Future: Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
    ResBody: http_body::Body<Data = Bytes> + Send + 'static,
    ResBody::Error: Into<BoxError>,
{
    let (parts, body) = request.into_parts();
    if !config.handles(&parts.method) {
        return call(inner, Request::from_parts(parts, Body::new(body))).await;
    }
    let key = match IdempotencyKey::from_headers(&parts.headers) {
        Ok(key) => key,
        Err(e) => {
            outcome("rejected");
            return Ok(reject(&config, Rejection::KeyInvalid(e)));
        }
    };
    let Some(key) = key else {
        if config.requires(&parts.method) {
            outcome("rejected");
            return Ok(reject(&config, Rejection::KeyMissing));
        }
        outcome("passthrough");
        return match &config.engine {
            Engine::Plain(_) => call(inner, Request::from_parts(parts, Body::new(body))).await,
            Engine::Transactional(store) => {
                keyless_in_transaction(&config, store.as_ref(), inner, parts, Body::new(body)).await
            }
        };
    };
    let Some(principal) = (config.scope)(&parts) else {
        outcome("rejected");
        return Ok(reject(&config, Rejection::PrincipalMissing));
    };
    let body = match Limited::new(Body::new(body), config.max_body_bytes)
        .collect()
        .await
    {
        Ok(collected) => collected.to_bytes(),
        Err(e) => {
            outcome("rejected");
            let rejection = if e.is::<LengthLimitError>() {
                Rejection::BodyTooLarge {
                    limit: config.max_body_bytes,
                }
            } else {
                Rejection::BodyUnreadable(e)
            };
            return Ok(reject(&config, rejection));
        }
    };
    let fingerprint = match Fingerprint::of(&parts.method, &parts.uri, &body, config.body_mode) {
        Ok(fingerprint) => fingerprint,
        Err(e) => {
            outcome("rejected");
            return Ok(reject(&config, Rejection::BodyNotJson(e)));
        }
    };
    let scope = Scope::new(principal, key);
    let lease = match Ttl::new(config.lease) {
        Ok(lease) => lease,
        Err(e) => {
            outcome("store_error");
            return Ok(reject(
                &config,
                Rejection::StoreUnavailable(StoreError::Backend(e.into())),
            ));
        }
    };
    let claimed = Claimed {
        scope,
        fingerprint,
        lease,
    };
    match &config.engine {
        Engine::Plain(store) => {
            run_plain(&config, Arc::clone(store), inner, parts, body, claimed).await
        }
        Engine::Transactional(store) => {
            run_in_transaction(&config, store.as_ref(), inner, parts, body, claimed).await
        }
    }
}

/// What a keyed request claims: its scope, for its fingerprint, for the lease.
struct Claimed {
    scope: Scope,
    fingerprint: Fingerprint,
    lease: Ttl,
}

/// What to do after a claim.
enum Next {
    /// This request holds the claim with this token: run the handler.
    Run(FencingToken),
    /// Send this response (a replay, 409, 422 or an error) without running the handler.
    Answer(Response<Body>),
}

/// The claim's answer: whether to run the handler, or what to answer instead.
fn answer_claim(
    config: &Config,
    scope: &Scope,
    now: Timestamp,
    claim: Result<Claim, StoreError>,
) -> Next {
    let response = match claim {
        Ok(Claim::Acquired { token, .. }) => return Next::Run(token),
        Ok(Claim::Completed(stored)) => {
            outcome("replayed");
            let mut response = stored.to_response();
            response
                .headers_mut()
                .insert(IDEMPOTENT_REPLAYED, HeaderValue::from_static("true"));
            response
        }
        Ok(Claim::InProgress { until }) => {
            outcome("in_progress");
            let retry_after = retry_after(until, now, config.max_retry_after);
            reject(config, Rejection::InProgress { retry_after })
        }
        Ok(Claim::Mismatch) => {
            outcome("mismatch");
            reject(config, Rejection::FingerprintMismatch)
        }
        Err(StoreError::Record(e)) => {
            outcome("store_error");
            reject(config, Rejection::RecordUnreadable(e))
        }
        Err(e) => store_unavailable(config, scope, e),
    };
    Next::Answer(response)
}

fn store_unavailable(config: &Config, scope: &Scope, e: StoreError) -> Response<Body> {
    outcome("store_error");
    tracing::warn!(scope = %scope, error = %e, "idempotency store failed; answering 503");
    reject(config, Rejection::StoreUnavailable(e))
}

/// The claim's remaining lease in whole seconds, rounded up, between 1 s and `max`.
fn retry_after(until: Timestamp, now: Timestamp, max: Duration) -> Duration {
    let remaining_ms = u64::try_from(until.0.saturating_sub(now.0)).unwrap_or(0);
    Duration::from_secs(remaining_ms.div_ceil(1000).clamp(1, max.as_secs().max(1)))
}

/// Non-transactional mode: claim (one store call), run the handler with the claim held, then
/// complete (one store call) or release.
async fn run_plain<S, ResBody>(
    config: &Config,
    store: Arc<dyn IdempotencyStore>,
    inner: S,
    parts: Parts,
    body: Bytes,
    claimed: Claimed,
) -> Result<Response<Body>, S::Error>
where
    S: Service<Request<Body>, Response = Response<ResBody>> + Send + 'static,
    S::Future: Send + 'static,
    ResBody: http_body::Body<Data = Bytes> + Send + 'static,
    ResBody::Error: Into<BoxError>,
{
    let Claimed {
        scope,
        fingerprint,
        lease,
    } = claimed;
    let claim = store.claim(&scope, &fingerprint, lease).await;
    let token = match answer_claim(config, &scope, store.now(), claim) {
        Next::Run(token) => token,
        Next::Answer(response) => return Ok(response),
    };
    let held = Held {
        store,
        scope,
        token,
        armed: true,
    };
    let response = match call_catching(inner, Request::from_parts(parts, Body::from(body))).await {
        Some(Ok(response)) => response,
        Some(Err(e)) => {
            held.abandon().await;
            return Err(e);
        }
        None => {
            held.abandon().await;
            return Ok(reject(config, Rejection::HandlerPanicked));
        }
    };
    if !config.stores(response.status()) {
        held.abandon().await;
        return Ok(response.map(Body::new));
    }
    let (record, response) = match buffer(config, response).await {
        Ok(buffered) => buffered,
        Err(rejection) => {
            held.abandon().await;
            return Ok(reject(config, rejection));
        }
    };
    match held.store.complete(&held.scope, held.token, &record).await {
        Ok(()) => outcome("executed"),
        // The handler's effect is done; its response is the truth for this client. The claim
        // is left to expire (not released), so a retry waits for the lease before it can run
        // again.
        Err(e) => {
            outcome("unrecorded");
            tracing::warn!(scope = %held.scope, token = %held.token, error = %e,
                "the handler ran but its response could not be stored");
        }
    }
    held.disarm();
    Ok(response)
}

/// Transactional mode: one transaction for the claim, the handler's writes and the stored
/// response, committed once; anything else rolls it back, which also undoes the claim.
async fn run_in_transaction<S, ResBody>(
    config: &Config,
    store: &dyn TransactionalStore,
    inner: S,
    mut parts: Parts,
    body: Bytes,
    claimed: Claimed,
) -> Result<Response<Body>, S::Error>
where
    S: Service<Request<Body>, Response = Response<ResBody>> + Send + 'static,
    S::Future: Send + 'static,
    ResBody: http_body::Body<Data = Bytes> + Send + 'static,
    ResBody::Error: Into<BoxError>,
{
    let Claimed {
        scope,
        fingerprint,
        lease,
    } = claimed;
    let mut tx = match store.begin().await {
        Ok(tx) => tx,
        Err(e) => return Ok(store_unavailable(config, &scope, e)),
    };
    let claim = tx.claim(&scope, &fingerprint, lease).await;
    let token = match answer_claim(config, &scope, store.now(), claim) {
        Next::Run(token) => token,
        Next::Answer(response) => {
            rollback(tx).await;
            return Ok(response);
        }
    };
    tx.expose(&mut parts.extensions);
    let response = match call_catching(inner, Request::from_parts(parts, Body::from(body))).await {
        Some(Ok(response)) => response,
        Some(Err(e)) => {
            release_by_rollback(tx).await;
            return Err(e);
        }
        None => {
            release_by_rollback(tx).await;
            return Ok(reject(config, Rejection::HandlerPanicked));
        }
    };
    if !config.stores(response.status()) {
        release_by_rollback(tx).await;
        return Ok(response.map(Body::new));
    }
    let (record, response) = match buffer(config, response).await {
        Ok(buffered) => buffered,
        Err(rejection) => {
            release_by_rollback(tx).await;
            return Ok(reject(config, rejection));
        }
    };
    match tx.commit(Some((&scope, token, &record))).await {
        Ok(()) => {
            outcome("executed");
            Ok(response)
        }
        // Rolled back: none of this request's writes stand. Not expected with the SQL stores,
        // whose claim no other request can take over while this transaction is open.
        Err(StoreError::Fenced) => {
            outcome("released");
            Ok(reject(config, Rejection::LeaseLost))
        }
        // Rolled back as well, with the claim: a retry runs again.
        Err(e) => Ok(store_unavailable(config, &scope, e)),
    }
}

/// Reads the handler's response body; returns the record to store (status, the chosen headers,
/// body) and the response to send.
async fn buffer<ResBody>(
    config: &Config,
    response: Response<ResBody>,
) -> Result<(StoredResponse, Response<Body>), Rejection>
where
    ResBody: http_body::Body<Data = Bytes> + Send + 'static,
    ResBody::Error: Into<BoxError>,
{
    let (head, body) = response.into_parts();
    let body = match Body::new(body).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) => return Err(Rejection::ResponseBodyFailed(e.into())),
    };
    let headers = config
        .replay_headers
        .iter()
        .flat_map(|name| {
            head.headers
                .get_all(name)
                .iter()
                .map(|value| (name.clone(), value.clone()))
        })
        .collect();
    let record = StoredResponse::new(head.status, headers, body.clone());
    Ok((record, Response::from_parts(head, Body::from(body))))
}

/// A request without a key in transactional mode: the handler still gets its transaction.
async fn keyless_in_transaction<S, ResBody>(
    config: &Config,
    store: &dyn TransactionalStore,
    inner: S,
    mut parts: Parts,
    body: Body,
) -> Result<Response<Body>, S::Error>
where
    S: Service<Request<Body>, Response = Response<ResBody>> + Send + 'static,
    S::Future: Send + 'static,
    ResBody: http_body::Body<Data = Bytes> + Send + 'static,
    ResBody::Error: Into<BoxError>,
{
    let tx = match store.begin().await {
        Ok(tx) => tx,
        Err(e) => return Ok(reject(config, Rejection::StoreUnavailable(e))),
    };
    tx.expose(&mut parts.extensions);
    match call_catching(inner, Request::from_parts(parts, body)).await {
        Some(Ok(response)) if config.stores(response.status()) => match tx.commit(None).await {
            Ok(()) => Ok(response.map(Body::new)),
            Err(e) => Ok(reject(config, Rejection::StoreUnavailable(e))),
        },
        Some(Ok(response)) => {
            rollback(tx).await;
            Ok(response.map(Body::new))
        }
        Some(Err(e)) => {
            rollback(tx).await;
            Err(e)
        }
        None => {
            rollback(tx).await;
            Ok(reject(config, Rejection::HandlerPanicked))
        }
    }
}

async fn call<S, ResBody>(mut inner: S, request: Request<Body>) -> Result<Response<Body>, S::Error>
where
    S: Service<Request<Body>, Response = Response<ResBody>>,
    ResBody: http_body::Body<Data = Bytes> + Send + 'static,
    ResBody::Error: Into<BoxError>,
{
    Ok(inner.call(request).await?.map(Body::new))
}

/// Calls the handler; `None` when it panicked (in `call` or while running).
async fn call_catching<S>(
    mut inner: S,
    request: Request<Body>,
) -> Option<Result<S::Response, S::Error>>
where
    S: Service<Request<Body>> + Send + 'static,
    S::Future: Send + 'static,
{
    AssertUnwindSafe(async move { inner.call(request).await })
        .catch_unwind()
        .await
        .ok()
}

async fn rollback(tx: Box<dyn OpenTransaction>) {
    if let Err(e) = tx.rollback().await {
        tracing::warn!(error = %e, "rolling back the request's transaction failed");
    }
}

/// Nothing is stored (transactional mode): rolling back undoes the handler's writes and the
/// claim, so the key is free again.
async fn release_by_rollback(tx: Box<dyn OpenTransaction>) {
    rollback(tx).await;
    outcome("released");
}

/// A claim this request holds (non-transactional mode). Dropped while still armed (the request was cancelled: the client
/// went away and the server dropped the handler), it releases the claim in the background, as a
/// failed handler does.
struct Held {
    store: Arc<dyn IdempotencyStore>,
    scope: Scope,
    token: FencingToken,
    armed: bool,
}

impl Held {
    /// Nothing is stored: releases the claim, so a retry runs the handler again.
    async fn abandon(mut self) {
        self.armed = false;
        if let Err(e) = self.store.release(&self.scope, self.token).await {
            tracing::warn!(scope = %self.scope, token = %self.token, error = %e,
                "releasing the idempotency claim failed; it ends when its lease expires");
        }
        outcome("released");
    }

    fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        // Without a runtime (the process is shutting down) the lease simply expires.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let (store, scope, token) = (Arc::clone(&self.store), self.scope.clone(), self.token);
            runtime.spawn(async move { store.release(&scope, token).await });
        }
    }
}

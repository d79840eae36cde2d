//! The response future of [`Idempotency`](crate::Idempotency).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum_core::body::Body;
use http::Response;

/// The future [`Idempotency`](crate::Idempotency) returns: the stored, rejected or fresh
/// response, or the inner service's error.
///
/// A boxed `async` block rather than a hand-written state machine (as tower's `timeout` has):
/// one request goes through up to six awaits on four kinds of futures (body, claim, handler,
/// response body, completion, release), and one allocation per request is nothing beside the
/// store's round trips. The named type keeps that choice private.
pub struct ResponseFuture<E> {
    inner: Pin<Box<dyn Future<Output = Result<Response<Body>, E>> + Send>>,
}

impl<E> ResponseFuture<E> {
    pub(crate) fn new(
        inner: impl Future<Output = Result<Response<Body>, E>> + Send + 'static,
    ) -> Self {
        Self {
            inner: Box::pin(inner),
        }
    }
}

impl<E> Future for ResponseFuture<E> {
    type Output = Result<Response<Body>, E>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.inner.as_mut().poll(cx)
    }
}

impl<E> fmt::Debug for ResponseFuture<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ResponseFuture")
    }
}

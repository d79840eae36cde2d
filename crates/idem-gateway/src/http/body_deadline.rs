//! A request body that must arrive whole by a deadline fixed when the request starts
//! (`body_read_timeout`). tower-http's body timeout restarts after every frame, so a client
//! sending a byte every 200 ms would never meet it; this one counts from the first byte.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use http_body::{Body as HttpBody, Frame, SizeHint};
use tokio::time::Sleep;

/// What the body reports when its deadline passed before its end.
#[derive(Debug, thiserror::Error)]
#[error("the request body was not received within {0:?}")]
pub(crate) struct BodyDeadlineError(Duration);

/// `inner`, failing with [`BodyDeadlineError`] once `limit` has passed since [`new`](Self::new).
pub(crate) struct DeadlineBody {
    inner: Body,
    deadline: Pin<Box<Sleep>>,
    limit: Duration,
}

impl DeadlineBody {
    pub(crate) fn new(inner: Body, limit: Duration) -> Self {
        Self {
            inner,
            deadline: Box::pin(tokio::time::sleep(limit)),
            limit,
        }
    }
}

impl HttpBody for DeadlineBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            return Poll::Ready(frame);
        }
        match self.deadline.as_mut().poll(cx) {
            Poll::Ready(()) => {
                Poll::Ready(Some(Err(axum::Error::new(BodyDeadlineError(self.limit)))))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Whether `error` (or one of its causes) is a passed body deadline.
pub(crate) fn is_body_timeout(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(error);
    while let Some(e) = cause {
        if e.is::<BodyDeadlineError>() {
            return true;
        }
        cause = e.source();
    }
    false
}

//! The error a handler returns: any application error, converted by `?`, retryable unless
//! marked permanent.

use std::error::Error as StdError;
use std::fmt;

use crate::{BoxError, Error};

/// The error type of a handler given to [`Runner::run`](crate::Runner::run): `?` converts any
/// `std::error::Error + Send + Sync + 'static` into it (a `sqlx::Error`, an [`Error`] of idem's
/// own writes, a `serde_json::Error`, the application's error enum), as `anyhow` does.
///
/// A handler error is **retryable** by default: nothing was committed and the same event may
/// succeed on its next delivery (a provider that was down, a row another event creates). Mark one
/// **permanent** with [`HandlerError::permanent`] when the same event can never succeed (a payload
/// that does not parse, a business rule it breaks): the runner returns [`Error::Permanent`], of
/// kind [`ErrorKind::Permanent`](crate::ErrorKind::Permanent), and the broker consumers
/// dead-letter the event at once instead of retrying it.
///
/// ```
/// use idem_sql::HandlerError;
///
/// fn amount(payload: &[u8]) -> Result<i64, HandlerError> {
///     // `?` on any error type: retryable
///     let value: serde_json::Value = serde_json::from_slice(payload)?;
///     // marked permanent: retrying the same payload cannot help
///     value["amount"]
///         .as_i64()
///         .ok_or_else(|| HandlerError::permanent("the payload has no integer amount"))
/// }
/// assert_eq!(amount(br#"{"amount": 5}"#).unwrap(), 5);
/// assert!(!amount(b"not json").unwrap_err().is_permanent());
/// assert!(amount(br#"{"amount": "5"}"#).unwrap_err().is_permanent());
/// ```
///
/// It does not implement `std::error::Error` itself: if it did, the blanket `From` above would
/// overlap with the standard `impl<T> From<T> for T` (the reason `anyhow::Error` does not either).
/// [`get_ref`](Self::get_ref) and [`into_inner`](Self::into_inner) give the error inside; the
/// runner turns it into an [`Error`] (`From<HandlerError> for Error`).
pub struct HandlerError {
    error: BoxError,
    permanent: bool,
}

impl HandlerError {
    /// A retryable handler error from `error`: an error value, a `String` or a `&str`. The same
    /// as `?` or `.into()` on an error type; this also takes messages and boxed errors.
    pub fn retryable(error: impl Into<BoxError>) -> Self {
        Self {
            error: error.into(),
            permanent: false,
        }
    }

    /// A permanent handler error from `error` (an error value, a `String` or a `&str`): the same
    /// event fails the same way on every delivery, so retrying it cannot help.
    /// `.map_err(HandlerError::permanent)?` marks a conversion's error permanent.
    pub fn permanent(error: impl Into<BoxError>) -> Self {
        Self {
            error: error.into(),
            permanent: true,
        }
    }

    /// Whether the error was marked permanent.
    pub fn is_permanent(&self) -> bool {
        self.permanent
    }

    /// The error inside.
    pub fn get_ref(&self) -> &(dyn StdError + Send + Sync + 'static) {
        &*self.error
    }

    /// The error inside, boxed.
    pub fn into_inner(self) -> BoxError {
        self.error
    }
}

impl<E> From<E> for HandlerError
where
    E: StdError + Send + Sync + 'static,
{
    fn from(error: E) -> Self {
        Self::retryable(error)
    }
}

impl fmt::Debug for HandlerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HandlerError")
            .field("error", &self.error)
            .field("permanent", &self.permanent)
            .finish()
    }
}

impl fmt::Display for HandlerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.error, f)
    }
}

/// What a run returns for a handler's error. A permanent one is [`Error::Permanent`]. A
/// retryable one that is one of idem's own errors (from `enqueue`, say) or a `sqlx::Error` keeps
/// its own variant and kind, so that a conflict inside the handler is still retried by the
/// runner; any other is [`Error::Handler`].
impl From<HandlerError> for Error {
    fn from(e: HandlerError) -> Self {
        if e.permanent {
            return Self::Permanent(e.error);
        }
        let error = match e.error.downcast::<Error>() {
            Ok(idem) => return *idem,
            Err(other) => other,
        };
        match error.downcast::<sqlx::Error>() {
            Ok(database) => Self::Database(*database),
            Err(other) => Self::Handler(other),
        }
    }
}

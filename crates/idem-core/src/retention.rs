//! Retention of inbox keys and the redelivery horizons they must cover (docs/design.md C9).

use std::time::Duration;

use crate::Error;

const DAY: Duration = Duration::from_secs(24 * 3600);

/// How long a sender may deliver an event again after the first delivery.
pub mod horizon {
    use super::{DAY, Duration};

    /// Stripe retries failed webhook deliveries for up to 3 days (Stripe docs, "Retry behavior").
    pub const STRIPE: Duration = Duration::from_secs(3 * DAY.as_secs());
    /// GitHub lets a delivery be redelivered for 3 days (GitHub docs, "Redelivering webhooks").
    pub const GITHUB: Duration = Duration::from_secs(3 * DAY.as_secs());
    /// Shopify retries failed deliveries 8 times over 4 hours (Shopify docs, "Webhooks: retry").
    pub const SHOPIFY: Duration = Duration::from_secs(4 * 3600);
    /// Standard Webhooks' schedule ends about 3 days after the first attempt (the specification's
    /// example schedule; senders may differ).
    pub const STANDARD_WEBHOOKS: Duration = Duration::from_secs(3 * DAY.as_secs());
}

/// How long processed inbox keys are kept, checked against a redelivery horizon.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetentionPolicy {
    keep: Duration,
}

impl RetentionPolicy {
    /// Keeps keys for `keep`, which must cover `redelivery_horizon` (the longest time after which
    /// the sender, or an operator's replay, may deliver an event again).
    ///
    /// # Errors
    /// [`Error::RetentionTooShort`], naming both durations, when `keep < redelivery_horizon`.
    pub fn new(keep: Duration, redelivery_horizon: Duration) -> Result<Self, Error> {
        if keep < redelivery_horizon {
            return Err(Error::RetentionTooShort {
                retention: keep,
                horizon: redelivery_horizon,
            });
        }
        Ok(Self { keep })
    }

    /// How long keys are kept.
    pub fn keep(&self) -> Duration {
        self.keep
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retention_shorter_than_the_horizon_is_refused_naming_both() {
        let err = RetentionPolicy::new(DAY, horizon::STRIPE).unwrap_err();
        assert_eq!(
            err,
            Error::RetentionTooShort {
                retention: DAY,
                horizon: horizon::STRIPE
            }
        );
        let text = err.to_string();
        assert!(
            text.contains("86400 s") && text.contains("259200 s"),
            "{text}"
        );
        assert_eq!(
            RetentionPolicy::new(30 * DAY, horizon::STRIPE)
                .unwrap()
                .keep(),
            30 * DAY
        );
    }
}

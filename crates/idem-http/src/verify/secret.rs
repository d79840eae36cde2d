//! Checks every configured secret shares: present, non-empty, no stray whitespace.

use super::ConfigError;
use super::hmac_key::HmacKey;

/// What a scheme calls its secrets, for [`ConfigError`] messages.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SecretShape {
    /// The scheme, such as "Stripe".
    pub(crate) scheme: &'static str,
    /// What a good secret looks like.
    pub(crate) expected: &'static str,
}

impl SecretShape {
    /// `secret` unless it is empty or starts or ends with whitespace.
    pub(crate) fn check<'s>(&self, secret: &'s str) -> Result<&'s str, ConfigError> {
        if secret.is_empty() {
            return Err(ConfigError::EmptySecret {
                scheme: self.scheme,
                expected: self.expected,
            });
        }
        if secret.trim() != secret {
            return Err(ConfigError::SecretWhitespace {
                scheme: self.scheme,
                expected: self.expected,
            });
        }
        Ok(secret)
    }

    /// Each of `secrets` checked by `parse`; [`ConfigError::NoSecrets`] when there are none.
    pub(crate) fn all<I, T>(
        &self,
        secrets: I,
        mut parse: impl FnMut(&str) -> Result<T, ConfigError>,
    ) -> Result<Vec<T>, ConfigError>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let parsed = secrets
            .into_iter()
            .map(|secret| parse(self.check(secret.as_ref())?))
            .collect::<Result<Vec<_>, _>>()?;
        if parsed.is_empty() {
            return Err(ConfigError::NoSecrets {
                scheme: self.scheme,
                expected: self.expected,
            });
        }
        Ok(parsed)
    }

    /// HMAC keys made from the bytes of each secret, as GitHub, Shopify and generic HMAC use them.
    pub(crate) fn hmac_keys<I>(&self, secrets: I) -> Result<Vec<HmacKey>, ConfigError>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        self.all(secrets, |secret| Ok(HmacKey::new(secret.as_bytes())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHAPE: SecretShape = SecretShape {
        scheme: "Test",
        expected: "a test secret",
    };

    #[test]
    fn refuses_empty_blank_padded_and_missing_secrets() {
        assert_eq!(
            SHAPE
                .hmac_keys(Vec::<String>::new())
                .unwrap_err()
                .to_string(),
            "no Test secret configured; expected a test secret"
        );
        assert!(matches!(
            SHAPE.hmac_keys([""]),
            Err(ConfigError::EmptySecret { .. })
        ));
        for padded in ["secret\n", " secret", "\tsecret", " "] {
            assert!(
                matches!(
                    SHAPE.hmac_keys([padded]),
                    Err(ConfigError::SecretWhitespace { .. })
                ),
                "{padded:?}"
            );
        }
        assert!(matches!(
            SHAPE.hmac_keys(["good", ""]),
            Err(ConfigError::EmptySecret { .. })
        ));
        assert_eq!(SHAPE.hmac_keys(["a", "b"]).map(|keys| keys.len()), Ok(2));
    }
}

//! The request headers an event is forwarded with (its `Content-Type` and the headers its fields
//! were read from, such as `X-GitHub-Event`): kept with the event as JSON, written at ingest and
//! read back by every attempt. One type writes and reads it, and it refuses what it cannot
//! carry, so no header is ever dropped without a word.

use http::{HeaderMap, HeaderName, HeaderValue};

/// Header names and values, each value visible ASCII text (what HTTP carries as text and JSON
/// can hold).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ForwardedHeaders(Vec<(HeaderName, HeaderValue)>);

/// Why headers cannot be forwarded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ForwardedError {
    /// A request header to forward holds bytes that are not visible ASCII.
    #[error("header `{0}` holds bytes that are not visible ASCII, which cannot be forwarded")]
    NotText(HeaderName),
    /// The stored JSON is not a list of `[name, value]` pairs of valid header names and values.
    #[error("the stored headers cannot be read ({0}); expected a JSON list of [name, value] pairs")]
    Unreadable(String),
}

impl ForwardedHeaders {
    /// The first value of each header in `names` that `headers` holds, in that order.
    ///
    /// # Errors
    /// [`ForwardedError::NotText`] when one of those values is not visible ASCII.
    pub(crate) fn collect<'a>(
        headers: &HeaderMap,
        names: impl IntoIterator<Item = &'a HeaderName>,
    ) -> Result<Self, ForwardedError> {
        let mut kept = Vec::new();
        for name in names {
            let Some(value) = headers.get(name) else {
                continue;
            };
            if value.to_str().is_err() {
                return Err(ForwardedError::NotText(name.clone()));
            }
            kept.push((name.clone(), value.clone()));
        }
        Ok(Self(kept))
    }

    /// Each header's name and value, in order.
    pub(crate) fn pairs(&self) -> impl Iterator<Item = (&str, &str)> {
        // `collect` and `from_json` keep only values that are text.
        self.0
            .iter()
            .map(|(name, value)| (name.as_str(), value.to_str().unwrap_or_default()))
    }

    /// The headers as stored: a JSON list of `[name, value]` pairs.
    pub(crate) fn to_json(&self) -> String {
        let pairs = self.0.iter().map(|(name, value)| {
            // `collect` and `from_json` keep only values that are text.
            serde_json::json!([name.as_str(), value.to_str().unwrap_or_default()])
        });
        serde_json::Value::Array(pairs.collect()).to_string()
    }

    /// The headers stored as `text` by [`to_json`](Self::to_json).
    ///
    /// # Errors
    /// [`ForwardedError::Unreadable`] when `text` is not such a list, or a name or value in it
    /// is not a valid header name or visible ASCII text.
    pub(crate) fn from_json(text: &str) -> Result<Self, ForwardedError> {
        let unreadable = |detail: String| ForwardedError::Unreadable(detail);
        let pairs: Vec<(String, String)> =
            serde_json::from_str(text).map_err(|e| unreadable(e.to_string()))?;
        let mut kept = Vec::with_capacity(pairs.len());
        for (name, value) in pairs {
            let header = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| unreadable(format!("{name:?} is not a header name")))?;
            let value = HeaderValue::from_str(&value)
                .ok()
                .filter(|v| v.to_str().is_ok())
                .ok_or_else(|| unreadable(format!("the value of {name:?} is not visible ASCII")))?;
            kept.push((header, value));
        }
        Ok(Self(kept))
    }

    /// The headers, in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &(HeaderName, HeaderValue)> {
        self.0.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_read_back_as_they_were_written() {
        let mut headers = HeaderMap::new();
        headers.insert("content-type", HeaderValue::from_static("application/json"));
        headers.insert("x-github-event", HeaderValue::from_static("push"));
        headers.insert("x-other", HeaderValue::from_static("not forwarded"));
        let names = [
            HeaderName::from_static("content-type"),
            HeaderName::from_static("x-github-event"),
            HeaderName::from_static("x-missing"),
        ];
        let kept = ForwardedHeaders::collect(&headers, &names).unwrap();
        let json = kept.to_json();
        assert_eq!(
            json,
            r#"[["content-type","application/json"],["x-github-event","push"]]"#
        );
        assert_eq!(ForwardedHeaders::from_json(&json).unwrap(), kept);
        assert_eq!(
            ForwardedHeaders::from_json("[]").unwrap(),
            ForwardedHeaders::default()
        );
    }

    #[test]
    fn what_cannot_be_carried_is_refused() {
        let mut headers = HeaderMap::new();
        headers.insert(
            "content-type",
            HeaderValue::from_bytes(b"text/plain; charset=\xe9").unwrap(),
        );
        let name = HeaderName::from_static("content-type");
        assert_eq!(
            ForwardedHeaders::collect(&headers, [&name]),
            Err(ForwardedError::NotText(name.clone()))
        );
        for bad in [
            "",
            "{}",
            r#"[["content-type"]]"#,
            r#"[["bad name", "x"]]"#,
            r#"[["x-a", "line\nbreak"]]"#,
            r#"[["x-a", "caf\u00e9"]]"#,
        ] {
            assert!(
                matches!(
                    ForwardedHeaders::from_json(bad),
                    Err(ForwardedError::Unreadable(_))
                ),
                "{bad:?}"
            );
        }
    }
}

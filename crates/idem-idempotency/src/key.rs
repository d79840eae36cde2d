//! The `Idempotency-Key` request header: parsing, and the principal that scopes a key.

use std::fmt;

use http::HeaderMap;
use http::header::HeaderName;

/// The header's name, `Idempotency-Key` (draft-ietf-httpapi-idempotency-key-header-06 §2).
pub const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");

/// The longest key accepted, in bytes after unquoting: 255, as Stripe documents for its keys and
/// as idem's lease key column holds. A longer key is refused with a 400, never truncated.
pub const MAX_KEY_BYTES: usize = idem_core::MAX_ID_BYTES;

/// The longest principal accepted, in bytes: 200. A principal is stored behind a short namespace
/// in the SQL store's scope column, which holds 255 bytes.
pub const MAX_PRINCIPAL_BYTES: usize = 200;

/// A client-supplied idempotency key: 1 to [`MAX_KEY_BYTES`] bytes of visible ASCII (spaces
/// allowed inside), not blank. Compared exactly, byte for byte; the quoted form `"k1"` and the
/// bare form `k1` are the same key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IdempotencyKey(String);

/// Why an `Idempotency-Key` header was refused. Each is answered with a 400 (see
/// [`Rejection`](crate::Rejection)).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// The header appeared more than once. RFC 8941 §4.2 joins repeated lines with commas, which
    /// no single String item contains, so a repeated header is ambiguous.
    #[error("the Idempotency-Key header appears {count} times; send it once")]
    Repeated {
        /// How many times it appeared.
        count: usize,
    },
    /// The value holds a byte outside visible ASCII and space (a control character or non-ASCII
    /// byte; RFC 8941 §3.3.3 allows neither in a String). A tab is allowed only around the
    /// value, never inside the key.
    #[error(
        "the Idempotency-Key holds byte 0x{byte:02x} at offset {offset}; only visible ASCII and spaces are allowed"
    )]
    InvalidByte {
        /// The byte.
        byte: u8,
        /// Its offset in the header value, from 0.
        offset: usize,
    },
    /// A value starting with `"` is not a well-formed RFC 8941 sf-string (§3.3.3): a missing
    /// closing quote, an escape other than `\"` or `\\`, or text after the closing quote.
    #[error(
        "the Idempotency-Key is not a valid structured-field string (RFC 8941 §3.3.3): {reason}"
    )]
    MalformedString {
        /// What is wrong.
        reason: &'static str,
    },
    /// The key is longer than [`MAX_KEY_BYTES`].
    #[error("the Idempotency-Key is {len} bytes long; at most {max} are allowed")]
    TooLong {
        /// Its length in bytes (after unquoting).
        len: usize,
        /// [`MAX_KEY_BYTES`].
        max: usize,
    },
}

impl IdempotencyKey {
    /// Reads the key from request headers.
    ///
    /// Accepts an RFC 8941 sf-string (`"8e03978e-40d5-43e8-bc93-6894a57f9324"`, the form the
    /// draft specifies in §2.1) or a bare value (`8e03978e-…`, as Stripe's clients and idem's own
    /// gateway send it). Surrounding spaces and tabs are ignored.
    ///
    /// Returns `Ok(None)` when the header is absent, empty, blank, or a quoted empty or blank
    /// string (`""`, `"   "`): a blank key is a missing key (docs/design.md C8).
    ///
    /// # Errors
    /// [`KeyError`]: the header is repeated, holds a control or non-ASCII byte, is a malformed
    /// sf-string, or is longer than [`MAX_KEY_BYTES`] once unquoted.
    pub fn from_headers(headers: &HeaderMap) -> Result<Option<Self>, KeyError> {
        let mut values = headers.get_all(&IDEMPOTENCY_KEY).iter();
        let Some(value) = values.next() else {
            return Ok(None);
        };
        let count = 1 + values.count();
        if count > 1 {
            return Err(KeyError::Repeated { count });
        }
        Self::parse(value.as_bytes())
    }

    /// Parses one header value, as [`from_headers`](Self::from_headers) does.
    ///
    /// # Errors
    /// As [`from_headers`](Self::from_headers), but for [`KeyError::Repeated`].
    pub fn parse(value: &[u8]) -> Result<Option<Self>, KeyError> {
        if let Some((offset, &byte)) = value
            .iter()
            .enumerate()
            .find(|&(_, &b)| !(b == b' ' || b == b'\t' || b.is_ascii_graphic()))
        {
            return Err(KeyError::InvalidByte { byte, offset });
        }
        let trimmed = value.trim_ascii();
        let key = match trimmed.first() {
            Some(b'"') => unquote(trimmed)?,
            _ => {
                // A tab is whitespace around the value (RFC 9110 §5.6.3) but no part of a key:
                // the quoted form of such a key would be refused, so the bare form is too.
                let start = value.len() - value.trim_ascii_start().len();
                if let Some(at) = trimmed.iter().position(|&b| b == b'\t') {
                    return Err(KeyError::InvalidByte {
                        byte: b'\t',
                        offset: start + at,
                    });
                }
                // Only visible ASCII and spaces remain: valid UTF-8.
                String::from_utf8_lossy(trimmed).into_owned()
            }
        };
        if key.trim_matches([' ', '\t']).is_empty() {
            return Ok(None);
        }
        if key.len() > MAX_KEY_BYTES {
            return Err(KeyError::TooLong {
                len: key.len(),
                max: MAX_KEY_BYTES,
            });
        }
        Ok(Some(Self(key)))
    }

    /// The key.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for IdempotencyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// RFC 8941 §4.2.5 "Parsing a String", on input known to start with `"` and to hold only
/// visible ASCII and spaces. Parameters after the string are refused: the draft defines none.
fn unquote(input: &[u8]) -> Result<String, KeyError> {
    let mut out = String::with_capacity(input.len());
    let mut rest = input[1..].iter();
    while let Some(&c) = rest.next() {
        match c {
            b'\\' => match rest.next() {
                Some(&e @ (b'"' | b'\\')) => out.push(char::from(e)),
                Some(_) => {
                    return Err(KeyError::MalformedString {
                        reason: "only \\\" and \\\\ may be escaped",
                    });
                }
                None => {
                    return Err(KeyError::MalformedString {
                        reason: "the string ends inside an escape",
                    });
                }
            },
            b'"' => {
                return if rest.as_slice().is_empty() {
                    Ok(out)
                } else {
                    Err(KeyError::MalformedString {
                        reason: "text follows the closing quote",
                    })
                };
            }
            // A tab is not allowed inside an sf-string (§3.3.3: %x20-21 / %x23-5B / %x5D-7E).
            b'\t' => {
                return Err(KeyError::MalformedString {
                    reason: "a tab is not allowed inside the string",
                });
            }
            c => out.push(char::from(c)),
        }
    }
    Err(KeyError::MalformedString {
        reason: "the closing quote is missing",
    })
}

/// Who a key belongs to: the authenticated user, API key or tenant. Keys are scoped by
/// principal (docs/design.md C8): two principals sending the same key never see each other's records.
///
/// The application's authentication layer inserts it as a request extension, where the layer's
/// default scope function finds it (see
/// [`IdempotencyLayer::scope`](crate::IdempotencyLayer::scope)).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Principal(String);

/// Why a principal was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PrincipalError {
    /// Empty or whitespace only: it would put unrelated callers in one shared bucket.
    #[error("a principal must not be blank")]
    Blank,
    /// Longer than [`MAX_PRINCIPAL_BYTES`].
    #[error("a principal is at most {max} bytes; this one is {len}")]
    TooLong {
        /// Its length in bytes.
        len: usize,
        /// [`MAX_PRINCIPAL_BYTES`].
        max: usize,
    },
}

impl Principal {
    /// A principal: any text that is not blank and at most [`MAX_PRINCIPAL_BYTES`] bytes, kept
    /// byte for byte.
    ///
    /// # Errors
    /// [`PrincipalError::Blank`] or [`PrincipalError::TooLong`].
    pub fn new(id: impl Into<String>) -> Result<Self, PrincipalError> {
        let id = id.into();
        if id.trim().is_empty() {
            return Err(PrincipalError::Blank);
        }
        if id.len() > MAX_PRINCIPAL_BYTES {
            return Err(PrincipalError::TooLong {
                len: id.len(),
                max: MAX_PRINCIPAL_BYTES,
            });
        }
        Ok(Self(id))
    }

    /// The principal's id.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(v: &str) -> Result<Option<String>, KeyError> {
        IdempotencyKey::parse(v.as_bytes()).map(|k| k.map(|k| k.0))
    }

    #[test]
    fn quoted_and_bare_forms_are_the_same_key() {
        assert_eq!(key("\"k1\""), Ok(Some("k1".into())));
        assert_eq!(key("k1"), Ok(Some("k1".into())));
        assert_eq!(key("  k1\t"), Ok(Some("k1".into())));
        assert_eq!(key(r#""a\"b\\c""#), Ok(Some(r#"a"b\c"#.into())));
        assert_eq!(key("\" k 1 \""), Ok(Some(" k 1 ".into())));
    }

    #[test]
    fn blank_keys_are_missing_keys() {
        for blank in ["", "   ", "\t", "\"\"", "\"   \"", "  \"\"  "] {
            assert_eq!(key(blank), Ok(None), "{blank:?}");
        }
    }

    #[test]
    fn malformed_values_are_refused() {
        assert!(matches!(
            key("\"abc"),
            Err(KeyError::MalformedString { .. })
        ));
        assert!(matches!(
            key("\"a\\nb\""),
            Err(KeyError::MalformedString { .. })
        ));
        assert!(matches!(
            key("\"abc\";p=1"),
            Err(KeyError::MalformedString { .. })
        ));
        assert!(matches!(
            key("\"abc\\"),
            Err(KeyError::MalformedString { .. })
        ));
        assert_eq!(
            IdempotencyKey::parse(b"k\xc3\xa9"),
            Err(KeyError::InvalidByte {
                byte: 0xc3,
                offset: 1
            })
        );
        // Found by fuzzing (fuzz/fuzz_targets/idempotency_key.rs): a tab inside a bare key was
        // kept, although the quoted form of that key is refused and keys are visible ASCII and
        // spaces only.
        assert_eq!(
            IdempotencyKey::parse(b"0\t0R"),
            Err(KeyError::InvalidByte {
                byte: b'\t',
                offset: 1
            })
        );
        assert_eq!(
            IdempotencyKey::parse(b" \tk 1\tx\t"),
            Err(KeyError::InvalidByte {
                byte: b'\t',
                offset: 5
            })
        );
        assert_eq!(
            IdempotencyKey::parse(b"k\x01"),
            Err(KeyError::InvalidByte {
                byte: 0x01,
                offset: 1
            })
        );
    }

    #[test]
    fn length_is_limited_after_unquoting() {
        let max = "k".repeat(MAX_KEY_BYTES);
        assert_eq!(key(&format!("\"{max}\"")), Ok(Some(max.clone())));
        assert_eq!(
            key(&format!("{max}k")),
            Err(KeyError::TooLong {
                len: MAX_KEY_BYTES + 1,
                max: MAX_KEY_BYTES
            })
        );
    }

    #[test]
    fn repeated_header_is_refused() {
        let mut headers = HeaderMap::new();
        headers.append(&IDEMPOTENCY_KEY, "a".parse().unwrap());
        headers.append(&IDEMPOTENCY_KEY, "a".parse().unwrap());
        assert_eq!(
            IdempotencyKey::from_headers(&headers),
            Err(KeyError::Repeated { count: 2 })
        );
        assert_eq!(IdempotencyKey::from_headers(&HeaderMap::new()), Ok(None));
    }

    #[test]
    fn principals_are_never_blank() {
        assert_eq!(Principal::new(" "), Err(PrincipalError::Blank));
        assert!(matches!(
            Principal::new("p".repeat(MAX_PRINCIPAL_BYTES + 1)),
            Err(PrincipalError::TooLong { .. })
        ));
        assert_eq!(Principal::new("alice").unwrap().as_str(), "alice");
    }
}

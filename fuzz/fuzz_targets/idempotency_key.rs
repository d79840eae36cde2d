//! `IdempotencyKey::parse`, the `Idempotency-Key` header parser, on any bytes. Properties
//! (crates/idem-idempotency/src/key.rs, RFC 8941 §3.3.3 and §4.2.5):
//! - whatever the bytes, it returns;
//! - a key is 1 to 255 bytes of visible ASCII and spaces, not blank;
//! - the quoted form and the bare form are the same key: a key written as an sf-string (`\"`
//!   and `\\` escaped) parses back to itself, and so does its bare form when that is not mistaken
//!   for another (it does not start with `"` nor start or end with a space); surrounding spaces
//!   and tabs are ignored;
//! - `Ok(None)` only for a blank value or a quoted blank string;
//! - `InvalidByte` names the first byte outside visible ASCII, space and tab, at its offset, or
//!   else the first tab inside a bare key (tabs may only surround the value); `TooLong` a length
//!   over 255;
//! - `from_headers` with the value once reads the same as `parse`, and refuses it twice.

#![no_main]

use idem_http::http::{HeaderMap, HeaderValue};
use idem_idempotency::key::KeyError;
use idem_idempotency::{IDEMPOTENCY_KEY, IdempotencyKey, MAX_KEY_BYTES};
use libfuzzer_sys::fuzz_target;

/// A byte the header may hold: visible ASCII, space or tab.
fn allowed(byte: u8) -> bool {
    byte.is_ascii_graphic() || byte == b' ' || byte == b'\t'
}

fn parse(value: &[u8]) -> Option<String> {
    IdempotencyKey::parse(value)
        .expect("a well-formed key")
        .map(|key| key.as_str().to_owned())
}

/// `key` as an RFC 8941 sf-string.
fn quoted(key: &str) -> String {
    let mut out = String::from('"');
    for c in key.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

fuzz_target!(|data: &[u8]| {
    let parsed = IdempotencyKey::parse(data);
    match &parsed {
        Ok(Some(key)) => {
            let key = key.as_str();
            assert!(!key.is_empty() && key.len() <= MAX_KEY_BYTES, "{key:?}");
            assert!(
                key.bytes().all(|b| b.is_ascii_graphic() || b == b' '),
                "a key of more than visible ASCII and spaces: {key:?}"
            );
            assert!(!key.trim_matches(' ').is_empty(), "a blank key: {key:?}");
            assert_eq!(parse(quoted(key).as_bytes()).as_deref(), Some(key));
            assert_eq!(
                parse(format!(" \t{}\t ", quoted(key)).as_bytes()).as_deref(),
                Some(key)
            );
            if !key.starts_with('"') && !key.starts_with(' ') && !key.ends_with(' ') {
                assert_eq!(parse(key.as_bytes()).as_deref(), Some(key));
            }
        }
        Ok(None) => {
            let trimmed = data.trim_ascii();
            let inner = match trimmed {
                [b'"', inner @ .., b'"'] => inner,
                _ => trimmed,
            };
            assert!(
                inner.iter().all(|&b| b == b' ' || b == b'\t'),
                "a key that is not blank read as none: {data:?}"
            );
        }
        Err(KeyError::InvalidByte { byte, offset }) if !allowed(*byte) => {
            assert_eq!(data.get(*offset), Some(byte));
            assert!(data[..*offset].iter().all(|&b| allowed(b)));
        }
        Err(KeyError::InvalidByte {
            byte: b'\t',
            offset,
        }) => {
            let start = data.len() - data.trim_ascii_start().len();
            let end = start + data.trim_ascii().len();
            assert!(start < *offset && *offset < end && data[start] != b'"');
            assert_eq!(data[*offset], b'\t');
            assert!(!data[start..*offset].contains(&b'\t'));
        }
        Err(KeyError::TooLong { len, max }) => {
            assert!(*len > MAX_KEY_BYTES && *max == MAX_KEY_BYTES);
            assert!(data.len() >= *len);
        }
        Err(error) => assert!(!error.to_string().is_empty()),
    }
    let refused_byte = matches!(parsed, Err(KeyError::InvalidByte { byte, .. }) if !allowed(byte));
    assert_eq!(refused_byte, !data.iter().all(|&b| allowed(b)));

    if let Ok(value) = HeaderValue::from_bytes(data) {
        let mut headers = HeaderMap::new();
        headers.append(&IDEMPOTENCY_KEY, value.clone());
        assert_eq!(IdempotencyKey::from_headers(&headers), parsed);
        headers.append(&IDEMPOTENCY_KEY, value);
        assert_eq!(
            IdempotencyKey::from_headers(&headers),
            Err(KeyError::Repeated { count: 2 })
        );
    }
});

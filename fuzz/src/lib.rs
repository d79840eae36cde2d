//! What the fuzz targets share: reading a fuzz input as an HTTP delivery, the receiver's fixed
//! clock, and oracles written independently of the code under test (an HMAC-SHA256 of its own,
//! plain header lookups), so a target can say what a correct answer is.
//!
//! A delivery input reads like an HTTP message without its request line: `Name: value` lines,
//! an empty line, then the body, byte for byte. Seed files in `corpus/` are written that way, so
//! a real payload and its headers can be read and edited in a text editor.

use hmac::{Hmac, KeyInit, Mac};
use idem_core::Timestamp;
use idem_http::http::{HeaderMap, HeaderName, HeaderValue};
use sha2::Sha256;

/// The receiver's clock in every target: 2023-11-14T22:13:20Z, in Unix seconds. The seed
/// corpora are signed at this time.
pub const NOW_SECS: i64 = 1_700_000_000;

/// [`NOW_SECS`] as the verifiers take it, in milliseconds since the Unix epoch.
pub const NOW: Timestamp = Timestamp(NOW_SECS * 1000);

/// The tolerance the verifiers document for signed timestamps (`DEFAULT_TOLERANCE`), in seconds.
pub const TOLERANCE_SECS: i64 = 300;

/// The headers and body of a delivery input.
///
/// The headers are the lines before the first empty line (`\n\n` or `\r\n\r\n`), each
/// `Name: value` with optional spaces after the colon; a line that is no valid header (no colon,
/// a name or value HTTP forbids) is skipped, and a name given twice is appended, so a target can
/// see a repeated header. Without an empty line the whole input is the body and there are no
/// headers.
pub fn delivery(data: &[u8]) -> (HeaderMap, &[u8]) {
    let mut headers = HeaderMap::new();
    let Some(end) = data.windows(2).position(|w| w == b"\n\n") else {
        return (headers, data);
    };
    for line in data[..end].split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let value = line[colon + 1..].trim_ascii_start();
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(&line[..colon]),
            HeaderValue::from_bytes(value),
        ) {
            headers.append(name, value);
        }
    }
    let body = &data[end + 2..];
    (headers, body)
}

/// `headers` with `name` set to `value` alone (every earlier value removed).
pub fn with_header(headers: &HeaderMap, name: &str, value: &str) -> HeaderMap {
    let mut headers = headers.clone();
    let value = HeaderValue::from_str(value).expect("signatures are visible ASCII");
    headers.insert(
        HeaderName::from_bytes(name.as_bytes()).expect("a valid header name"),
        value,
    );
    headers
}

/// The one value of header `name` as text, as every verifier documents reading it: `None` when
/// it is absent, repeated, or not visible ASCII.
pub fn single<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    let mut values = headers.get_all(name).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    value.to_str().ok()
}

/// HMAC-SHA256 (RFC 2104) of the concatenation of `parts` under `key`, computed here rather than
/// with idem-http's own code.
pub fn hmac_sha256(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes keys of any length");
    for part in parts {
        mac.update(part);
    }
    mac.finalize().into_bytes().into()
}

/// Whether a signed timestamp `text` is plain decimal Unix seconds within the tolerance of
/// [`NOW_SECS`], as the Stripe and Standard Webhooks verifiers document.
pub fn fresh(text: &str) -> bool {
    !text.is_empty()
        && text.bytes().all(|b| b.is_ascii_digit())
        && text
            .parse::<i64>()
            .is_ok_and(|t| t.abs_diff(NOW_SECS) <= TOLERANCE_SECS.unsigned_abs())
}

/// `body` changed in one byte, chosen by the body itself: a delivery whose signature was made
/// for `body` must not verify with it. An empty body becomes one byte.
pub fn tampered(body: &[u8]) -> Vec<u8> {
    let mut changed = body.to_vec();
    match changed.len() {
        0 => changed.push(b'x'),
        len => {
            let at = usize::from(body[0]) % len;
            changed[at] ^= 0x01;
        }
    }
    changed
}

/// Checks what the verifiers promise of every error: a stable reason label, and a message that
/// shows none of `secrets` and none of the `signatures` computed for the delivery.
pub fn check_error(error: &idem_http::verify::VerifyError, secrets: &[&str], signatures: &[&str]) {
    let message = error.to_string();
    assert!(!error.reason().is_empty());
    for secret in secrets.iter().chain(signatures) {
        assert!(
            !message.contains(secret),
            "the error message shows a secret or a computed signature: {message}"
        );
    }
}

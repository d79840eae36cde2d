//! The stored response and its byte format.

use axum_core::body::Body;
use bytes::Bytes;
use http::header::{HeaderName, HeaderValue};
use http::{Response, StatusCode};

/// The header on replayed responses: `Idempotent-Replayed: true`.
pub const IDEMPOTENT_REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");

/// The response a completed request stored, replayed to every retry with its key: the status,
/// the headers chosen by [`IdempotencyLayer::replay_headers`](crate::IdempotencyLayer::replay_headers),
/// and the body.
///
/// # Byte format (version 1)
///
/// Stores keep it as bytes ([`encode`](Self::encode)); all integers are big-endian:
///
/// | bytes | holds |
/// |---|---|
/// | 4 | the magic `IDR1` |
/// | 2 | the status code |
/// | 2 | the number of headers, *n* |
/// | *n* × (2 + name + 4 + value) | each header: name length, name (lowercase), value length, value |
/// | 8 + body | the body's length, then the body |
///
/// Nothing may follow the body. A reader meeting another magic refuses the record rather than
/// guess.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredResponse {
    status: StatusCode,
    headers: Vec<(HeaderName, HeaderValue)>,
    body: Bytes,
}

/// A stored record that is not a version-1 [`StoredResponse`]: written by another program or
/// damaged. The layer answers 500 (`idempotency-record-unreadable`) and changes nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the stored idempotency record is unreadable: {0}")]
pub struct RecordError(&'static str);

const MAGIC: &[u8; 4] = b"IDR1";

impl StoredResponse {
    /// A stored response.
    pub fn new(status: StatusCode, headers: Vec<(HeaderName, HeaderValue)>, body: Bytes) -> Self {
        Self {
            status,
            headers,
            body,
        }
    }

    /// The status code.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The stored headers, in the order they were stored.
    pub fn headers(&self) -> &[(HeaderName, HeaderValue)] {
        &self.headers
    }

    /// The body.
    pub fn body(&self) -> &Bytes {
        &self.body
    }

    /// The record's bytes, in the format above.
    pub fn encode(&self) -> Vec<u8> {
        let headers_len: usize = self
            .headers
            .iter()
            .map(|(n, v)| 6 + n.as_str().len() + v.len())
            .sum();
        let mut out = Vec::with_capacity(16 + headers_len + self.body.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&self.status.as_u16().to_be_bytes());
        // Header names and values are bounded by the HTTP layer far below these limits; the
        // layer never stores more than u16::MAX headers (it stores a chosen few).
        let count = u16::try_from(self.headers.len()).unwrap_or(u16::MAX);
        out.extend_from_slice(&count.to_be_bytes());
        for (name, value) in self.headers.iter().take(usize::from(count)) {
            let name = name.as_str().as_bytes();
            out.extend_from_slice(&(name.len() as u16).to_be_bytes());
            out.extend_from_slice(name);
            out.extend_from_slice(&(value.len() as u32).to_be_bytes());
            out.extend_from_slice(value.as_bytes());
        }
        out.extend_from_slice(&(self.body.len() as u64).to_be_bytes());
        out.extend_from_slice(&self.body);
        out
    }

    /// Reads a record written by [`encode`](Self::encode).
    ///
    /// # Errors
    /// [`RecordError`] when the bytes are not a complete version-1 record (wrong magic, a
    /// length past the end, an invalid status, header name or value, or trailing bytes).
    pub fn decode(bytes: &[u8]) -> Result<Self, RecordError> {
        let mut r = Reader(bytes);
        if r.take(4)? != MAGIC {
            return Err(RecordError("unknown format (no IDR1 magic)"));
        }
        let status =
            StatusCode::from_u16(r.u16()?).map_err(|_| RecordError("status code out of range"))?;
        let count = r.u16()?;
        let mut headers = Vec::with_capacity(usize::from(count));
        for _ in 0..count {
            let len = usize::from(r.u16()?);
            let name = HeaderName::from_bytes(r.take(len)?)
                .map_err(|_| RecordError("invalid header name"))?;
            let len = usize::try_from(r.u32()?).map_err(|_| RecordError("length overflow"))?;
            let value = HeaderValue::from_bytes(r.take(len)?)
                .map_err(|_| RecordError("invalid header value"))?;
            headers.push((name, value));
        }
        let len = usize::try_from(r.u64()?).map_err(|_| RecordError("length overflow"))?;
        let body = Bytes::copy_from_slice(r.take(len)?);
        if !r.0.is_empty() {
            return Err(RecordError("bytes after the body"));
        }
        Ok(Self {
            status,
            headers,
            body,
        })
    }

    /// The response to send: status, headers and body as stored.
    pub(crate) fn to_response(&self) -> Response<Body> {
        let mut response = Response::new(Body::from(self.body.clone()));
        *response.status_mut() = self.status;
        let headers = response.headers_mut();
        for (name, value) in &self.headers {
            headers.append(name.clone(), value.clone());
        }
        response
    }
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], RecordError> {
        if n > self.0.len() {
            return Err(RecordError("truncated"));
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], RecordError> {
        let mut out = [0; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn u16(&mut self) -> Result<u16, RecordError> {
        self.array().map(u16::from_be_bytes)
    }

    fn u32(&mut self) -> Result<u32, RecordError> {
        self.array().map(u32::from_be_bytes)
    }

    fn u64(&mut self) -> Result<u64, RecordError> {
        self.array().map(u64::from_be_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_every_truncation_is_an_error() {
        let record = StoredResponse::new(
            StatusCode::CREATED,
            vec![
                (
                    http::header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                ),
                (
                    http::header::LOCATION,
                    HeaderValue::from_static("/payments/p1"),
                ),
            ],
            Bytes::from_static(br#"{"id":"p1"}"#),
        );
        let bytes = record.encode();
        assert_eq!(StoredResponse::decode(&bytes), Ok(record));
        for n in 0..bytes.len() {
            assert!(StoredResponse::decode(&bytes[..n]).is_err(), "prefix {n}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(StoredResponse::decode(&longer).is_err());
        assert!(StoredResponse::decode(b"IDR1\x03\xe8\0\0").is_err());
    }
}

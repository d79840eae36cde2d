//! The W3C Trace Context headers as the gateway reads, stores and sends them (W3C Trace Context
//! Level 1, §3.2 `traceparent` and §3.3 `tracestate`), without OpenTelemetry: with traces off,
//! a trusted sender's context is still passed on.

use http::HeaderMap;

/// The `traceparent` header: `{version}-{trace id}-{parent id}-{flags}` in lower-case hex.
pub const TRACEPARENT: &str = "traceparent";
/// The `tracestate` header: vendors' `key=value` pairs, comma-separated.
pub const TRACESTATE: &str = "tracestate";

/// The most bytes of `tracestate` kept: the size W3C Trace Context §3.3.1.5 asks a platform to
/// propagate at least; a longer one is dropped (its `traceparent` is still used).
const MAX_TRACESTATE: usize = 512;

/// A trace context as stored with an event and sent to its destinations: a valid version-00
/// `traceparent` and the `tracestate` that goes with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TraceHeaders {
    pub traceparent: String,
    pub tracestate: Option<String>,
}

/// A `traceparent` read by [`TraceParent::parse`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TraceParent {
    pub trace_id: [u8; 16],
    pub parent_id: [u8; 8],
    pub flags: u8,
}

impl TraceParent {
    /// `value` as a `traceparent` (§3.2.2), or `None` when it is not one: each part lower-case
    /// hex of its length, the version not `ff`, neither id all zeros, version 00 exactly 55
    /// characters long. A later version is read by its first four parts when a `-` or nothing
    /// follows them (§4.3, "Versioning of traceparent").
    pub(crate) fn parse(value: &str) -> Option<Self> {
        let value = value.trim_matches([' ', '\t']);
        let bytes = value.as_bytes();
        if bytes.len() < 55 || [2, 35, 52].iter().any(|&i| bytes[i] != b'-') {
            return None;
        }
        // Bytes, not string slices: a multi-byte character cannot split a slice here.
        let version = hex::<1>(&bytes[0..2])?[0];
        if version == 0xff || (version == 0 && bytes.len() != 55) {
            return None;
        }
        if bytes.len() > 55 && bytes[55] != b'-' {
            return None;
        }
        let trace_id = hex::<16>(&bytes[3..35])?;
        let parent_id = hex::<8>(&bytes[36..52])?;
        let flags = hex::<1>(&bytes[53..55])?[0];
        if trace_id == [0; 16] || parent_id == [0; 8] {
            return None;
        }
        Some(Self {
            trace_id,
            parent_id,
            flags,
        })
    }

    /// The version-00 header of this context.
    pub(crate) fn header(&self) -> String {
        format!(
            "00-{}-{}-{:02x}",
            ::hex::encode(self.trace_id),
            ::hex::encode(self.parent_id),
            self.flags
        )
    }
}

/// `text` as `N` bytes of lower-case hex (upper case is refused, as §3.2.2 says).
fn hex<const N: usize>(text: &[u8]) -> Option<[u8; N]> {
    if !text
        .iter()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
    {
        return None;
    }
    let mut out = [0; N];
    ::hex::decode_to_slice(text, &mut out).ok()?;
    Some(out)
}

/// The trace context `headers` carry: their one `traceparent`, when it is valid (two of them
/// are none, §3.2), with the `tracestate` headers joined by commas (§3.3.1.1), or none when
/// they are longer than 512 bytes or hold a byte outside visible ASCII and spaces.
pub(crate) fn incoming(headers: &HeaderMap) -> Option<(TraceParent, Option<String>)> {
    let mut values = headers.get_all(TRACEPARENT).iter();
    let first = values.next()?;
    if values.next().is_some() {
        return None;
    }
    let parent = TraceParent::parse(first.to_str().ok()?)?;
    let mut state = String::new();
    for value in headers.get_all(TRACESTATE) {
        let Ok(text) = value.to_str() else {
            return Some((parent, None));
        };
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        if !state.is_empty() {
            state.push(',');
        }
        state.push_str(text);
    }
    let usable = !state.is_empty()
        && state.len() <= MAX_TRACESTATE
        && state.bytes().all(|b| b == b' ' || b.is_ascii_graphic());
    Some((parent, usable.then_some(state)))
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    const GOOD: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn the_specification_example_is_read_and_written_back() {
        let parent = TraceParent::parse(GOOD).unwrap();
        assert_eq!(
            ::hex::encode(parent.trace_id),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert_eq!(::hex::encode(parent.parent_id), "00f067aa0ba902b7");
        assert_eq!(parent.flags, 1);
        assert_eq!(parent.header(), GOOD);
    }

    #[test]
    fn what_is_not_a_traceparent_is_refused() {
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01extra",
            "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
            "é0-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",
            // A multi-byte character across a part's end: refused, not a panic.
            "00-4bf92f3577b34da6a3ce929d0e0e47é-00f067aa0ba902b7-01",
        ] {
            assert_eq!(TraceParent::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_later_version_is_read_by_its_first_parts_and_sent_as_version_00() {
        let later = "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-comes";
        assert_eq!(TraceParent::parse(later).unwrap().header(), GOOD);
    }

    #[test]
    fn tracestate_headers_are_joined_and_a_bad_one_dropped() {
        let mut headers = HeaderMap::new();
        assert_eq!(incoming(&headers), None);
        headers.append(TRACEPARENT, HeaderValue::from_static(GOOD));
        headers.append(TRACESTATE, HeaderValue::from_static("congo=t61rcWkgMzE"));
        headers.append(
            TRACESTATE,
            HeaderValue::from_static("rojo=00f067aa0ba902b7"),
        );
        let (parent, state) = incoming(&headers).unwrap();
        assert_eq!(parent.header(), GOOD);
        assert_eq!(
            state.as_deref(),
            Some("congo=t61rcWkgMzE,rojo=00f067aa0ba902b7")
        );

        headers.append(
            TRACESTATE,
            HeaderValue::from_str(&"x".repeat(MAX_TRACESTATE)).unwrap(),
        );
        assert_eq!(incoming(&headers).unwrap().1, None);

        headers.append(TRACEPARENT, HeaderValue::from_static(GOOD));
        assert_eq!(incoming(&headers), None, "two traceparent headers are none");
    }
}

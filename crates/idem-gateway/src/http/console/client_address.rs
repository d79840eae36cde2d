//! The client address sign-in's limit on wrong tokens is kept by: the TCP peer's, or, when the
//! peer is one of `console_trusted_proxies`, the client that the proxies recorded in
//! `X-Forwarded-For`. Each proxy appends the address it received the request from, so the
//! header is read from the right, over the trusted proxies, to the first address that is not
//! one: the client as the outermost trusted proxy saw it (as nginx's `real_ip_recursive on`
//! and Traefik's `forwardedHeaders.trustedIPs` do). What lies left of it was written by the
//! client or by an untrusted hop and is ignored, so a client cannot choose its own bucket by
//! sending the header; from a peer that is not trusted, the header is ignored altogether.

use std::net::{IpAddr, SocketAddr};

use axum::http::HeaderMap;
use ipnet::IpNet;

/// The header the proxies write (de facto standard; RFC 7239's `Forwarded` is not read).
const FORWARDED_FOR: &str = "x-forwarded-for";

/// The address of the client of a request from `peer` with `headers`, given the trusted
/// proxies `trusted`. An entry that is not an address (`unknown`, a name) stops the reading:
/// the last trusted hop read stands for the client.
pub(crate) fn client_address(peer: IpAddr, headers: &HeaderMap, trusted: &[IpNet]) -> IpAddr {
    let is_trusted = |address: &IpAddr| trusted.iter().any(|net| net.contains(address));
    let mut client = peer.to_canonical();
    if !is_trusted(&client) {
        return client;
    }
    let entries: Vec<&str> = (headers.get_all(FORWARDED_FOR).iter())
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .collect();
    for entry in entries.into_iter().rev() {
        let Some(address) = hop(entry) else {
            break;
        };
        client = address;
        if !is_trusted(&client) {
            break;
        }
    }
    client
}

/// One entry of the header: an address, with a port (`192.0.2.1:4711`, `[2001:db8::1]:4711`)
/// or in brackets (`[2001:db8::1]`) as some proxies write it.
fn hop(entry: &str) -> Option<IpAddr> {
    let entry = entry.trim();
    let address = entry
        .parse::<IpAddr>()
        .ok()
        .or_else(|| entry.parse::<SocketAddr>().ok().map(|s| s.ip()))
        .or_else(|| {
            let inner = entry.strip_prefix('[')?.strip_suffix(']')?;
            inner.parse::<IpAddr>().ok()
        })?;
    Some(address.to_canonical())
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(values: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append(FORWARDED_FOR, HeaderValue::from_str(value).unwrap());
        }
        headers
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn the_rightmost_untrusted_hop_is_the_client() {
        let trusted: Vec<IpNet> = vec!["10.0.0.0/8".parse().unwrap(), "::1/128".parse().unwrap()];
        let proxy = ip("10.0.0.2");
        for (values, client) in [
            // No header: the proxy itself.
            (&[][..], "10.0.0.2"),
            (&["203.0.113.7"][..], "203.0.113.7"),
            // A forged entry left of the one the proxy wrote is ignored.
            (&["198.51.100.1, 203.0.113.7"][..], "203.0.113.7"),
            // Two trusted proxies: the outer one's record of the client.
            (&["203.0.113.7, 10.9.9.9"][..], "203.0.113.7"),
            // Several header lines read as one list.
            (
                &["198.51.100.1", "203.0.113.7, 10.9.9.9"][..],
                "203.0.113.7",
            ),
            (&["203.0.113.7:4711"][..], "203.0.113.7"),
            (&["[2001:db8::7]:4711"][..], "2001:db8::7"),
            (&["[2001:db8::7]"][..], "2001:db8::7"),
            (&["::ffff:203.0.113.7"][..], "203.0.113.7"),
            // Not an address: the last trusted hop read.
            (&["203.0.113.7, unknown, 10.9.9.9"][..], "10.9.9.9"),
            (&["garbage"][..], "10.0.0.2"),
            // Only trusted hops: the leftmost.
            (&["10.1.1.1, 10.9.9.9"][..], "10.1.1.1"),
        ] {
            assert_eq!(
                client_address(proxy, &headers(values), &trusted),
                ip(client),
                "{values:?}"
            );
        }
        // The header of a peer that is not trusted, or of any peer without trusted proxies,
        // is ignored.
        let forged = headers(&["203.0.113.7"]);
        assert_eq!(
            client_address(ip("192.0.2.9"), &forged, &trusted),
            ip("192.0.2.9")
        );
        assert_eq!(client_address(proxy, &forged, &[]), proxy);
        assert_eq!(
            client_address(ip("::ffff:10.0.0.2"), &forged, &trusted),
            ip("203.0.113.7"),
            "an IPv4 peer on an IPv6 socket"
        );
    }
}

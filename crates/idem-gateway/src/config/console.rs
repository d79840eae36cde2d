//! The console's keys: `console`, `console_url`, `console_session_ttl`,
//! `console_trusted_proxies`.

use std::net::IpAddr;
use std::time::Duration;

use ipnet::IpNet;

use super::duration;
use super::error::{ConfigError, out_of_range};
use super::raw::RawConfig;

/// How long a console session lasts without `console_session_ttl`: a working day.
pub const DEFAULT_CONSOLE_SESSION_TTL: Duration = Duration::from_secs(8 * 3600);
/// The shortest session.
const MIN_SESSION_TTL: Duration = Duration::from_secs(5 * 60);
/// The longest session.
const MAX_SESSION_TTL: Duration = Duration::from_secs(7 * 86_400);

/// The web console's settings. It is served at `/console` (on `admin_listen` when set) when
/// the admin token is configured and `enabled`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsoleSettings {
    /// `console` (default true): whether `/console` is served when there is an admin token.
    pub enabled: bool,
    /// `console_url`: the console's URL as browsers reach it, through any proxy in front
    /// (`https://ops.example.com/console`). Its scheme decides the session cookie's `Secure`
    /// flag (TLS is terminated in front of the gateway); `idem serve` logs it at start.
    pub url: Option<reqwest::Url>,
    /// `console_session_ttl` (default 8h, 5m to 7d): how long a session lasts after sign-in.
    pub session_ttl: Duration,
    /// `console_trusted_proxies` (default none): the addresses and ranges of the proxies in
    /// front of the console. A request from one of them is taken to come from the client its
    /// `X-Forwarded-For` names (the rightmost address that is not itself a trusted proxy), for
    /// sign-in's limit on wrong tokens; from any other peer the header is ignored.
    pub trusted_proxies: Vec<IpNet>,
}

impl Default for ConsoleSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            url: None,
            session_ttl: DEFAULT_CONSOLE_SESSION_TTL,
            trusted_proxies: Vec::new(),
        }
    }
}

impl ConsoleSettings {
    /// Whether the session cookie is sent only over HTTPS: when `console_url` is `https://`.
    pub fn secure_cookie(&self) -> bool {
        self.url.as_ref().is_some_and(|u| u.scheme() == "https")
    }
}

/// The console's keys of `raw`, checked.
pub(super) fn build(raw: &RawConfig) -> Result<ConsoleSettings, ConfigError> {
    let url = match &raw.console_url {
        Some(text) => {
            let parsed = reqwest::Url::parse(text.trim()).ok().filter(|u| {
                matches!(u.scheme(), "http" | "https")
                    && u.host().is_some()
                    && u.username().is_empty()
                    && u.password().is_none()
            });
            Some(parsed.ok_or_else(|| {
                ConfigError::BadValue {
                    field: "console_url".into(),
                    value: idem_sql::redact_url(text),
                    expected:
                        "an http:// or https:// URL with a host and no user or password, such \
                           as \"https://ops.example.com/console\""
                            .into(),
                }
            })?)
        }
        None => None,
    };
    let session_ttl = match &raw.console_session_ttl {
        Some(text) => {
            let ttl = duration::parse("console_session_ttl", text)?;
            if !(MIN_SESSION_TTL..=MAX_SESSION_TTL).contains(&ttl) {
                return Err(out_of_range(
                    "console_session_ttl",
                    text,
                    "between 5m and 7d",
                ));
            }
            ttl
        }
        None => DEFAULT_CONSOLE_SESSION_TTL,
    };
    let trusted_proxies = (raw.console_trusted_proxies.iter().flatten())
        .map(|entry| trusted_proxy(entry))
        .collect::<Result<_, _>>()?;
    Ok(ConsoleSettings {
        enabled: raw.console.unwrap_or(true),
        url,
        session_ttl,
        trusted_proxies,
    })
}

/// One entry of `console_trusted_proxies`: a CIDR range (`10.0.0.0/8`, `fd00::/8`) or one
/// address (`127.0.0.1`, `::1`).
fn trusted_proxy(entry: &str) -> Result<IpNet, ConfigError> {
    let text = entry.trim();
    text.parse::<IpNet>()
        .or_else(|_| text.parse::<IpAddr>().map(IpNet::from))
        .map(|net| net.trunc())
        .map_err(|_| ConfigError::BadValue {
            field: "console_trusted_proxies".into(),
            value: entry.to_owned(),
            expected: "an IP address or a CIDR range, such as \"127.0.0.1\" or \"10.0.0.0/8\""
                .into(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> RawConfig {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn defaults_and_the_secure_flag() {
        let settings = build(&raw("")).unwrap();
        assert_eq!(settings, ConsoleSettings::default());
        assert!(!settings.secure_cookie());
        let https = build(&raw("console_url = \"https://ops.example.com/console\"")).unwrap();
        assert!(https.secure_cookie());
        let http = build(&raw("console_url = \"http://127.0.0.1:9091/console\"")).unwrap();
        assert!(!http.secure_cookie());
        let proxies = build(&raw(
            "console_trusted_proxies = [\"127.0.0.1\", \"10.1.2.3/8\", \" fd00::/8 \"]",
        ))
        .unwrap();
        let nets: Vec<String> = (proxies.trusted_proxies.iter())
            .map(ToString::to_string)
            .collect();
        assert_eq!(nets, ["127.0.0.1/32", "10.0.0.0/8", "fd00::/8"]);
    }

    #[test]
    fn bad_values_are_refused_naming_the_key() {
        for (text, expected) in [
            (
                "console_url = \"ops.example.com\"",
                "console_url = \"ops.example.com\" is not valid; expected an http:// or https:// URL",
            ),
            (
                "console_url = \"https://admin:pw@ops.example.com/\"",
                "console_url = \"https://***@ops.example.com/\" is not valid",
            ),
            (
                "console_session_ttl = \"1m\"",
                "console_session_ttl = \"1m\" is not valid; expected between 5m and 7d",
            ),
            (
                "console_session_ttl = \"soon\"",
                "console_session_ttl = \"soon\" is not a duration",
            ),
            (
                "console_trusted_proxies = [\"10.0.0.0/8\", \"proxy.internal\"]",
                "console_trusted_proxies = \"proxy.internal\" is not valid; expected an IP address \
                 or a CIDR range",
            ),
            (
                "console_trusted_proxies = [\"10.0.0.0/33\"]",
                "console_trusted_proxies = \"10.0.0.0/33\" is not valid",
            ),
        ] {
            let error = build(&raw(text)).unwrap_err().to_string();
            assert!(error.starts_with(expected), "{error}");
        }
    }
}

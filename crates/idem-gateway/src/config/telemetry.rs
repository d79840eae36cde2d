//! The `[telemetry]` table and the standard OpenTelemetry environment variables that stand for
//! it: whether traces are exported, where, under which service name, and what share of them.

use super::error::ConfigError;
use super::raw::RawTelemetry;

/// The service name spans are exported under without `service_name` or `OTEL_SERVICE_NAME`.
pub const DEFAULT_SERVICE_NAME: &str = "idem-gateway";
/// The path an OTLP/HTTP collector takes traces at, after its base URL (OTLP specification,
/// "OTLP/HTTP Request": `/v1/traces`).
const TRACES_PATH: &str = "/v1/traces";

/// `OTEL_SDK_DISABLED`: `true` turns traces off whatever else is set (OpenTelemetry's
/// "General SDK Configuration").
pub const OTEL_SDK_DISABLED: &str = "OTEL_SDK_DISABLED";
/// `OTEL_EXPORTER_OTLP_ENDPOINT`: the collector's base URL; traces go to `{it}/v1/traces`.
pub const OTEL_EXPORTER_OTLP_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`: the full URL traces are POSTed to, used as it is.
pub const OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
/// `OTEL_SERVICE_NAME`: the service name when `service_name` is not set.
pub const OTEL_SERVICE_NAME: &str = "OTEL_SERVICE_NAME";

/// Where and how traces are exported: OTLP over HTTP with protobuf bodies, from a batch span
/// processor. A configuration has `Some` of it only when a `[telemetry]` table or an endpoint
/// variable turns traces on.
#[derive(Debug, Clone, PartialEq)]
pub struct TelemetrySettings {
    /// The URL spans are POSTed to: `endpoint` (or `OTEL_EXPORTER_OTLP_ENDPOINT`) and
    /// `/v1/traces`, or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` as it is. `http://` only.
    pub traces_url: reqwest::Url,
    /// The `service.name` resource attribute (`service_name`, else `OTEL_SERVICE_NAME`, else
    /// [`DEFAULT_SERVICE_NAME`]).
    pub service_name: String,
    /// The share of new traces recorded, 0.0 to 1.0 (`sample_ratio`, default 1.0): a trace
    /// continued from a trusted `traceparent` keeps its sender's decision instead.
    pub sample_ratio: f64,
}

/// The telemetry settings of `raw` (`None` without a `[telemetry]` table) and the environment
/// `env`: `None` when traces are off.
pub(super) fn build(
    raw: Option<&RawTelemetry>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<TelemetrySettings>, ConfigError> {
    let set = |var: &str| env(var).filter(|value| !value.trim().is_empty());
    if set(OTEL_SDK_DISABLED).is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
        return Ok(None);
    }
    let traces_url = match (
        raw.and_then(|t| t.endpoint.as_deref()),
        set(OTEL_EXPORTER_OTLP_TRACES_ENDPOINT),
        set(OTEL_EXPORTER_OTLP_ENDPOINT),
    ) {
        (Some(endpoint), _, _) => url("telemetry.endpoint", endpoint, true)?,
        (None, Some(full), _) => url(OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, &full, false)?,
        (None, None, Some(base)) => url(OTEL_EXPORTER_OTLP_ENDPOINT, &base, true)?,
        (None, None, None) if raw.is_some() => {
            return Err(ConfigError::BadValue {
                field: "telemetry.endpoint".into(),
                value: String::new(),
                expected: format!(
                    "the collector's OTLP/HTTP URL, such as \"http://127.0.0.1:4318\" (or {OTEL_EXPORTER_OTLP_ENDPOINT} in the environment): a [telemetry] table turns traces on, and they need somewhere to go"
                ),
            });
        }
        (None, None, None) => return Ok(None),
    };
    let service_name = match raw.and_then(|t| t.service_name.clone()) {
        Some(name) if name.trim().is_empty() => {
            return Err(ConfigError::BadValue {
                field: "telemetry.service_name".into(),
                value: name,
                expected: "a service name that is not empty, such as \"idem-gateway\"".into(),
            });
        }
        Some(name) => name,
        None => set(OTEL_SERVICE_NAME).unwrap_or_else(|| DEFAULT_SERVICE_NAME.to_owned()),
    };
    let sample_ratio = raw.and_then(|t| t.sample_ratio).unwrap_or(1.0);
    if !(0.0..=1.0).contains(&sample_ratio) {
        return Err(ConfigError::BadValue {
            field: "telemetry.sample_ratio".into(),
            value: sample_ratio.to_string(),
            expected: "a number from 0.0 (no new trace recorded) to 1.0 (every one)".into(),
        });
    }
    Ok(Some(TelemetrySettings {
        traces_url,
        service_name,
        sample_ratio,
    }))
}

/// `text` (from `field`) as the URL traces are POSTed to; with `base`, the collector's base
/// URL, to which `/v1/traces` is added.
fn url(field: &str, text: &str, base: bool) -> Result<reqwest::Url, ConfigError> {
    let bad = || ConfigError::BadValue {
        field: field.into(),
        value: idem_sql::redact_url(text),
        expected: "an http:// URL with a host and no user or password, such as \
                   \"http://127.0.0.1:4318\" (the exporter has no TLS: run the collector on \
                   this host or a private network)"
            .into(),
    };
    let parsed = reqwest::Url::parse(text.trim()).map_err(|_| bad())?;
    if parsed.scheme() != "http"
        || parsed.host().is_none()
        || !parsed.username().is_empty()
        || parsed.password().is_some()
    {
        return Err(bad());
    }
    if !base {
        return Ok(parsed);
    }
    // As OpenTelemetry's exporters build a signal's URL from the base one.
    let joined = format!("{}{TRACES_PATH}", text.trim().trim_end_matches('/'));
    reqwest::Url::parse(&joined).map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn settings(
        toml_text: &str,
        vars: &[(&str, &str)],
    ) -> Result<Option<TelemetrySettings>, ConfigError> {
        let raw: super::super::raw::RawConfig = toml::from_str(toml_text).unwrap();
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        build(raw.telemetry.as_ref(), &|var| vars.get(var).cloned())
    }

    #[test]
    fn off_without_a_table_or_an_endpoint_variable() {
        assert_eq!(settings("", &[]).unwrap(), None);
        assert_eq!(settings("", &[(OTEL_SERVICE_NAME, "x")]).unwrap(), None);
    }

    #[test]
    fn the_table_the_variables_and_their_order() {
        let on = settings(
            "[telemetry]\nendpoint = \"http://collector:4318/\"\nsample_ratio = 0.25\n",
            &[(OTEL_EXPORTER_OTLP_ENDPOINT, "http://other:4318")],
        )
        .unwrap()
        .unwrap();
        assert_eq!(on.traces_url.as_str(), "http://collector:4318/v1/traces");
        assert_eq!(on.service_name, DEFAULT_SERVICE_NAME);
        assert_eq!(on.sample_ratio, 0.25);

        let base = settings(
            "",
            &[
                (OTEL_EXPORTER_OTLP_ENDPOINT, "http://127.0.0.1:4318/otlp"),
                (OTEL_SERVICE_NAME, "edge"),
            ],
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            base.traces_url.as_str(),
            "http://127.0.0.1:4318/otlp/v1/traces"
        );
        assert_eq!(base.service_name, "edge");
        assert_eq!(base.sample_ratio, 1.0);

        let full = settings(
            "[telemetry]\nservice_name = \"gw\"\n",
            &[
                (
                    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
                    "http://127.0.0.1:9/traces",
                ),
                (OTEL_EXPORTER_OTLP_ENDPOINT, "http://127.0.0.1:4318"),
            ],
        )
        .unwrap()
        .unwrap();
        assert_eq!(full.traces_url.as_str(), "http://127.0.0.1:9/traces");
        assert_eq!(full.service_name, "gw");

        let disabled = settings(
            "[telemetry]\nendpoint = \"http://collector:4318\"\n",
            &[(OTEL_SDK_DISABLED, "TRUE")],
        );
        assert_eq!(disabled.unwrap(), None);
    }

    #[test]
    fn bad_values_are_refused_naming_the_key() {
        for (text, vars, expected) in [
            (
                "[telemetry]\n",
                &[][..],
                "telemetry.endpoint is missing or empty; expected the collector's OTLP/HTTP URL",
            ),
            (
                "[telemetry]\nendpoint = \"https://collector:4318\"\n",
                &[],
                "telemetry.endpoint = \"https://collector:4318\" is not valid; expected an http:// URL",
            ),
            (
                "[telemetry]\nendpoint = \"http://user:pw@collector:4318\"\n",
                &[],
                "telemetry.endpoint = \"http://***@collector:4318\" is not valid",
            ),
            (
                "",
                &[(OTEL_EXPORTER_OTLP_ENDPOINT, "collector:4318")],
                "OTEL_EXPORTER_OTLP_ENDPOINT = \"collector:4318\" is not valid",
            ),
            (
                "[telemetry]\nendpoint = \"http://c:4318\"\nsample_ratio = 1.5\n",
                &[],
                "telemetry.sample_ratio = \"1.5\" is not valid; expected a number from 0.0",
            ),
            (
                "[telemetry]\nendpoint = \"http://c:4318\"\nservice_name = \" \"\n",
                &[],
                "telemetry.service_name = \" \" is not valid",
            ),
        ] {
            let error = settings(text, vars).unwrap_err().to_string();
            assert!(error.starts_with(expected), "{error}");
        }
    }
}

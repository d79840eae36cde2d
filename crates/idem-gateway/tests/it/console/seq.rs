//! Source `seq` of the console tests: a generic source whose events are versions `$.v` of order
//! `o1`, signed with a hex HMAC of the body, routed to destination `app`.

use idem_gateway::GatewayDb;
use idem_http::verify::{Encoding, generic_hmac};

use crate::support::{Running, env};

/// Its secret, in environment variable `SEQ_SECRET`.
const SECRET: &str = "seq-secret";

/// Its `[[source]]` and `[[route]]` sections, the version read as `version_type`.
pub(super) fn sections(version_type: &str) -> String {
    format!(
        r#"
[[source]]
name = "seq"
kind = "generic"
secrets_env = ["SEQ_SECRET"]
signature_header = "x-seq-signature"
id = {{ header = "x-event-id" }}
entity = {{ json = "$.order" }}
entity_type = "order"
version = {{ json = "$.v", type = "{version_type}" }}

[[route]]
source = "seq"
destination = "app"
"#
    )
}

/// The test environment plus `SEQ_SECRET`.
pub(super) fn with_secret(var: &str) -> Option<String> {
    match var {
        "SEQ_SECRET" => Some(SECRET.to_owned()),
        other => env(other),
    }
}

/// POSTs `{"order":"o1","v":<v>}` as event `id` (`v` as JSON text); returns the answer's
/// `status`.
pub(super) async fn post<DB: GatewayDb>(gw: &Running<DB>, id: &str, v: &str) -> String {
    let body = format!(r#"{{"order":"o1","v":{v}}}"#);
    let signature = generic_hmac::sign(SECRET, Encoding::Hex, "", body.as_bytes());
    let headers = [
        ("x-event-id", id.to_owned()),
        ("x-seq-signature", signature),
    ];
    let answer = gw.post("seq", &headers, body.as_bytes()).await;
    answer.json["status"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

//! `idem_sql::redact_url` on any text. Properties (crates/idem-sql/src/redact.rs):
//! - whatever the text, it returns, and redacting its output changes nothing more;
//! - for every text that the `url` crate (the URL parser sqlx, async-nats and reqwest read
//!   credentials with) parses with user information or with a `password` or `sslpassword` query
//!   parameter (any case), the output still parses, with `***` or nothing as user name, no
//!   password, and `***` (or nothing) as the value of every such parameter; with user information, it has
//!   the same host and path.

#![no_main]

use idem_sql::redact_url;
use libfuzzer_sys::fuzz_target;
use url::Url;

fn names_a_password(name: &str) -> bool {
    name.eq_ignore_ascii_case("password") || name.eq_ignore_ascii_case("sslpassword")
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let shown = redact_url(text);
    assert_eq!(
        redact_url(&shown),
        shown,
        "redacting twice changed {text:?}"
    );

    let Ok(url) = Url::parse(text) else {
        return;
    };
    let has_user_info = !url.username().is_empty() || url.password().is_some();
    let has_query_password = url.query_pairs().any(|(name, _)| names_a_password(&name));
    if !has_user_info && !has_query_password {
        return;
    }
    let redacted = Url::parse(&shown).unwrap_or_else(|e| {
        panic!("{text:?} has credentials and its redacted form {shown:?} no longer parses: {e}")
    });
    assert!(
        matches!(redacted.username(), "" | "***") && redacted.password().is_none(),
        "{text:?} shows its user information as {shown:?}"
    );
    for (name, value) in redacted.query_pairs() {
        if names_a_password(&name) {
            assert!(
                matches!(value.as_ref(), "***" | ""),
                "{text:?} shows a password as {shown:?}"
            );
        }
    }
    // Only the user information is hidden: the host and the database stay readable. (A text
    // with `://` inside its path may lose more, which hides nothing a driver reads.)
    if has_user_info {
        assert_eq!(
            redacted.host_str(),
            url.host_str(),
            "{text:?} became {shown:?}"
        );
        assert_eq!(redacted.path(), url.path(), "{text:?} became {shown:?}");
    }
});

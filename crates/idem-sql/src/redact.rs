//! Database and broker URLs as idem shows them in errors, logs and command output: never with
//! a credential.

/// `url` with its whole user information (between `//` and `@`) replaced by `***`
/// (`postgres://app:pw@db/app` becomes `postgres://***@db/app`: a user name can be a secret too,
/// and a NATS token is written there alone), and the value of every query parameter that names
/// a password replaced by `***` (`?sslmode=require&password=pw` becomes
/// `?sslmode=require&password=***`). sqlx's PostgreSQL driver reads a password from either
/// place; `sslpassword` is libpq's key for the client key's passphrase. Parameter names are
/// compared after decoding (`%70assword`, `+`) and ignoring case, so no spelling the driver
/// might read shows its value. A text without `://` keeps its user information as it is; the
/// fragment (`#…`) is kept.
///
/// ```
/// use idem_sql::redact_url;
/// assert_eq!(
///     redact_url("postgres://app:pw@db:5432/app?sslmode=require&PASSWORD=pw"),
///     "postgres://***@db:5432/app?sslmode=require&PASSWORD=***"
/// );
/// ```
pub fn redact_url(url: &str) -> String {
    // The fragment is no part of the query; the query is what follows the first `?`.
    let (before_fragment, fragment) = match url.find('#') {
        Some(hash) => url.split_at(hash),
        None => (url, ""),
    };
    let (base, query) = match before_fragment.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (before_fragment, None),
    };
    let mut shown = match base.split_once("://") {
        Some((scheme, rest)) => {
            let authority_end = rest.find('/').unwrap_or(rest.len());
            match rest[..authority_end].rfind('@') {
                Some(at) => format!("{scheme}://***@{}", &rest[at + 1..]),
                None => base.to_owned(),
            }
        }
        None => base.to_owned(),
    };
    if let Some(query) = query {
        shown.push('?');
        let pairs: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((key, _)) if is_password_key(key) => format!("{key}=***"),
                _ => pair.to_owned(),
            })
            .collect();
        shown.push_str(&pairs.join("&"));
    }
    shown.push_str(fragment);
    shown
}

/// Whether query parameter name `key` (as written: percent-encoded, `+` for a space) names a
/// password.
fn is_password_key(key: &str) -> bool {
    let decoded = query_name(key);
    decoded.eq_ignore_ascii_case("password") || decoded.eq_ignore_ascii_case("sslpassword")
}

/// Query parameter name `key` decoded as a URL parser decodes it (`%XX` escapes, `+` for a
/// space; an invalid escape is kept as written).
pub(crate) fn query_name(key: &str) -> String {
    form_urlencoded::parse(key.as_bytes())
        .next()
        .map(|(name, _)| name.into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_information_never_shows() {
        assert_eq!(
            redact_url("amqp://guest:secret@127.0.0.1:5672/%2f"),
            "amqp://***@127.0.0.1:5672/%2f"
        );
        assert_eq!(
            redact_url("postgres://u:secret@h:5432/db"),
            "postgres://***@h:5432/db"
        );
        // The user name alone is hidden too: a NATS token is written there.
        assert_eq!(redact_url("nats://tok@host"), "nats://***@host");
        assert_eq!(redact_url("postgres://u@h/db"), "postgres://***@h/db");
        assert_eq!(redact_url("nats://127.0.0.1:4222"), "nats://127.0.0.1:4222");
        assert_eq!(redact_url("sqlite://./a@b.db"), "sqlite://./a@b.db");
        assert_eq!(redact_url("no scheme"), "no scheme");
        assert_eq!(redact_url("not a url"), "not a url");
    }

    /// sqlx's PostgreSQL driver reads `password` (and `sslpassword`) from the query string, so
    /// their values are hidden as the user information is; other parameters, the host and the
    /// database stay readable.
    #[test]
    fn query_string_passwords_never_show() {
        assert_eq!(
            redact_url("postgres://postgres@127.0.0.1:5999/x?password=s3cret"),
            "postgres://***@127.0.0.1:5999/x?password=***"
        );
        assert_eq!(
            redact_url("postgres://app:pw@db/app?sslmode=require&sslpassword=k3y&password=s3cret"),
            "postgres://***@db/app?sslmode=require&sslpassword=***&password=***"
        );
        assert_eq!(
            redact_url("postgres://u:a@h/db?sslmode=disable&password=s3cret&sslpassword=k"),
            "postgres://***@h/db?sslmode=disable&password=***&sslpassword=***"
        );
        // Spellings a URL parser decodes to `password`, a query without a path, a fragment.
        assert_eq!(
            redact_url("postgres://db?%70assword=s3cret&PASSWORD=s3cret&pass%77ord=x&dbname=x#top"),
            "postgres://db?%70assword=***&PASSWORD=***&pass%77ord=***&dbname=x#top"
        );
        // No `://` (`postgres:x?…` is a URL too), an `@` in a value, a name that only ends in
        // "password".
        assert_eq!(
            redact_url("postgres:x?password=a@b&oldpassword=kept"),
            "postgres:x?password=***&oldpassword=kept"
        );
        assert_eq!(
            redact_url("postgres://db/x?password"),
            "postgres://db/x?password"
        );
    }

    #[test]
    fn names_are_decoded_as_a_url_parser_decodes_them() {
        assert_eq!(query_name("%70ass+word%"), "pass word%");
        assert_eq!(query_name("%zz%4"), "%zz%4");
    }
}

//! Database and broker URLs as idem shows them in errors, logs and command output: never with
//! a credential.

/// `url` with its whole user information (between the authority's start and its last `@`)
/// replaced by `***` (`postgres://app:pw@db/app` becomes `postgres://***@db/app`: a user name can
/// be a secret too, and a NATS token is written there alone), and the value of every query
/// parameter that names a password replaced by `***` (`?sslmode=require&password=pw` becomes
/// `?sslmode=require&password=***`). sqlx's PostgreSQL driver reads a password from either
/// place; `sslpassword` is libpq's key for the client key's passphrase. Parameter names are
/// compared after decoding (`%70assword`, `+`) and ignoring case, so no spelling the driver
/// might read shows its value.
///
/// The text is read as the URL parser the drivers use (the `url` crate, after the WHATWG URL
/// Standard's basic URL parser) reads it: tabs and line breaks are dropped first, wherever they
/// are (so `postgres:\t//app:pw@db` is redacted, and the result is one line); leading control
/// characters and spaces are skipped; the authority follows `scheme://`, or for `http`,
/// `https`, `ws`, `wss` and `ftp` any number of `/` and `\` after `scheme:` (`http:app:pw@host`
/// has user information), and ends at `/`, `?`, `#` (and `\` for those schemes). A text the
/// parser would refuse is still redacted after its first `://` (`postgres ://app:pw@db`); one
/// with neither keeps its `@` as it is. The fragment (`#…`) is kept.
///
/// ```
/// use idem_sql::redact_url;
/// assert_eq!(
///     redact_url("postgres://app:pw@db:5432/app?sslmode=require&PASSWORD=pw"),
///     "postgres://***@db:5432/app?sslmode=require&PASSWORD=***"
/// );
/// ```
pub fn redact_url(url: &str) -> String {
    let url: String = url
        .chars()
        .filter(|c| !matches!(c, '\t' | '\n' | '\r'))
        .collect();
    // The fragment is no part of the query; the query is what follows the first `?`.
    let (before_fragment, fragment) = match url.find('#') {
        Some(hash) => url.split_at(hash),
        None => (url.as_str(), ""),
    };
    let (base, query) = match before_fragment.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (before_fragment, None),
    };
    let mut shown = match user_info(base) {
        Some((start, at)) => format!("{}***{}", &base[..start], &base[at..]),
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

/// Where the user information of `base` (a URL without tabs, line breaks, query and fragment)
/// starts, and where the `@` that ends it is, as byte offsets; `None` when it has none.
fn user_info(base: &str) -> Option<(usize, usize)> {
    let in_authority = |(start, special): (usize, bool)| {
        let authority = &base[start..];
        let end = authority
            .find(|c| c == '/' || (special && c == '\\'))
            .unwrap_or(authority.len());
        authority[..end].rfind('@').map(|at| (start, start + at))
    };
    authority(base).and_then(in_authority).or_else(|| {
        // Not a URL to the parser (`postgres ://…`), but a text someone may still read a
        // password in: everything after the first `://` up to a `/` is taken for the authority.
        base.find("://").and_then(|i| in_authority((i + 3, false)))
    })
}

/// Where the authority of `base` starts, as the WHATWG parser finds it, and whether its scheme
/// is special (the authority then also ends at a `\`).
fn authority(base: &str) -> Option<(usize, bool)> {
    // The parser skips leading C0 controls and spaces.
    let skipped = base.len() - base.trim_start_matches(|c: char| c <= ' ').len();
    let (scheme, rest) = base[skipped..].split_once(':')?;
    let mut chars = scheme.chars();
    let is_scheme = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    if !is_scheme {
        return None;
    }
    let rest_start = skipped + scheme.len() + 1;
    // The special schemes that have an authority (`file` has none): WHATWG URL Standard §3.1.
    let special = ["http", "https", "ws", "wss", "ftp"]
        .iter()
        .any(|s| scheme.eq_ignore_ascii_case(s));
    if special {
        let slashes = rest.len() - rest.trim_start_matches(['/', '\\']).len();
        Some((rest_start + slashes, true))
    } else if rest.starts_with("//") {
        Some((rest_start + 2, false))
    } else {
        None
    }
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
        // Not URLs to the parser, but a password is still a password.
        assert_eq!(redact_url("postgres ://u:pw@h/db"), "postgres ://***@h/db");
        assert_eq!(redact_url("postgres:x://u:pw@h"), "postgres:x://***@h");
    }

    /// Found by fuzzing (fuzz/fuzz_targets/redact_url.rs): the URL parser drops tabs and line
    /// breaks anywhere, so `g:\t\n//+@D…` has the user name `+`, which the redactor showed.
    #[test]
    fn user_information_split_by_tabs_or_line_breaks_never_shows() {
        assert_eq!(
            redact_url("g:\t\n//+@D\r\ro~`#\0\0\u{11}`"),
            "g://***@Do~`#\0\0\u{11}`"
        );
        assert_eq!(
            redact_url("postgres:\t//app:pw@db/app"),
            "postgres://***@db/app"
        );
        assert_eq!(
            redact_url("postgres:/\r\n/app:pw@db/app"),
            "postgres://***@db/app"
        );
        assert_eq!(
            redact_url("postgres://db/app?pass\tword=s3cret&sslmode=require\n"),
            "postgres://db/app?password=***&sslmode=require"
        );
        assert_eq!(redact_url(" \u{1}nats://tok@host"), " \u{1}nats://***@host");
    }

    /// For `http`, `https`, `ws`, `wss` and `ftp` the URL parser finds the authority after any
    /// number of `/` and `\`, and ends it at a `\` too.
    #[test]
    fn special_schemes_are_read_as_the_url_parser_reads_them() {
        assert_eq!(redact_url("http:app:pw@host/x"), "http:***@host/x");
        assert_eq!(redact_url("HTTPS:///app:pw@host"), "HTTPS:///***@host");
        assert_eq!(redact_url("ws:\\\\app:pw@host"), "ws:\\\\***@host");
        assert_eq!(
            redact_url("http://app:pw@host\\path@x"),
            "http://***@host\\path@x"
        );
        // Not special: no authority without `//`, and a `\` belongs to it.
        assert_eq!(redact_url("postgres:app:pw@db"), "postgres:app:pw@db");
        assert_eq!(redact_url("nats://a\\b@host"), "nats://***@host");
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

//! Opening a pool on MySQL or MariaDB: the URL, the server's version, the session's settings.

use std::str::FromStr;

use sqlx::mysql::{MySqlConnectOptions, MySqlConnection, MySqlPoolOptions};
use sqlx::{Connection, MySql, Pool};

use super::server_version::{SUPPORTED, Server};
use crate::redact::redact_url as redact;
use crate::{Error, PoolOptions};

/// Run on every connection idem's pool opens: a value longer than its column is an error, never
/// cut short (MySQL's non-strict modes truncate with a warning, and two keys cut to one prefix
/// would share an inbox row). sqlx has already appended its own modes, so the list is not empty.
const STRICT: &str = "SET SESSION sql_mode = CONCAT(@@SESSION.sql_mode, ',STRICT_ALL_TABLES')";

pub(super) async fn connect(url: &str, pool: &PoolOptions) -> Result<Pool<MySql>, Error> {
    if !(url.starts_with("mysql://") || url.starts_with("mariadb://")) {
        return Err(Error::InvalidUrl {
            url: redact(url),
            expected: "a MySQL or MariaDB URL, mysql://user@host:3306/database".into(),
        });
    }
    let options = MySqlConnectOptions::from_str(url).map_err(|e| Error::InvalidUrl {
        url: redact(url),
        expected: format!("a valid MySQL URL ({e})"),
    })?;
    if options.get_database().is_none() {
        return Err(Error::InvalidUrl {
            url: redact(url),
            expected: "a URL that names the database, mysql://user@host:3306/database".into(),
        });
    }
    let connect_error = |source| Error::Connect {
        url: redact(url),
        hint: crate::error::connect_hint(&source, &redact(url)),
        source,
    };
    // One direct connection first: the pool retries a refused connection until its acquire
    // timeout and then reports only "pool timed out"; this reports the cause at once, and
    // refuses a server idem does not run on before anything is written.
    let mut first = tokio::time::timeout(
        pool.acquire_timeout,
        MySqlConnection::connect_with(&options),
    )
    .await
    .map_err(|_| {
        connect_error(sqlx::Error::Io(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("no answer within {:?}", pool.acquire_timeout),
        )))
    })?
    .map_err(connect_error)?;
    let version: String = sqlx::query_scalar("SELECT VERSION()")
        .fetch_one(&mut first)
        .await
        .map_err(connect_error)?;
    first.close().await.ok();
    check_version(url, &version)?;
    // No ping before each checkout (one more round trip per transaction); a connection that broke
    // while idle fails its first statement instead, an `Unavailable` error the sender retries.
    MySqlPoolOptions::new()
        .max_connections(pool.max_connections)
        .acquire_timeout(pool.acquire_timeout)
        .test_before_acquire(false)
        .after_connect(|conn, _| {
            Box::pin(async move {
                sqlx::query(STRICT).execute(conn).await?;
                Ok(())
            })
        })
        .before_acquire(|conn, _| Box::pin(async move { Ok(!conn.is_in_transaction()) }))
        .connect_with(options)
        .await
        .map_err(connect_error)
}

/// Refuses a server older than idem supports, or one whose version cannot be read.
pub(super) fn check_version(url: &str, version: &str) -> Result<(), Error> {
    match Server::parse(version) {
        Some(server) if server.is_supported() => Ok(()),
        _ => Err(Error::UnsupportedServer {
            url: redact(url),
            found: version.to_owned(),
            supported: SUPPORTED,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::check_version;
    use crate::ErrorKind;

    #[test]
    fn an_unsupported_server_is_refused_naming_the_version_found_and_those_supported() {
        let url = "mysql://app:secret@db:3306/app";
        for found in ["5.7.44-log", "10.5.23-MariaDB", "not a version"] {
            let err = check_version(url, found).expect_err(found);
            let text = err.to_string();
            assert_eq!(err.kind(), ErrorKind::InvalidInput);
            for needle in [
                found,
                "MySQL 8.0 or later",
                "MariaDB 10.6 or later",
                "db:3306",
            ] {
                assert!(text.contains(needle), "{needle:?} not in: {text}");
            }
            assert!(!text.contains("secret"), "never the password: {text}");
        }
        for found in ["8.0.36", "10.6.18-MariaDB", "10.11.19-MariaDB-0+deb12u1"] {
            assert!(check_version(url, found).is_ok(), "{found}");
        }
    }
}

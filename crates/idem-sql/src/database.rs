//! Which database a URL names, and whether two URLs reach the same one: the checks that the
//! gateway's configuration, its relays and the `idem` command share.

use std::path::PathBuf;

/// Which database a URL names, by its scheme alone (nothing is parsed or opened).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DatabaseKind {
    /// `sqlite:…`
    Sqlite,
    /// `postgres:…` or `postgresql:…`
    Postgres,
    /// `mysql:…` or `mariadb:…` (opened only with the `mysql` feature)
    MySql,
}

impl DatabaseKind {
    /// The database `url` names, or `None` for another scheme.
    pub fn of(url: &str) -> Option<Self> {
        if url.starts_with("sqlite:") {
            Some(Self::Sqlite)
        } else if url.starts_with("postgres:") || url.starts_with("postgresql:") {
            Some(Self::Postgres)
        } else if url.starts_with("mysql:") || url.starts_with("mariadb:") {
            Some(Self::MySql)
        } else {
            None
        }
    }
}

/// Whether database URLs `a` and `b` reach the same database, whatever their spelling: sqlx
/// parses each URL (with the defaults it connects with), so a default port, a query parameter
/// such as `sslmode` or a password make no difference. PostgreSQL: the same server (`localhost`,
/// every loopback address and a Unix-domain socket directory are all this machine's) and
/// database (by default the user's name, as the server's). SQLite: the same file (canonical
/// path when it exists, else the path made absolute). A URL sqlx cannot parse, and a MySQL URL,
/// is compared as written.
pub fn same_database(a: &str, b: &str) -> bool {
    DatabaseIdentity::of(a) == DatabaseIdentity::of(b)
}

/// Which database a URL reaches, for [`same_database`].
#[derive(Debug, PartialEq, Eq)]
enum DatabaseIdentity {
    /// A PostgreSQL server and database. `host` is lowercase, with `localhost`, every loopback
    /// address and a Unix-domain socket directory all `loopback` (each is this machine's server
    /// on `port`); `database` defaults to the user name, as the server's does.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    Postgres {
        host: String,
        port: u16,
        database: String,
    },
    /// A SQLite file: its canonical path when it exists (so `./a.db`, `a.db` and a symlink
    /// agree), else the path made absolute.
    #[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
    Sqlite(PathBuf),
    /// A URL sqlx cannot parse (its connection fails at start, naming it): compared as written.
    Unparsed(String),
}

impl DatabaseIdentity {
    fn of(url: &str) -> Self {
        let parsed = match DatabaseKind::of(url) {
            #[cfg(feature = "postgres")]
            Some(DatabaseKind::Postgres) => Self::postgres(url),
            #[cfg(feature = "sqlite")]
            Some(DatabaseKind::Sqlite) => Self::sqlite(url),
            _ => None,
        };
        parsed.unwrap_or_else(|| Self::Unparsed(url.to_owned()))
    }

    #[cfg(feature = "postgres")]
    fn postgres(url: &str) -> Option<Self> {
        use std::net::IpAddr;
        use std::str::FromStr;

        let options = sqlx::postgres::PgConnectOptions::from_str(&identity_parameters(url)).ok()?;
        let host = options.get_host().trim_matches(['[', ']']).to_lowercase();
        let loopback = host == "localhost"
            || host.starts_with('/')
            || options.get_socket().is_some()
            || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback());
        Some(Self::Postgres {
            host: if loopback {
                "loopback".to_owned()
            } else {
                host
            },
            port: options.get_port(),
            database: options
                .get_database()
                .unwrap_or(options.get_username())
                .to_owned(),
        })
    }

    #[cfg(feature = "sqlite")]
    fn sqlite(url: &str) -> Option<Self> {
        use std::str::FromStr;

        let options = sqlx::sqlite::SqliteConnectOptions::from_str(url).ok()?;
        let path = options.get_filename();
        Some(Self::Sqlite(
            std::fs::canonicalize(path)
                .or_else(|_| std::path::absolute(path))
                .unwrap_or_else(|_| path.to_owned()),
        ))
    }
}

/// PostgreSQL URL `url` with only the query parameters that choose the server, database or
/// user: sqlx logs every other parameter it does not know with its value, and a password
/// (`sslpassword`) can be one.
#[cfg(feature = "postgres")]
fn identity_parameters(url: &str) -> String {
    const KEPT: [&str; 5] = ["host", "hostaddr", "port", "dbname", "user"];
    let Some((base, query)) = url.split_once('?') else {
        return url.to_owned();
    };
    let query = query.split('#').next().unwrap_or_default();
    let kept: Vec<&str> = query
        .split('&')
        .filter(|pair| {
            // The name as a URL parser decodes it (`%XX`, `+`).
            form_urlencoded::parse(pair.as_bytes())
                .next()
                .is_some_and(|(key, _)| KEPT.contains(&key.as_ref()))
        })
        .collect();
    if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scheme_names_the_database() {
        assert_eq!(
            DatabaseKind::of("sqlite://a.db"),
            Some(DatabaseKind::Sqlite)
        );
        assert_eq!(DatabaseKind::of("sqlite:a.db"), Some(DatabaseKind::Sqlite));
        assert_eq!(
            DatabaseKind::of("postgres://h/db"),
            Some(DatabaseKind::Postgres)
        );
        assert_eq!(
            DatabaseKind::of("postgresql://h/db"),
            Some(DatabaseKind::Postgres)
        );
        assert_eq!(DatabaseKind::of("mysql://h/db"), Some(DatabaseKind::MySql));
        assert_eq!(
            DatabaseKind::of("mariadb://h/db"),
            Some(DatabaseKind::MySql)
        );
        assert_eq!(DatabaseKind::of("redis://h"), None);
        assert_eq!(DatabaseKind::of("a.db"), None);
    }

    /// Only the parameters that pick the server, database or user reach sqlx's parser (which
    /// logs the value of any it does not know, `sslpassword` among them).
    #[cfg(feature = "postgres")]
    #[test]
    fn identity_keeps_only_the_parameters_that_choose_the_database() {
        assert_eq!(
            identity_parameters(
                "postgres://u@h/db?sslmode=require&sslpassword=k3y&port=6000&dbname=other#x"
            ),
            "postgres://u@h/db?port=6000&dbname=other"
        );
        assert_eq!(
            identity_parameters("postgres://u@h/db?password=s3cret"),
            "postgres://u@h/db"
        );
        assert_eq!(
            identity_parameters("postgres://u@h/db"),
            "postgres://u@h/db"
        );
        // Parameters that choose the database count as the URL's parts do.
        assert!(same_database(
            "postgres://u@127.0.0.1:5432/db",
            "postgres://u@elsewhere/ignored?host=localhost&port=5432&dbname=db"
        ));
        assert!(!same_database(
            "postgres://u@127.0.0.1/db",
            "postgres://u@127.0.0.1/db?port=5433"
        ));
        // Without a database name the server uses the user's name.
        assert!(same_database(
            "postgres://app@127.0.0.1/app",
            "postgres://app@localhost"
        ));
    }

    #[cfg(feature = "sqlite")]
    #[test]
    fn one_sqlite_file_is_one_database_however_it_is_written() {
        let dir = std::env::current_dir().unwrap();
        assert!(same_database(
            "sqlite://app.db",
            &format!("sqlite://{}", dir.join("app.db").display())
        ));
        assert!(!same_database("sqlite://app.db", "sqlite://other.db"));
        assert!(same_database("mysql://h/db", "mysql://h/db"));
        assert!(!same_database("mysql://h/db", "mysql://h:3306/db"));
    }
}

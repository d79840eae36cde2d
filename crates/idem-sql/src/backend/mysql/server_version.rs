//! Which MySQL and MariaDB servers idem runs on, read from `SELECT VERSION()`.
//!
//! The handshake's version is not used: MariaDB sends `5.5.5-10.11.6-MariaDB` there, for old
//! clients' sake, while `VERSION()` says `10.11.6-MariaDB-…`.

use std::fmt;

/// The servers idem accepts, as said in the refusal.
pub(crate) const SUPPORTED: &str = "MySQL 8.0 or later, or MariaDB 10.6 or later";

/// A server as `VERSION()` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Server {
    /// MySQL (or a server that answers as MySQL), with its (major, minor).
    MySql(u32, u32),
    /// MariaDB, with its (major, minor).
    MariaDb(u32, u32),
}

impl fmt::Display for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::MySql(major, minor) => write!(f, "MySQL {major}.{minor}"),
            Self::MariaDb(major, minor) => write!(f, "MariaDB {major}.{minor}"),
        }
    }
}

impl Server {
    /// Reads `VERSION()`'s answer (`8.0.36`, `10.11.6-MariaDB-0+deb12u1`, `8.4.0-log`);
    /// `None` when it does not start with a major and a minor number.
    pub(crate) fn parse(version: &str) -> Option<Self> {
        let mariadb = version.to_ascii_lowercase().contains("mariadb");
        // The handshake's form, should a proxy answer with it.
        let version = match version.strip_prefix("5.5.5-") {
            Some(rest) if mariadb => rest,
            _ => version,
        };
        let mut numbers = version
            .split(|c: char| !c.is_ascii_digit())
            .map(str::parse::<u32>);
        let (major, minor) = (numbers.next()?.ok()?, numbers.next()?.ok()?);
        if !version.starts_with(&format!("{major}.{minor}")) {
            return None;
        }
        if mariadb {
            Some(Self::MariaDb(major, minor))
        } else {
            Some(Self::MySql(major, minor))
        }
    }

    /// Whether idem runs on it: MySQL from 8.0 (`SKIP LOCKED`, enforced `CHECK`s, atomic DDL),
    /// MariaDB from 10.6 (its first release with `SKIP LOCKED`).
    pub(crate) fn is_supported(self) -> bool {
        match self {
            Self::MySql(major, _) => major >= 8,
            Self::MariaDb(major, minor) => (major, minor) >= (10, 6),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Server;

    #[test]
    fn versions_are_read_from_the_version_function() {
        let cases = [
            ("10.11.19-MariaDB-0+deb12u1", Some(Server::MariaDb(10, 11))),
            ("5.5.5-10.11.6-MariaDB", Some(Server::MariaDb(10, 11))),
            ("10.6.18-MariaDB-log", Some(Server::MariaDb(10, 6))),
            ("11.4.2-MariaDB", Some(Server::MariaDb(11, 4))),
            ("8.0.36", Some(Server::MySql(8, 0))),
            ("8.4.0-log", Some(Server::MySql(8, 4))),
            ("5.7.44-log", Some(Server::MySql(5, 7))),
            ("", None),
            ("MariaDB", None),
            ("10", None),
        ];
        for (text, expected) in cases {
            assert_eq!(Server::parse(text), expected, "{text:?}");
        }
    }

    #[test]
    fn mysql_8_and_mariadb_10_6_on_are_supported() {
        let supported = [
            Server::MySql(8, 0),
            Server::MySql(9, 1),
            Server::MariaDb(10, 6),
            Server::MariaDb(10, 11),
            Server::MariaDb(11, 4),
        ];
        let refused = [
            Server::MySql(5, 7),
            Server::MySql(5, 5),
            Server::MariaDb(10, 5),
            Server::MariaDb(10, 3),
        ];
        for server in supported {
            assert!(server.is_supported(), "{server}");
        }
        for server in refused {
            assert!(!server.is_supported(), "{server}");
        }
    }
}

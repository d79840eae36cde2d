//! The application's own SQL in generic tests ([`AppDb`]), on SQLite and PostgreSQL; MySQL's
//! implementation is in [`crate::mysql`].

use std::future::Future;

use idem_sql::Backend;
use idem_sql::sqlx::{self, Postgres, Sqlite};

/// A bind value for [`AppDb`] statements.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// TEXT.
    Text(String),
    /// BIGINT / INTEGER.
    Int(i64),
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Self::Text(s.to_owned())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Self::Text(s)
    }
}

impl From<i64> for Value {
    fn from(n: i64) -> Self {
        Self::Int(n)
    }
}

/// The application's own SQL in a generic test: statements with `$N` parameters that read the
/// same on SQLite and PostgreSQL, run on a connection (`&mut **tx` inside a runner handler,
/// `&mut *conn` on a pooled connection). On MySQL the `$N` become `?` (a `$N` used twice is
/// bound twice); what MySQL spells differently (upserts, key columns of a fixed length) is
/// chosen with [`dialect`](Self::dialect).
pub trait AppDb: Backend {
    /// `standard` (SQLite's and PostgreSQL's text), or `mysql` on MySQL.
    fn dialect(standard: &'static str, mysql: &'static str) -> &'static str {
        let _ = mysql;
        standard
    }

    /// Runs a statement; returns the rows affected.
    fn execute(
        conn: &mut Self::Connection,
        sql: &'static str,
        binds: Vec<Value>,
    ) -> impl Future<Output = Result<u64, sqlx::Error>> + Send;

    /// Runs a query whose rows have one BIGINT column; returns the values.
    fn fetch_i64(
        conn: &mut Self::Connection,
        sql: &'static str,
        binds: Vec<Value>,
    ) -> impl Future<Output = Result<Vec<i64>, sqlx::Error>> + Send;

    /// Runs a query whose rows are (TEXT, TEXT); returns the pairs.
    fn fetch_text_pairs(
        conn: &mut Self::Connection,
        sql: &'static str,
        binds: Vec<Value>,
    ) -> impl Future<Output = Result<Vec<(String, String)>, sqlx::Error>> + Send;
}

macro_rules! app_db {
    ($db:ty) => {
        impl AppDb for $db {
            async fn execute(
                conn: &mut Self::Connection,
                sql: &'static str,
                binds: Vec<Value>,
            ) -> Result<u64, sqlx::Error> {
                let mut query = sqlx::query(sql);
                for v in binds {
                    query = match v {
                        Value::Text(s) => query.bind(s),
                        Value::Int(n) => query.bind(n),
                    };
                }
                Ok(query.execute(&mut *conn).await?.rows_affected())
            }

            async fn fetch_i64(
                conn: &mut Self::Connection,
                sql: &'static str,
                binds: Vec<Value>,
            ) -> Result<Vec<i64>, sqlx::Error> {
                let mut query = sqlx::query_scalar(sql);
                for v in binds {
                    query = match v {
                        Value::Text(s) => query.bind(s),
                        Value::Int(n) => query.bind(n),
                    };
                }
                query.fetch_all(&mut *conn).await
            }

            async fn fetch_text_pairs(
                conn: &mut Self::Connection,
                sql: &'static str,
                binds: Vec<Value>,
            ) -> Result<Vec<(String, String)>, sqlx::Error> {
                let mut query = sqlx::query_as(sql);
                for v in binds {
                    query = match v {
                        Value::Text(s) => query.bind(s),
                        Value::Int(n) => query.bind(n),
                    };
                }
                query.fetch_all(&mut *conn).await
            }
        }
    };
}

app_db!(Sqlite);
app_db!(Postgres);

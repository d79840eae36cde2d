//! [`Sql`]: one bound for a handler written once for every database idem runs on.

use sqlx::{ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Type};

use crate::Backend;

/// A database idem runs on, together with what the application's own sqlx statements need of
/// it: write `DB: Sql` on a handler or helper generic over the store, and sqlx's `query`,
/// `query_scalar` and `query_as` work on `&mut *tx` with the common column types, with no other
/// bound.
///
/// ```
/// use idem_sql::{Runner, Sql, sqlx};
///
/// /// The application's write, for SQLite, PostgreSQL and any later backend alike.
/// async fn upsert<DB: Sql>(tx: &mut DB::Connection, id: &str, status: &str) -> Result<i64, sqlx::Error> {
///     sqlx::query(
///         "INSERT INTO subscriptions (id, status, changes) VALUES ($1, $2, 1) \
///          ON CONFLICT (id) DO UPDATE SET status = excluded.status, changes = subscriptions.changes + 1",
///     )
///     .bind(id)
///     .bind(status)
///     .execute(&mut *tx)
///     .await?;
///     sqlx::query_scalar("SELECT changes FROM subscriptions WHERE id = $1")
///         .bind(id)
///         .fetch_one(&mut *tx)
///         .await
/// }
///
/// async fn apply<DB: Sql>(runner: &Runner<DB>, event: &idem_sql::Event) -> Result<(), idem_sql::Error> {
///     runner.run(event, async |tx| Ok(upsert::<DB>(tx, "sub_1", "active").await?)).await?;
///     Ok(())
/// }
/// ```
///
/// What it stands for, each part a bound the compiler would otherwise ask for one at a time:
///
/// | part | lets a handler write |
/// |---|---|
/// | `for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>` | `.execute(&mut *tx)`, `.fetch_one(&mut *tx)`, … |
/// | `DB::Arguments: IntoArguments<DB>` | any query with `.bind(…)` |
/// | `String`, `i64`, `i32`, `f64`, `bool`, `Vec<u8>` and `Option` of each: `Encode + Decode + Type` | `.bind(value)` and reading columns of those types, `NULL` as `None` |
/// | `&str`, `&[u8]`: `Encode + Type` | `.bind("text")`, `.bind(&bytes[..])` |
/// | `usize`, `&str`: `ColumnIndex<DB::Row>` | tuples in `query_as`, `query_scalar`, `row.try_get(0)` or `("name")` |
///
/// Implemented for every [`Backend`] that has them: [`sqlx::Sqlite`] and [`sqlx::Postgres`],
/// and a backend added later without a change here. It costs nothing at run time: a generic
/// handler is compiled once per database, as if written for it. A column type outside the table
/// (a timestamp type of the `chrono` or `time` crates, say) still needs its own
/// `T: for<'q> Encode<'q, DB> + Type<DB>` bound, or a conversion to one of these.
///
/// Bounds on other types (`String: Type<DB>`) cannot simply be put on a trait for its users to
/// inherit: Rust passes on only a trait's bounds on `Self` and on its associated types. Each
/// bound here is therefore stated on an associated type of a hidden helper trait that equals
/// the type (`Text = String`, `Text: Encode<DB>`), which the compiler does pass on.
pub trait Sql:
    Backend
    + Database<Arguments: IntoArguments<Self>>
    + for<'c> types::SqlTypes<
        Exec<'c> = &'c mut <Self as Database>::Connection,
        Str<'c> = &'c str,
        Slice<'c> = &'c [u8],
        ColumnName<'c> = &'c str,
        Text = String,
        BigInt = i64,
        Int = i32,
        Double = f64,
        Bool = bool,
        Bytes = Vec<u8>,
        OptionText = Option<String>,
        OptionBigInt = Option<i64>,
        OptionInt = Option<i32>,
        OptionDouble = Option<f64>,
        OptionBool = Option<bool>,
        OptionBytes = Option<Vec<u8>>,
        Index = usize,
    > + for<'c> types::SqlTypes<
        Exec<'c>: Executor<'c, Database = Self>,
        Str<'c>: Encode<'c, Self> + Type<Self>,
        Slice<'c>: Encode<'c, Self> + Type<Self>,
        ColumnName<'c>: ColumnIndex<<Self as Database>::Row>,
    > + types::SqlTypes<
        Text: types::Column<Self>,
        BigInt: types::Column<Self>,
        Int: types::Column<Self>,
        Double: types::Column<Self>,
        Bool: types::Column<Self>,
        Bytes: types::Column<Self>,
        OptionText: for<'q> Encode<'q, Self>,
        OptionBigInt: for<'q> Encode<'q, Self>,
        OptionInt: for<'q> Encode<'q, Self>,
        OptionDouble: for<'q> Encode<'q, Self>,
        OptionBool: for<'q> Encode<'q, Self>,
        OptionBytes: for<'q> Encode<'q, Self>,
        Index: ColumnIndex<<Self as Database>::Row>,
    >
{
}

impl<DB> Sql for DB
where
    DB: Backend,
    DB::Arguments: IntoArguments<DB>,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'c> &'c str: Encode<'c, DB> + Type<DB> + ColumnIndex<DB::Row>,
    for<'c> &'c [u8]: Encode<'c, DB> + Type<DB>,
    String: types::Column<DB>,
    i64: types::Column<DB>,
    i32: types::Column<DB>,
    f64: types::Column<DB>,
    bool: types::Column<DB>,
    Vec<u8>: types::Column<DB>,
    Option<String>: for<'q> Encode<'q, DB>,
    Option<i64>: for<'q> Encode<'q, DB>,
    Option<i32>: for<'q> Encode<'q, DB>,
    Option<f64>: for<'q> Encode<'q, DB>,
    Option<bool>: for<'q> Encode<'q, DB>,
    Option<Vec<u8>>: for<'q> Encode<'q, DB>,
    usize: ColumnIndex<DB::Row>,
{
}

/// The hidden helper of [`Sql`]; unnameable outside the crate.
mod types {
    use super::*;

    /// A column type: bound, read and typed on `DB`.
    pub trait Column<DB: Database>:
        for<'q> Encode<'q, DB> + for<'r> Decode<'r, DB> + Type<DB>
    {
    }

    impl<DB: Database, T> Column<DB> for T where
        T: for<'q> Encode<'q, DB> + for<'r> Decode<'r, DB> + Type<DB>
    {
    }

    /// One associated type per type that [`Sql`] makes usable, each equal to it for every
    /// database; `Sql` states its bounds on these.
    pub trait SqlTypes: Database {
        type Exec<'c>;
        type Str<'c>;
        type Slice<'c>;
        type ColumnName<'c>;
        type Text;
        type BigInt;
        type Int;
        type Double;
        type Bool;
        type Bytes;
        type OptionText;
        type OptionBigInt;
        type OptionInt;
        type OptionDouble;
        type OptionBool;
        type OptionBytes;
        type Index;
    }

    impl<DB: Database> SqlTypes for DB {
        type Exec<'c> = &'c mut DB::Connection;
        type Str<'c> = &'c str;
        type Slice<'c> = &'c [u8];
        type ColumnName<'c> = &'c str;
        type Text = String;
        type BigInt = i64;
        type Int = i32;
        type Double = f64;
        type Bool = bool;
        type Bytes = Vec<u8>;
        type OptionText = Option<String>;
        type OptionBigInt = Option<i64>;
        type OptionInt = Option<i32>;
        type OptionDouble = Option<f64>;
        type OptionBool = Option<bool>;
        type OptionBytes = Option<Vec<u8>>;
        type Index = usize;
    }
}

#[cfg(test)]
mod tests {
    fn is_sql<DB: super::Sql>() {}

    /// The blanket impl's bounds hold for every backend built in: a backend missing one would
    /// silently not be `Sql`.
    #[test]
    fn every_backend_is_sql() {
        #[cfg(feature = "sqlite")]
        is_sql::<sqlx::Sqlite>();
        #[cfg(feature = "postgres")]
        is_sql::<sqlx::Postgres>();
        #[cfg(feature = "mysql")]
        is_sql::<sqlx::MySql>();
    }
}

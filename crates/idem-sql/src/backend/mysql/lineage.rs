//! Statements of the consumer lineage table (`idem_consumer_lineage`) on MySQL.

use sqlx::mysql::{MySql, MySqlConnection};

use super::{Res, inserted, opt_text, text};
use crate::backend::lineage_ops::{LineageOps, LineageRow};

const GET: &str = "SELECT predecessor, effects_scope FROM idem_consumer_lineage WHERE consumer = ?";

/// Records a lineage once: a plain INSERT, error 1062 meaning a row is stored.
const INSERT: &str = "INSERT INTO idem_consumer_lineage \
     (consumer, predecessor, effects_scope, declared_at) VALUES (?, ?, ?, ?)";

impl LineageOps for MySql {
    async fn lineage_get(conn: &mut MySqlConnection, consumer: &str) -> Res<Option<LineageRow>> {
        let row: Option<(Option<Vec<u8>>, Vec<u8>)> = sqlx::query_as(GET)
            .bind(consumer.as_bytes())
            .fetch_optional(&mut *conn)
            .await?;
        row.map(|(predecessor, scope)| Ok((opt_text(predecessor)?, text(scope)?)))
            .transpose()
    }

    async fn lineage_insert(
        conn: &mut MySqlConnection,
        consumer: &str,
        predecessor: Option<&str>,
        scope: &str,
        now: i64,
    ) -> Res<bool> {
        inserted(
            sqlx::query(INSERT)
                .bind(consumer.as_bytes())
                .bind(predecessor.map(str::as_bytes))
                .bind(scope.as_bytes())
                .bind(now)
                .execute(&mut *conn)
                .await,
        )
    }
}

//! Dead letters: deliveries a broker consumer gave up on after its retry policy's N deliveries,
//! kept in idem's store with the event's metadata and the error, for inspection and redrive.
//!
//! Retention ([`Store::gc`](crate::Store::gc)) never deletes them (docs/design.md C9); an operator
//! deletes a row after redriving or discarding its event.

use idem_core::{DedupKey, Entity, Name, Timestamp};

use crate::backend::Backend;
use crate::backend::dead_letter_ops::{DeadLetterRow, DeadLetterWrite};
use crate::{Error, Store};

/// A dead letter to record: what a consumer knows about the delivery it gives up on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetterRecord {
    /// The consumer that gave up (a versioned name such as `billing_v2`).
    pub consumer: Name,
    /// The source the event came from (the name its dedup key was built under).
    pub source: Name,
    /// The broker message id (JetStream `Nats-Msg-Id`, AMQP `message_id`), if the message had one.
    pub event_id: Option<String>,
    /// The event's dedup key; `None` when the message could not be decoded into an event. A
    /// second record with the same consumer and key updates the first row instead of adding one.
    pub dedup_key: Option<DedupKey>,
    /// The entity the event is about, if known.
    pub entity: Option<Entity>,
    /// Where the message was consumed from: for JetStream the message's subject, for RabbitMQ
    /// the consumer's main queue (not the exchange or routing key it was published with, nor a
    /// retry queue).
    pub destination: String,
    /// The message's headers as (name, value) pairs, in arrival order; binary values as the
    /// consumer chose to render them.
    pub headers: Vec<(String, String)>,
    /// The message body, bytes as received.
    pub payload: Vec<u8>,
    /// Why it failed: the handler's error (or the decode error) as text.
    pub error: String,
    /// How many times the broker had delivered the message, this delivery included.
    pub delivery_count: u32,
}

/// A stored dead letter, as read back by [`DeadLetters::list`] and [`DeadLetters::get`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    /// The row id, for [`DeadLetters::get`] and [`DeadLetters::delete`].
    pub id: i64,
    /// The consumer that gave up.
    pub consumer: String,
    /// The source the event came from.
    pub source: String,
    /// The broker message id, if the message had one.
    pub event_id: Option<String>,
    /// The dedup key (its text form, e.g. `orders:evt_1`), `None` for an undecodable message.
    pub dedup_key: Option<String>,
    /// The entity's aggregate type, if known.
    pub aggregate_type: Option<String>,
    /// The entity's aggregate id, if known.
    pub aggregate_id: Option<String>,
    /// Where the message was consumed from: for JetStream the message's subject, for RabbitMQ
    /// the consumer's main queue (not the exchange or routing key it was published with, nor a
    /// retry queue).
    pub destination: String,
    /// The message's headers, (name, value) pairs in arrival order.
    pub headers: Vec<(String, String)>,
    /// The message body.
    pub payload: Vec<u8>,
    /// The last error.
    pub error: String,
    /// The delivery count at the last failure.
    pub delivery_count: u32,
    /// When the event was first dead-lettered (ms since the epoch, store clock).
    pub first_failed_at: Timestamp,
    /// When it was last dead-lettered (ms since the epoch, store clock); differs from
    /// `first_failed_at` only if a redelivery failed again after the first record.
    pub last_failed_at: Timestamp,
}

/// The dead-letter table of a store. Made by [`Store::dead_letters`]; cheap to clone.
#[derive(Debug)]
pub struct DeadLetters<DB: Backend> {
    store: Store<DB>,
}

// Written out: a derive would require `DB: Clone`, which sqlx's database types are not.
impl<DB: Backend> Clone for DeadLetters<DB> {
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
        }
    }
}

impl<DB: Backend> DeadLetters<DB> {
    pub(crate) fn new(store: Store<DB>) -> Self {
        Self { store }
    }

    /// Records `letter` in its own statement (not in a handler's transaction: the handler's
    /// transaction was rolled back). Both failure times are the store's clock now; recording the
    /// same (consumer, dedup key) again keeps one row, updates everything but `first_failed_at`,
    /// and returns the same id. Letters without a dedup key always get a new row.
    ///
    /// Returns the row id.
    ///
    /// # Errors
    /// [`Error::Database`] when the row cannot be written.
    pub async fn record(&self, letter: &DeadLetterRecord) -> Result<i64, Error> {
        let mut conn = self.store.pool().acquire().await?;
        self.record_on(&mut conn, letter).await
    }

    /// As [`record`](Self::record), inside the caller's transaction: for a consumer that moves
    /// its position past the message in the same transaction (the Kafka consumer), so that the
    /// dead letter and the new position commit together and a crash never records it twice.
    ///
    /// # Errors
    /// As [`record`](Self::record).
    pub async fn record_in(
        &self,
        tx: &mut sqlx::Transaction<'_, DB>,
        letter: &DeadLetterRecord,
    ) -> Result<i64, Error> {
        self.record_on(tx, letter).await
    }

    async fn record_on(
        &self,
        conn: &mut DB::Connection,
        letter: &DeadLetterRecord,
    ) -> Result<i64, Error> {
        let headers = encode_headers(&letter.headers);
        let row = DeadLetterWrite {
            consumer: letter.consumer.as_str(),
            source: letter.source.as_str(),
            event_id: letter.event_id.as_deref(),
            dedup_key: letter.dedup_key.as_ref().map(DedupKey::as_str),
            aggregate_type: letter.entity.as_ref().map(|e| e.aggregate_type().as_str()),
            aggregate_id: letter.entity.as_ref().map(Entity::aggregate_id),
            destination: &letter.destination,
            headers: &headers,
            payload: &letter.payload,
            error: &letter.error,
            delivery_count: i64::from(letter.delivery_count),
            now: self.store.now().as_millis(),
        };
        Ok(DB::record_dead_letter(conn, &row).await?)
    }

    /// The oldest `limit` dead letters of `consumer`, oldest first (by id).
    ///
    /// # Errors
    /// [`Error::Database`]; [`Error::CorruptRow`] for a row idem did not write (headers that are
    /// not a JSON array of pairs, a negative delivery count).
    pub async fn list(&self, consumer: &Name, limit: u32) -> Result<Vec<DeadLetter>, Error> {
        let mut conn = self.store.pool().acquire().await?;
        DB::list_dead_letters(&mut conn, consumer.as_str(), i64::from(limit))
            .await?
            .into_iter()
            .map(from_row)
            .collect()
    }

    /// The dead letter with row id `id`, or `None`.
    ///
    /// # Errors
    /// As [`list`](Self::list).
    pub async fn get(&self, id: i64) -> Result<Option<DeadLetter>, Error> {
        let mut conn = self.store.pool().acquire().await?;
        DB::get_dead_letter(&mut conn, id)
            .await?
            .map(from_row)
            .transpose()
    }

    /// Deletes the dead letter with row id `id` (after its event was redriven or discarded).
    /// Returns whether it existed.
    ///
    /// # Errors
    /// [`Error::Database`].
    pub async fn delete(&self, id: i64) -> Result<bool, Error> {
        let mut conn = self.store.pool().acquire().await?;
        Ok(DB::delete_dead_letter(&mut conn, id).await?)
    }
}

const TABLE: &str = "idem_dead_letters";

fn encode_headers(headers: &[(String, String)]) -> String {
    serde_json::Value::Array(
        headers
            .iter()
            .map(|(name, value)| serde_json::json!([name, value]))
            .collect(),
    )
    .to_string()
}

fn decode_headers(text: &str) -> Result<Vec<(String, String)>, Error> {
    let corrupt = || Error::CorruptRow {
        table: TABLE,
        detail: format!("headers {text:?} are not a JSON array of [name, value] pairs"),
    };
    let pairs: Vec<(String, String)> = serde_json::from_str(text).map_err(|_| corrupt())?;
    Ok(pairs)
}

fn from_row(row: DeadLetterRow) -> Result<DeadLetter, Error> {
    let (
        id,
        consumer,
        source,
        event_id,
        dedup_key,
        aggregate_type,
        aggregate_id,
        destination,
        headers,
        payload,
        error,
        delivery_count,
        first_failed_at,
        last_failed_at,
    ) = row;
    let delivery_count = u32::try_from(delivery_count).map_err(|_| Error::CorruptRow {
        table: TABLE,
        detail: format!("delivery_count {delivery_count} of row {id}"),
    })?;
    Ok(DeadLetter {
        id,
        consumer,
        source,
        event_id,
        dedup_key,
        aggregate_type,
        aggregate_id,
        destination,
        headers: decode_headers(&headers)?,
        payload,
        error,
        delivery_count,
        first_failed_at: Timestamp(first_failed_at),
        last_failed_at: Timestamp(last_failed_at),
    })
}

impl<DB: Backend> Store<DB> {
    /// The dead letters of broker consumers (`idem_dead_letters`).
    pub fn dead_letters(&self) -> DeadLetters<DB> {
        DeadLetters::new(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_survive_the_json_column() {
        let headers = vec![
            ("Nats-Msg-Id".to_owned(), "evt_1".to_owned()),
            ("x-note".to_owned(), "quote \" and\nnewline".to_owned()),
            ("Nats-Msg-Id".to_owned(), "repeated names stay".to_owned()),
        ];
        assert_eq!(decode_headers(&encode_headers(&headers)).unwrap(), headers);
        assert!(matches!(
            decode_headers("{\"a\":1}"),
            Err(Error::CorruptRow { .. })
        ));
    }
}

//! The batched claim and outcome statements on every database: which rows a batch takes, and
//! that a holder whose claim lapsed and was taken over writes nothing.

use idem_sql::Store;

use super::{AttemptOutcome, DeliveryState, Finished, GatewayDb, NewDelivery, NewEvent};

const DESTINATION: &str = "app";

/// A Stripe event `id` (also its dedup key) with no entity, received at `received_at` (ms).
fn stripe_event(id: &str, received_at: i64) -> NewEvent<'_> {
    NewEvent {
        source: "stripe",
        event_id: id,
        dedup_key: id,
        event_type: None,
        aggregate_type: None,
        aggregate_id: None,
        version: None,
        version_secondary: None,
        body: b"{}",
        headers: "{}",
        received_at,
        traceparent: None,
        tracestate: None,
        filtered_routes: None,
    }
}

/// Three pending deliveries due at 0 on a fresh gateway schema (three events inserted in one
/// statement); their ids, ascending.
async fn three_due<DB: GatewayDb>(store: &Store<DB>) -> Vec<i64> {
    DB::migrate_gateway(store.pool()).await.expect("migrate");
    let mut tx = store.begin().await.expect("begin");
    let ids: Vec<String> = (0..3).map(|n| format!("evt_{n}")).collect();
    let events: Vec<NewEvent<'_>> = ids.iter().map(|id| stripe_event(id, 0)).collect();
    let rows = DB::insert_events(&mut tx, &events)
        .await
        .expect("insert events");
    let deliveries: Vec<NewDelivery<'_>> = rows
        .into_iter()
        .map(|event| NewDelivery {
            event: event.expect("a new event"),
            route: "r",
            destination: DESTINATION,
            state: DeliveryState::Pending,
            entity: None,
            version: None,
            version_secondary: None,
            tie: false,
            note: None,
            now: 0,
            claimed_until: None,
        })
        .collect();
    DB::insert_deliveries(&mut tx, &deliveries)
        .await
        .expect("insert deliveries");
    tx.commit().await.expect("commit");
    let mut conn = store.pool().acquire().await.expect("connection");
    let mut ids: Vec<i64> = DB::due(&mut conn, DESTINATION, 0, 10)
        .await
        .expect("due")
        .into_iter()
        .map(|d| d.id)
        .collect();
    ids.sort_unstable();
    assert_eq!(ids.len(), 3);
    ids
}

fn delivered(delivery: i64, token: i64, now: i64) -> Finished {
    Finished {
        delivery,
        source: "stripe".into(),
        route: "stripe-app".into(),
        entity: None,
        token,
        attempt: token,
        state: DeliveryState::Delivered,
        failures: 0,
        next_attempt_at: now,
        started_at: now,
        duration_ms: 1,
        status: Some(200),
        outcome: AttemptOutcome::Delivered,
        excerpt: "ok".into(),
        now,
    }
}

async fn claim<DB: GatewayDb>(
    store: &Store<DB>,
    ids: &[i64],
    until: i64,
    now: i64,
) -> Vec<(i64, i64)> {
    let mut tx = store.begin().await.expect("begin");
    let claimed = DB::start_attempts(&mut tx, ids, until, now)
        .await
        .expect("claim");
    tx.commit().await.expect("commit");
    claimed
}

async fn batch_claims_only_what_is_still_due<DB: GatewayDb>(store: Store<DB>) {
    let ids = three_due(&store).await;
    // Another holder took the middle one at 0, until 100.
    assert_eq!(claim(&store, &ids[1..2], 100, 0).await, vec![(ids[1], 1)]);
    // A batch read before that claim: the middle one is no longer due at 10.
    assert_eq!(
        claim(&store, &ids, 110, 10).await,
        vec![(ids[0], 1), (ids[2], 1)]
    );
    // Past the middle one's lease (100), before the others' (110): it alone is due again, with
    // the next token.
    assert_eq!(claim(&store, &ids, 200, 105).await, vec![(ids[1], 2)]);
}

async fn a_lapsed_holder_writes_nothing<DB: GatewayDb>(store: Store<DB>) {
    let ids = three_due(&store).await;
    claim(&store, &ids, 100, 0).await;
    // The first holder's claim on ids[0] lapsed at 100; a second holder took it (token 2).
    assert_eq!(claim(&store, &ids[..1], 300, 150).await, vec![(ids[0], 2)]);
    // The first holder's outcomes for all three arrive in one batch.
    let rows: Vec<Finished> = ids.iter().map(|id| delivered(*id, 1, 160)).collect();
    let refs: Vec<&Finished> = rows.iter().collect();
    let mut tx = store.begin().await.expect("begin");
    let written = DB::finish_attempts(&mut tx, &refs).await.expect("finish");
    tx.commit().await.expect("commit");
    assert_eq!(written, vec![ids[1], ids[2]]);
    let mut conn = store.pool().acquire().await.expect("connection");
    // ids[0] is still the second holder's: in flight, and no attempt row of the first.
    assert!(
        DB::attempts_of(&mut conn, ids[0])
            .await
            .expect("attempts")
            .is_empty()
    );
    for id in &ids[1..] {
        let attempts = DB::attempts_of(&mut conn, *id).await.expect("attempts");
        assert_eq!(attempts.len(), 1);
        assert_eq!(attempts[0].attempt, 1);
        assert_eq!(attempts[0].status, Some(200));
    }
    let mut tx = store.begin().await.expect("begin");
    let written = DB::finish_attempts(&mut tx, &[&delivered(ids[0], 2, 170)])
        .await
        .expect("finish");
    tx.commit().await.expect("commit");
    assert_eq!(written, vec![ids[0]]);
    let attempts = DB::attempts_of(&mut conn, ids[0]).await.expect("attempts");
    assert_eq!(
        attempts.iter().map(|a| a.attempt).collect::<Vec<_>>(),
        vec![2]
    );
}

#[tokio::test]
async fn sqlite_batch_claims_only_what_is_still_due() {
    let (_dir, store) = idem_testkit::sqlite_store().await;
    batch_claims_only_what_is_still_due(store).await;
}

#[tokio::test]
async fn postgres_batch_claims_only_what_is_still_due() {
    let store = Store::connect(&idem_testkit::pg_database().await)
        .await
        .expect("connect");
    batch_claims_only_what_is_still_due::<sqlx::Postgres>(store).await;
}

#[tokio::test]
async fn sqlite_a_lapsed_holder_writes_nothing() {
    let (_dir, store) = idem_testkit::sqlite_store().await;
    a_lapsed_holder_writes_nothing(store).await;
}

#[tokio::test]
async fn postgres_a_lapsed_holder_writes_nothing() {
    let store = Store::connect(&idem_testkit::pg_database().await)
        .await
        .expect("connect");
    a_lapsed_holder_writes_nothing::<sqlx::Postgres>(store).await;
}

/// An event whose key is stored already gets `None` in its own place, whatever the order the
/// database returns the others' ids in.
async fn a_stored_event_is_none_in_its_place<DB: GatewayDb>(store: Store<DB>) {
    three_due(&store).await;
    let ids = ["evt_3", "evt_1", "evt_4"];
    let events: Vec<NewEvent<'_>> = ids.iter().map(|id| stripe_event(id, 1)).collect();
    let mut tx = store.begin().await.expect("begin");
    let rows = DB::insert_events(&mut tx, &events).await.expect("insert");
    tx.commit().await.expect("commit");
    let mut conn = store.pool().acquire().await.expect("connection");
    assert!(rows[1].is_none(), "evt_1 was stored by three_due: {rows:?}");
    for (row, id) in [(rows[0], "evt_3"), (rows[2], "evt_4")] {
        let stored = DB::find_event(&mut conn, "stripe", id)
            .await
            .expect("find")
            .expect("stored");
        assert_eq!(row, Some(stored.id), "{id}");
    }
}

#[tokio::test]
async fn sqlite_a_stored_event_is_none_in_its_place() {
    let (_dir, store) = idem_testkit::sqlite_store().await;
    a_stored_event_is_none_in_its_place(store).await;
}

#[tokio::test]
async fn postgres_a_stored_event_is_none_in_its_place() {
    let store = Store::connect(&idem_testkit::pg_database().await)
        .await
        .expect("connect");
    a_stored_event_is_none_in_its_place::<sqlx::Postgres>(store).await;
}

/// A MySQL store on a fresh database of this test process.
async fn mysql_store() -> Store<sqlx::MySql> {
    Store::connect(&idem_testkit::mysql_database().await)
        .await
        .expect("connect")
}

#[tokio::test]
async fn mysql_batch_claims_only_what_is_still_due() {
    batch_claims_only_what_is_still_due(mysql_store().await).await;
}

#[tokio::test]
async fn mysql_a_lapsed_holder_writes_nothing() {
    a_lapsed_holder_writes_nothing(mysql_store().await).await;
}

#[tokio::test]
async fn mysql_a_stored_event_is_none_in_its_place() {
    a_stored_event_is_none_in_its_place(mysql_store().await).await;
}

/// Event ids that differ only in case or in a trailing space are three events, each found by
/// its own id: keys compare byte for byte (on MySQL the default collations would make them one).
async fn ids_differing_in_case_or_trailing_space_are_distinct<DB: GatewayDb>(store: Store<DB>) {
    DB::migrate_gateway(store.pool()).await.expect("migrate");
    let ids = ["evt_a", "evt_A", "evt_a "];
    let events: Vec<NewEvent<'_>> = ids.iter().map(|id| stripe_event(id, 1)).collect();
    let mut tx = store.begin().await.expect("begin");
    let rows = DB::insert_events(&mut tx, &events).await.expect("insert");
    tx.commit().await.expect("commit");
    assert!(rows.iter().all(Option::is_some), "{rows:?}");
    let mut conn = store.pool().acquire().await.expect("connection");
    for (row, id) in rows.iter().zip(ids) {
        let stored = DB::find_event(&mut conn, "stripe", id)
            .await
            .expect("find")
            .expect("stored");
        assert_eq!((*row, stored.event_id.as_str()), (Some(stored.id), id));
    }
}

#[tokio::test]
async fn sqlite_ids_differing_in_case_or_trailing_space_are_distinct() {
    let (_dir, store) = idem_testkit::sqlite_store().await;
    ids_differing_in_case_or_trailing_space_are_distinct(store).await;
}

#[tokio::test]
async fn postgres_ids_differing_in_case_or_trailing_space_are_distinct() {
    let store = Store::connect(&idem_testkit::pg_database().await)
        .await
        .expect("connect");
    ids_differing_in_case_or_trailing_space_are_distinct::<sqlx::Postgres>(store).await;
}

#[tokio::test]
async fn mysql_ids_differing_in_case_or_trailing_space_are_distinct() {
    ids_differing_in_case_or_trailing_space_are_distinct(mysql_store().await).await;
}

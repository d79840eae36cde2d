//! [`handler!`](crate::handler): an async closure as a boxed handler that other tasks can run.
//!
//! The broker consumers, the Kafka processor and the effect worker's apply hook keep their
//! handler boxed, as `for<'t> Fn(&'t mut Transaction, &'t M) -> BoxFuture<'t, Result<T, Error>>`,
//! and run it on tasks of their own, so its future must be `Send`. Stable Rust cannot yet require
//! that of an async closure in a generic bound (it needs return type notation), and the boxing
//! that proves it must therefore be written where the closure's type is known: in the caller's
//! code, which is what the macro writes there.

use std::sync::Arc;

use sqlx::{Database, Transaction};

use crate::{BoxFuture, Error, HandlerError};

/// A boxed handler of an item `M` (a broker delivery, a Kafka message, an applied effect), as the
/// consumers keep it: what [`handler!`](crate::handler) makes.
pub type BoxedHandler<DB, M, T = ()> = Box<
    dyn for<'t> Fn(&'t mut Transaction<'static, DB>, &'t M) -> BoxFuture<'t, Result<T, Error>>
        + Send
        + Sync,
>;

/// Turns an async closure `async move |tx, item: &Item| { … }` into the boxed handler that the
/// broker consumers (`idem_broker::Processor::new`), the Kafka processor
/// (`idem_broker::KafkaProcessor::new`) and [`EffectWorker::apply`](crate::EffectWorker::apply)
/// take: a [`BoxedHandler`].
///
/// Inside, the closure is written as a handler of [`Runner::run`](crate::Runner::run): `tx` is
/// the transaction's connection, passed as `&mut *tx` to sqlx and to idem's writes, and `?`
/// converts any error into a [`HandlerError`]. Because the handler outlives the call that makes
/// it, the closure is `async move` and owns what it captures (once: each run borrows it). Name
/// the item's type (`delivery: &Delivery`): the macro cannot infer it before the closure's body
/// is checked.
///
/// ```no_run
/// use idem_sql::sqlx;
/// use idem_sql::{Applied, CallOutcome, EffectCall, EffectWorker, SqliteStore};
///
/// # async fn f(store: SqliteStore) {
/// let note = String::from("sent by the worker");
/// let worker = EffectWorker::new(store.clone(), |call: EffectCall| async move {
///     CallOutcome::Succeeded(call.request)
/// })
/// .apply(idem_sql::handler!(async move |tx, applied: &Applied| {
///     // runs in the transaction that stores the provider's answer; `note` is the closure's
///     // own, borrowed by each run
///     sqlx::query("INSERT INTO receipts (effect_key, note) VALUES ($1, $2)")
///         .bind(applied.key.as_str())
///         .bind(&note)
///         .execute(&mut *tx)
///         .await?;
///     Ok(())
/// }));
/// # }
/// ```
#[macro_export]
macro_rules! handler {
    ($handler:expr $(,)?) => {
        $crate::__boxed_handler($handler, |handler, tx, item| {
            ::std::boxed::Box::pin(async move {
                ::std::result::Result::map_err(
                    (*handler)(&mut **tx, item).await,
                    ::std::convert::Into::into,
                )
            })
        })
    };
}

/// What the macro writes in the caller's code: calls the handler it is given and boxes the
/// future.
type Boxer<DB, M, T, H> =
    for<'t> fn(Arc<H>, &'t mut Transaction<'static, DB>, &'t M) -> BoxFuture<'t, Result<T, Error>>;

/// The generic half of [`handler!`](crate::handler): keeps `handler` and calls `boxer`, which the
/// macro wrote in the caller's code, where the future's `Send` can be proven.
#[doc(hidden)]
pub fn boxed_handler<DB, C, M, T, H>(
    handler: H,
    boxer: Boxer<DB, M, T, H>,
) -> BoxedHandler<DB, M, T>
where
    DB: Database,
    M: ?Sized + 'static,
    T: 'static,
    H: AsyncFn(&mut C, &M) -> Result<T, HandlerError> + Send + Sync + 'static,
{
    let handler = Arc::new(handler);
    Box::new(move |tx, item| boxer(Arc::clone(&handler), tx, item))
}

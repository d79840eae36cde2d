//! The shape of the public API: the handles an application shares between tasks are `Clone`
//! (and `Send + Sync`) for every database. Checked at compile time: a regression fails the build
//! of this suite.

use idem_sql::sqlx::{MySql, Postgres, Sqlite};
use idem_sql::{Inbox, LeaseStore, Runner, Store, VersionGuard};

fn shareable<T: Clone + Send + Sync + 'static>() {}

#[test]
fn shared_handles_are_clone_send_and_sync_for_every_database() {
    shareable::<Store<Sqlite>>();
    shareable::<Store<Postgres>>();
    shareable::<Runner<Sqlite>>();
    shareable::<Runner<Postgres>>();
    shareable::<Inbox<Sqlite>>();
    shareable::<Inbox<Postgres>>();
    shareable::<VersionGuard<Sqlite>>();
    shareable::<VersionGuard<Postgres>>();
    shareable::<LeaseStore<Sqlite>>();
    shareable::<LeaseStore<Postgres>>();
    shareable::<Store<MySql>>();
    shareable::<Runner<MySql>>();
    shareable::<Inbox<MySql>>();
    shareable::<VersionGuard<MySql>>();
    shareable::<LeaseStore<MySql>>();
}

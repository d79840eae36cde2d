//! Dispatch's transactions on MySQL run on the store's pool: durability is the server's
//! (`innodb_flush_log_at_trx_commit`), with no per-connection or per-transaction setting.

use sqlx::{MySql, Pool};

use crate::store::relaxed::ops::RelaxedOps;

impl RelaxedOps for MySql {
    fn relaxed_pool(_: &Pool<Self>) -> Option<Pool<Self>> {
        None
    }
}

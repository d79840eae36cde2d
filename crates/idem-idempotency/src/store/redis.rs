//! The store on Redis: Lua scripts for claim (and takeover), completion and release, each
//! checking the fencing token.
//!
//! # Keys
//!
//! For a scope (principal, key) the store uses two Redis keys, named by the SHA-256 of the
//! length-prefixed principal followed by the key (so no two scopes share a name, and any bytes
//! are safe in a name), inside a hash tag so that both live in one cluster slot:
//!
//! - `{prefix}:{digest}:rec`, a hash: `state` (`running` or `completed`), `token`,
//!   `expires_at` (ms), `fingerprint`, `response` (a [`StoredResponse`] when completed), and
//!   `principal` and `key` as separate fields for operators. It expires (`PEXPIRE`) after the
//!   retention, counted from the claim and again from the completion; a release deletes it.
//! - `{prefix}:{digest}:tok`, the fencing-token counter (`INCR`), which outlives the record
//!   (twice the retention, renewed on claim and completion), so that a claim after a release or
//!   after the record expired gets a token no earlier holder has.
//!
//! Times are passed to the scripts from the store's clock ([`RedisStore::with_clock`]); only the
//! records' expiry uses the Redis server's clock.
//!
//! # Persistence
//!
//! Completed records survive a Redis restart only with AOF persistence (`appendonly yes`, and
//! `appendfsync always` to lose none): with RDB snapshots or none, a restart forgets the records
//! written since the last snapshot, and a retry of such a request runs its handler again. Redis
//! offers no transaction shared with the application's database, so transactional mode is
//! SQL-only.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use idem_core::{Clock, FencingToken, RetentionPolicy, SystemClock, Timestamp, Ttl};
use redis::aio::ConnectionManager;
use redis::{RedisError, Script, Value};
use sha2::{Digest, Sha256};

use super::{BoxFuture, Claim, IdempotencyStore, Scope};
use crate::error::StoreError;
use crate::fingerprint::Fingerprint;
use crate::record::StoredResponse;
use crate::store::DEFAULT_RETENTION;

/// KEYS: record, counter. ARGV: fingerprint, now (ms), lease (ms), retention (ms), principal,
/// key. A live or completed record is never changed.
const CLAIM: &str = r"
local rec, tok = KEYS[1], KEYS[2]
local now, lease, retention = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local f = redis.call('HMGET', rec, 'state', 'expires_at', 'fingerprint')
local state, expires_at, fp = f[1], tonumber(f[2]), f[3]
if state == 'completed' or (state == 'running' and expires_at > now) then
  if fp ~= ARGV[1] then return {'mismatch'} end
  if state == 'completed' then return {'completed', redis.call('HGET', rec, 'response')} end
  return {'in_progress', expires_at}
end
local token = redis.call('INCR', tok)
redis.call('PEXPIRE', tok, 2 * retention)
redis.call('DEL', rec)
redis.call('HSET', rec, 'state', 'running', 'token', token, 'expires_at', now + lease,
  'fingerprint', ARGV[1], 'principal', ARGV[5], 'key', ARGV[6])
redis.call('PEXPIRE', rec, retention)
return {'acquired', token, now + lease}
";

/// KEYS: record, counter. ARGV: token, response, retention (ms).
const COMPLETE: &str = r"
local f = redis.call('HMGET', KEYS[1], 'state', 'token')
if f[1] ~= 'running' or f[2] ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'state', 'completed', 'response', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('PEXPIRE', KEYS[2], 2 * tonumber(ARGV[3]))
return 1
";

/// KEYS: record. ARGV: token.
const RELEASE: &str = r"
local f = redis.call('HMGET', KEYS[1], 'state', 'token')
if f[1] ~= 'running' or f[2] ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
return 1
";

/// Idempotency records on Redis (see the [module documentation](self) for the keys, the
/// scripts and persistence). Cheap to clone.
#[derive(Clone)]
pub struct RedisStore {
    conn: ConnectionManager,
    prefix: String,
    retention: Duration,
    clock: Arc<dyn Clock>,
    scripts: Arc<Scripts>,
}

struct Scripts {
    claim: Script,
    complete: Script,
    release: Script,
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field("prefix", &self.prefix)
            .field("retention", &self.retention)
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}

impl RedisStore {
    /// Keeps records under key names starting with `prefix` (for example `"myapp:idem"`),
    /// through `conn` (which reconnects by itself), for [`DEFAULT_RETENTION`], with the system
    /// clock.
    pub fn new(conn: ConnectionManager, prefix: impl Into<String>) -> Self {
        Self {
            conn,
            prefix: prefix.into(),
            retention: DEFAULT_RETENTION,
            clock: Arc::new(SystemClock),
            scripts: Arc::new(Scripts {
                claim: Script::new(CLAIM),
                complete: Script::new(COMPLETE),
                release: Script::new(RELEASE),
            }),
        }
    }

    /// Connects to `url` (`redis://127.0.0.1:6379`) and keeps records under `prefix`.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when the URL is malformed or the server cannot be reached.
    pub async fn connect(url: &str, prefix: impl Into<String>) -> Result<Self, StoreError> {
        let client = redis::Client::open(url).map_err(unavailable)?;
        let conn = ConnectionManager::new(client).await.map_err(unavailable)?;
        Ok(Self::new(conn, prefix))
    }

    /// Keeps records for `policy.keep()` (at least 1 ms): a policy made with
    /// [`RetentionPolicy::new`], which refuses a retention shorter than the time over which your
    /// clients retry (docs/design.md C9). Redis deletes them by itself when it elapses.
    pub fn retention(self, policy: &RetentionPolicy) -> Self {
        Self {
            retention: policy.keep().max(Duration::from_millis(1)),
            ..self
        }
    }

    /// The same store reading time from `clock` (a [`ManualClock`](idem_core::ManualClock) in
    /// tests) for lease expiry.
    pub fn with_clock(self, clock: Arc<dyn Clock>) -> Self {
        Self { clock, ..self }
    }

    /// The names of the record and the token counter of `scope`, in that order.
    pub fn key_names(&self, scope: &Scope) -> (String, String) {
        let principal = scope.principal().as_str().as_bytes();
        let mut hash = Sha256::new();
        hash.update((principal.len() as u64).to_be_bytes());
        hash.update(principal);
        hash.update(scope.key().as_str().as_bytes());
        let digest: String = hash.finalize().iter().map(|b| format!("{b:02x}")).collect();
        (
            format!("{}:{{{digest}}}:rec", self.prefix),
            format!("{}:{{{digest}}}:tok", self.prefix),
        )
    }

    fn retention_ms(&self) -> u64 {
        u64::try_from(self.retention.as_millis()).unwrap_or(u64::MAX / 4)
    }

    async fn claim_scope(
        &self,
        scope: &Scope,
        fingerprint: &Fingerprint,
        lease: Ttl,
    ) -> Result<Claim, StoreError> {
        let (rec, tok) = self.key_names(scope);
        let reply: Vec<Value> = self
            .scripts
            .claim
            .key(rec)
            .key(tok)
            .arg(fingerprint.as_bytes().as_slice())
            .arg(self.clock.now().as_millis())
            .arg(lease.as_millis())
            .arg(self.retention_ms())
            .arg(scope.principal().as_str())
            .arg(scope.key().as_str())
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(redis_error)?;
        let bad = || StoreError::Backend("unexpected reply from the claim script".into());
        let int = |v: Option<&Value>| match v {
            Some(Value::Int(n)) => Ok(*n),
            _ => Err(bad()),
        };
        match reply.first() {
            Some(Value::BulkString(s)) if s == b"acquired" => Ok(Claim::Acquired {
                token: FencingToken(int(reply.get(1))?),
                expires_at: Timestamp(int(reply.get(2))?),
            }),
            Some(Value::BulkString(s)) if s == b"in_progress" => Ok(Claim::InProgress {
                until: Timestamp(int(reply.get(1))?),
            }),
            Some(Value::BulkString(s)) if s == b"completed" => match reply.get(1) {
                Some(Value::BulkString(record)) => {
                    Ok(Claim::Completed(StoredResponse::decode(record)?))
                }
                _ => Err(bad()),
            },
            Some(Value::BulkString(s)) if s == b"mismatch" => Ok(Claim::Mismatch),
            _ => Err(bad()),
        }
    }

    async fn fenced(&self, invocation: redis::ScriptInvocation<'_>) -> Result<(), StoreError> {
        let done: i64 = invocation
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(redis_error)?;
        if done == 1 {
            Ok(())
        } else {
            Err(StoreError::Fenced)
        }
    }
}

impl IdempotencyStore for RedisStore {
    fn claim<'a>(
        &'a self,
        scope: &'a Scope,
        fingerprint: &'a Fingerprint,
        lease: Ttl,
    ) -> BoxFuture<'a, Result<Claim, StoreError>> {
        Box::pin(self.claim_scope(scope, fingerprint, lease))
    }

    fn complete<'a>(
        &'a self,
        scope: &'a Scope,
        token: FencingToken,
        response: &'a StoredResponse,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let (rec, tok) = self.key_names(scope);
            let mut invocation = self.scripts.complete.key(rec);
            invocation
                .key(tok)
                .arg(token.0)
                .arg(response.encode())
                .arg(self.retention_ms());
            self.fenced(invocation).await
        })
    }

    fn release<'a>(
        &'a self,
        scope: &'a Scope,
        token: FencingToken,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let (rec, _) = self.key_names(scope);
            let mut invocation = self.scripts.release.key(rec);
            invocation.arg(token.0);
            self.fenced(invocation).await
        })
    }

    fn now(&self) -> Timestamp {
        self.clock.now()
    }
}

fn unavailable(e: RedisError) -> StoreError {
    StoreError::Unavailable(e.into())
}

fn redis_error(e: RedisError) -> StoreError {
    if e.is_io_error() || e.is_timeout() || e.is_connection_dropped() || e.is_connection_refusal() {
        StoreError::Unavailable(e.into())
    } else {
        StoreError::Backend(e.into())
    }
}

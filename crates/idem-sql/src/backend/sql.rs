//! SQL text shared by both backends. Parameters use `$N`, which sqlx binds by number on SQLite
//! and PostgreSQL alike. Times are milliseconds since the Unix epoch from the store's clock.

/// The claim (docs/design.md C1): an INSERT that does nothing on conflict. One row affected = fresh.
pub(crate) const CLAIM: &str = "INSERT INTO idem_inbox (consumer, dedup_key, processed_at) \
     VALUES ($1, $2, $3) ON CONFLICT (consumer, dedup_key) DO NOTHING";

/// Whether a key was committed to the inbox: read-only, for the runner's duplicate pre-check.
pub(crate) const IS_CLAIMED: &str =
    "SELECT 1 FROM idem_inbox WHERE consumer = $1 AND dedup_key = $2";

pub(crate) const INSERT_VERSION: &str = "INSERT INTO idem_versions \
     (consumer, aggregate_type, aggregate_id, version_kind, version, version_secondary, dedup_key, updated_at) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
     ON CONFLICT (consumer, aggregate_type, aggregate_id) DO NOTHING";

pub(crate) const UPDATE_VERSION: &str = "UPDATE idem_versions \
     SET version_kind = $4, version = $5, version_secondary = $6, dedup_key = $7, updated_at = $8 \
     WHERE consumer = $1 AND aggregate_type = $2 AND aggregate_id = $3";

/// Many version rows at once, one `VALUES` row each (the columns of [`INSERT_VERSION`]),
/// followed by [`INSERT_VERSIONS_END`]: the entities that had no row get one.
pub(crate) const INSERT_VERSIONS: &str = "INSERT INTO idem_versions \
     (consumer, aggregate_type, aggregate_id, version_kind, version, version_secondary, dedup_key, updated_at) ";

/// The rows inserted come back by entity; an entity that already had a row is left alone.
pub(crate) const INSERT_VERSIONS_END: &str = " ON CONFLICT (consumer, aggregate_type, aggregate_id) DO NOTHING \
     RETURNING aggregate_type, aggregate_id";

/// The stored versions of one consumer's entities: followed by the consumer, then
/// [`LOAD_VERSIONS_IN`], a `VALUES` list of `(aggregate_type, aggregate_id)` and
/// [`LOAD_VERSIONS_END`].
pub(crate) const LOAD_VERSIONS: &str = "SELECT aggregate_type, aggregate_id, version_kind, version, \
     version_secondary, dedup_key FROM idem_versions WHERE consumer = ";

pub(crate) const LOAD_VERSIONS_IN: &str = " AND (aggregate_type, aggregate_id) IN (";

/// In key order, so that two transactions lock the rows they share in one order.
pub(crate) const LOAD_VERSIONS_END: &str = ") ORDER BY aggregate_type, aggregate_id";

/// New versions of existing rows, one `VALUES` row each (the columns of [`INSERT_VERSION`]),
/// followed by [`UPDATE_VERSIONS_END`]. `VALUES` columns are `column1`… on both databases.
pub(crate) const UPDATE_VERSIONS: &str = "UPDATE idem_versions AS v \
     SET version_kind = w.column4, version = w.column5, version_secondary = w.column6, \
         dedup_key = w.column7, updated_at = w.column8 \
     FROM (";

pub(crate) const UPDATE_VERSIONS_END: &str = ") AS w \
     WHERE v.consumer = w.column1 AND v.aggregate_type = w.column2 AND v.aggregate_id = w.column3";

/// Takes a lease that is free: absent, released, or running past its expiry ($3 = now, $4 = ttl,
/// $5 = the request's fingerprint, which the new holder's request replaces). A live or completed
/// lease is left alone and no row is returned.
pub(crate) const ACQUIRE_LEASE: &str = "INSERT INTO idem_leases \
     (scope, lease_key, token, state, expires_at, record, fingerprint, takeover, updated_at) \
     VALUES ($1, $2, 1, 'running', $3 + $4, NULL, $5, FALSE, $3) \
     ON CONFLICT (scope, lease_key) DO UPDATE SET \
         token = idem_leases.token + 1, state = 'running', expires_at = excluded.expires_at, \
         record = NULL, fingerprint = excluded.fingerprint, \
         takeover = (idem_leases.state = 'running'), updated_at = excluded.updated_at \
     WHERE idem_leases.state = 'released' \
        OR (idem_leases.state = 'running' AND idem_leases.expires_at <= excluded.updated_at) \
     RETURNING token, expires_at, takeover";

pub(crate) const LOAD_LEASE: &str = "SELECT state, expires_at, record, fingerprint FROM idem_leases \
     WHERE scope = $1 AND lease_key = $2";

/// Fenced writes: each matches only the holder's current token on a running lease.
pub(crate) const COMPLETE_LEASE: &str = "UPDATE idem_leases \
     SET state = 'completed', record = $4, updated_at = $5 \
     WHERE scope = $1 AND lease_key = $2 AND token = $3 AND state = 'running'";

pub(crate) const RELEASE_LEASE: &str = "UPDATE idem_leases \
     SET state = 'released', record = NULL, updated_at = $4 \
     WHERE scope = $1 AND lease_key = $2 AND token = $3 AND state = 'running'";

/// Renews a live lease only ($4 = now, $5 = ttl).
pub(crate) const EXTEND_LEASE: &str = "UPDATE idem_leases \
     SET expires_at = $4 + $5, updated_at = $4 \
     WHERE scope = $1 AND lease_key = $2 AND token = $3 AND state = 'running' AND expires_at > $4 \
     RETURNING expires_at";

pub(crate) const PARKED_SINCE: &str =
    "SELECT first_seen FROM idem_parked WHERE consumer = $1 AND dedup_key = $2";

pub(crate) const PARK: &str = "INSERT INTO idem_parked (consumer, dedup_key, first_seen) \
     VALUES ($1, $2, $3) ON CONFLICT (consumer, dedup_key) DO NOTHING";

/// Retention deletes in batches of $2 rows older than $1 (C9): processed inbox keys; leases
/// completed or released before the cutoff, or running but expired before it (`expires_at` is never
/// before `updated_at`, so the `updated_at` index serves both); parked markers. Version rows
/// are never deleted.
pub(crate) const GC_INBOX: &str = "DELETE FROM idem_inbox WHERE (consumer, dedup_key) IN \
     (SELECT consumer, dedup_key FROM idem_inbox WHERE processed_at < $1 LIMIT $2)";

pub(crate) const GC_LEASES: &str = "DELETE FROM idem_leases WHERE (scope, lease_key) IN \
     (SELECT scope, lease_key FROM idem_leases \
      WHERE updated_at < $1 AND (state <> 'running' OR expires_at < $1) \
      LIMIT $2)";

pub(crate) const GC_PARKED: &str = "DELETE FROM idem_parked WHERE (consumer, dedup_key) IN \
     (SELECT consumer, dedup_key FROM idem_parked WHERE first_seen < $1 LIMIT $2)";

//! Configuration reload: `SIGHUP` to `idem serve`, `POST /admin/reload`, or
//! [`ReloadHandle::reload`] read the configuration file again and apply a closed list of changes
//! while the server runs — routes (their filters and `event_types` included), new webhook
//! sources and their secrets, new, changed and removed destinations (URL, TLS files, rate
//! limit, timeout, retry schedule, concurrency, signing secret, health) — and refuse anything
//! else by key (a route rename, whose rows move at start, included), logging why and keeping the running configuration (docs/gateway.md, "Reload").
//!
//! The configuration, the lanes and the route indices are swapped as one
//! ([`Wiring`](crate::wiring::Wiring)): an ingest batch commits under one configuration, and a
//! request filtered under the one before is filtered again. A changed destination's dispatcher
//! finishes and records the attempts it has in flight before a new one starts with the new
//! settings; deliveries claimed meanwhile wait for their claim to lapse, as after a restart,
//! and go under the same `Idempotency-Key`: nothing is lost or sent twice at once (C4).

mod apply;
mod plan;

use tokio::sync::watch;

use crate::gateway::Gateway;
use crate::reload_request::{ReloadHandle, channel};
use crate::store::GatewayDb;
use crate::supervise::Supervisor;

/// Starts the task that applies reloads one at a time until `stopped`, and returns the handle
/// that asks it.
pub(crate) fn serve<DB: GatewayDb>(
    gateway: &Gateway<DB>,
    supervisor: std::sync::Arc<Supervisor<DB>>,
    mut stopped: watch::Receiver<bool>,
) -> ReloadHandle {
    let (handle, mut asked) = channel();
    let gateway = gateway.clone();
    tokio::spawn(async move {
        loop {
            let reply = tokio::select! {
                Some(reply) = asked.recv() => reply,
                _ = stopped.wait_for(|s| *s) => return,
                else => return,
            };
            let result = apply::reload(&gateway, &supervisor).await;
            let _ = reply.send(result);
        }
    });
    handle
}

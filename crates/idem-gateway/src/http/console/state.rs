//! What every console handler shares: the gateway, the sign-in limiter and the console's
//! paths. Its own module, so that the pages and the router in `mod.rs` both import it and
//! no page imports the router.

use std::sync::Arc;

use super::rate_limit::SignInLimiter;
use crate::gateway::Gateway;
use crate::store::GatewayDb;

/// The console's path prefix.
pub const PREFIX: &str = "/console";
/// The sign-in page, where every request without a session is sent.
pub const SIGN_IN: &str = "/console/sign-in";

/// What every console handler shares.
pub(crate) struct Console<DB: GatewayDb> {
    pub(crate) gateway: Gateway<DB>,
    pub(crate) limiter: SignInLimiter,
}

/// Shared state of the console's handlers.
pub(crate) type State<DB> = Arc<Console<DB>>;

//! The console's pages, one file each.

pub(crate) mod config;
pub(crate) mod consumers;
pub(crate) mod dead_letters;
pub(crate) mod event;
pub(crate) mod events;
pub(crate) mod overview;
pub(crate) mod range;
pub(crate) mod rebuild;
pub(crate) mod replay;
pub(crate) mod resend;

/// The replay page, which also holds the rebuild form (`rebuild`).
pub(crate) const REPLAY_PATH: &str = "/console/replay";

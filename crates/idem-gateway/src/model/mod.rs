//! The gateway's vocabulary: the words and values every other layer speaks (delivery states,
//! per-minute counts, an event's fields, forwarded headers, the version guard's notes, times).
//! It imports nothing else from the crate, so that storage, configuration and behaviour can all
//! build on it without tying a circle.

pub(crate) mod body_path;
pub mod counts;
pub(crate) mod fields;
pub(crate) mod forwarded;
pub(crate) mod guard_note;
pub(crate) mod health;
pub(crate) mod route_filter;
pub(crate) mod state;
pub(crate) mod text_enum;
pub mod time;

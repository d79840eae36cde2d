//! `idem verify` against the reference handlers: the verdict of each mode on each handler, the
//! minimal failing sequences and their replays, crash mode against a real restarted process,
//! and the runs it refuses because they would prove nothing.

mod crash_and_entity_order;
mod rebuild;
mod reference_handlers;
mod refusals;

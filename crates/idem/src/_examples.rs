//! # The examples, in full
//!
//! Each is a program in `crates/idem/examples/` that builds against this crate and public
//! crates only (`cargo test` builds them; CI runs them): copy one as the start of your own. They
//! are shown here as they are in the files.
//!
//! ## A webhook endpoint with axum
//!
//! `cargo run -p idem --example webhook_axum`: one handler per event, applied once however
//! often and in whatever order the event arrives; a permanent error answers 400, any other 500.
//!
#![doc = concat!("```rust,ignore\n", include_str!("../examples/webhook_axum.rs"), "```")]
//!
//! ## An effect with a real provider call
//!
//! `cargo run -p idem --example effect_provider`: a charge recorded in the handler's
//! transaction, made by an effect worker against an HTTP provider with the effect key as
//! `Idempotency-Key`, retried with the same key, and read back by a second code path.
//!
#![doc = concat!("```rust,ignore\n", include_str!("../examples/effect_provider.rs"), "```")]
//!
//! ## A NATS JetStream consumer
//!
//! `cargo run -p idem --example upgrade_consumer` (NATS with JetStream on 127.0.0.1:4222): a
//! consumer whose handler upgrades an account, records a receipt email as an effect and an
//! `account.upgraded` message in the outbox, in one transaction; an effect worker sends the
//! emails through a mail server that fails its first calls, and a relay publishes the outbox.
//!
#![doc = concat!("```rust,ignore\n", include_str!("../examples/upgrade_consumer.rs"), "```")]
//!
//! ## A Kafka consumer
//!
//! `cargo run -p idem --example kafka_consumer` (a Kafka-protocol broker on 127.0.0.1:19092):
//! deposits published twice at two offsets, credited once each; the inbox claim, the balance
//! and the partition's offset commit in one transaction.
//!
#![doc = concat!("```rust,ignore\n", include_str!("../examples/kafka_consumer.rs"), "```")]
//!
//! ## Stripe's events, shuffled and repeated
//!
//! `cargo run -p idem --example stripe_events`: the 159 events of `testdata/stripe-events`,
//! each delivered one to three times in a shuffled order, checked against the expected state.
//!
#![doc = concat!("```rust,ignore\n", include_str!("../examples/stripe_events.rs"), "```")]

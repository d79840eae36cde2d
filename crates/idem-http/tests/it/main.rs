//! idem-http's integration tests: every scheme through its public verifier and signer.

mod freshness;
mod garbage;
mod generic_hmac;
mod github;
mod raw_bytes;
mod shopify;
mod standard_webhooks;
mod stripe;
mod support;

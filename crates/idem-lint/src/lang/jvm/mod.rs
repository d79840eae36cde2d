//! What the JVM languages' lowerings ([`java`](super::java) and [`kotlin`](super::kotlin))
//! share: Spring and JAX-RS annotations read as registrations and transactions
//! ([`annotation`]), bean accessors and builders ([`bean`]), Spring Data's derived query names ([`derived`]), the calls whose lambda runs in a transaction, later or elsewhere
//! ([`lambda`]), JPA entities' unique keys ([`entity`]) and dirty checking ([`dirty`]), self-invocation of a proxied
//! `@Transactional` method ([`proxy`]), `@SendTo` replies ([`reply`]), the types a class implements ([`supertypes`]) and the clients' vocabulary the checks read
//! ([`vocab`]).

pub(crate) mod annotation;
pub(crate) mod bean;
pub(crate) mod derived;
pub(crate) mod dirty;
pub(crate) mod entity;
pub(crate) mod lambda;
pub(crate) mod method;
pub(crate) mod proxy;
pub(crate) mod reply;
pub(crate) mod supertypes;
pub(crate) mod vocab;

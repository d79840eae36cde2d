//! The JVM languages, Java (`.java`) and Kotlin (`.kt`, `.kts`): two lowerings that share what
//! Spring, JAX-RS and JPA mean — annotations read as registrations and transactions
//! ([`annotation`]), the calls whose lambda runs in a transaction, later or elsewhere
//! ([`lambda`]), JPA entities' unique keys ([`entity`]), self-invocation of a proxied
//! `@Transactional` method ([`proxy`]) and the clients' vocabulary the checks read
//! ([`vocab`]).

mod annotation;
mod entity;
mod java;
mod kotlin;
mod lambda;
mod proxy;
pub(crate) mod vocab;

pub(crate) use java::Java;
pub(crate) use kotlin::Kotlin;

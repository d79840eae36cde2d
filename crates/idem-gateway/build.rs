//! `sqlx::migrate!` embeds the files of `migrations/` at compile time, and cargo does not know
//! they are inputs: without this, a new migration is left out of the build until some Rust
//! file of the crate changes (sqlx's documented build script).
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}

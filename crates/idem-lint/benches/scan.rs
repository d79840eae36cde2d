//! Placeholder until the scan bench lands.
fn main() {}

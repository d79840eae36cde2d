//! Report formats: text for people, JSON for scripts, SARIF 2.1.0 for code scanning.

mod json;
mod sarif;
mod text;

pub use json::to_json;
pub use sarif::to_sarif;
pub use text::to_text;

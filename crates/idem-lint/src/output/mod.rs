//! Report formats: text for people, JSON for scripts, SARIF 2.1.0 for code scanning; the
//! inventory as text, JSON or Markdown.

mod inventory_json;
mod inventory_table;
mod json;
mod sarif;
mod text;
mod utc_time;

pub use inventory_json::inventory_to_json;
pub use inventory_table::{inventory_to_markdown, inventory_to_text};
pub use json::to_json;
pub use sarif::to_sarif;
pub use text::to_text;

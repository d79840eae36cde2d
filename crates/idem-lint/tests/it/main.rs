//! idem-lint's integration tests: every fixture's exact findings, the command line as `idem
//! lint` runs it, SARIF 2.1.0 validity, and a doc page per rule.

mod allow;
mod call_chain;
mod cli;
mod docs;
mod fixtures;
mod inventory;
mod jvm_builds;
mod jvm_input;
mod sarif;
mod score;

//! Where ActiveJob keeps its jobs: `config.active_job.queue_adapter = :good_job` (in
//! `config/application.rb` or an environment file) names a backend that stores each job as a
//! row of the application's own database, so a `perform_later` inside a transaction commits
//! or rolls back with it. Sidekiq, Resque, Shoryuken and the rest send it elsewhere at once.

use tree_sitter::Node;

/// ActiveJob adapters that enqueue by inserting into the application's database. Solid Queue
/// is left out: Rails 8 gives it a database of its own by default.
const DATABASE_ADAPTERS: &[&str] = &["good_job", "delayed_job", "que", "queue_classic"];

/// Whether the file sets ActiveJob's adapter to one that stores jobs in the database.
pub(super) fn jobs_in_database(root: Node<'_>, source: &str) -> bool {
    let mut stack = vec![root];
    while let Some(n) = stack.pop() {
        if n.kind() == "assignment" && sets_database_adapter(n, source) {
            return true;
        }
        let mut cursor = n.walk();
        stack.extend(n.named_children(&mut cursor));
    }
    false
}

fn sets_database_adapter(n: Node<'_>, source: &str) -> bool {
    let text = |c: Node<'_>| c.utf8_text(source.as_bytes()).unwrap_or("");
    let (Some(left), Some(right)) = (
        n.child_by_field_name("left"),
        n.child_by_field_name("right"),
    ) else {
        return false;
    };
    text(left).ends_with("active_job.queue_adapter")
        && DATABASE_ADAPTERS.contains(&text(right).trim_start_matches(':'))
}

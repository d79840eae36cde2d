//! Code hosts' API clients (GitHub, GitLab: octocrab, a bot's own client): a method that
//! posts, creates or changes a comment, issue, label, milestone or review on the host is an
//! outside call that cannot be taken back, whatever the client's name.

use crate::ir::Call;
use crate::words::norm;

/// Verbs that change something on the host.
const VERBS: &[&str] = &[
    "post", "create", "update", "new", "add", "set", "edit", "close", "merge",
];

/// The host's objects.
const OBJECTS: &[&str] = &[
    "comment",
    "issue",
    "label",
    "milestone",
    "pullrequest",
    "review",
    "checkrun",
    "commitstatus",
    "reaction",
    "assignee",
];

/// Whether `call` writes to a code host: `gh.post_comment(n, body)`,
/// `client.update_comment_content(id, body)`, `github.new_issue(…)`, `set_milestone(…)`.
/// A method of the application's own repository or table (`issue_repo.create_issue(…)`,
/// `db.add_label(…)`) is the database's.
pub(crate) fn is_write(call: &Call) -> bool {
    let [receiver @ .., method] = call.callee.as_slice() else {
        return false;
    };
    let Some(last) = receiver.last().map(|r| norm(r)) else {
        return false;
    };
    let m = norm(method);
    let store = ["repo", "repository", "dao", "store", "model", "table"]
        .iter()
        .any(|s| last.ends_with(s))
        || receiver.iter().any(|r| {
            matches!(
                norm(r).as_str(),
                "db" | "database" | "tx" | "txn" | "conn" | "pool" | "transaction"
            )
        });
    !store && VERBS.iter().any(|v| m.starts_with(v)) && OBJECTS.iter().any(|o| m.contains(o))
}

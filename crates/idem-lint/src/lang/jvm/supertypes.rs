//! The types a class implements or extends (`class RedisEventDedupAdapter(…) :
//! EventDeduplicationPort`, `class PaymentServiceImpl implements PaymentService`), kept on
//! the module so that call following can take a field typed by an interface (`private val
//! dedupe: EventDeduplicationPort`) to the one class of the tree that implements it, whatever
//! that class is named.

use tree_sitter::Node;

/// A written type's simple name: `com.acme.Port<String>` → `Port`, `Port?` → `Port`,
/// `Base()` (a Kotlin superclass constructor call) → `Base`.
pub(crate) fn simple_name(written: &str) -> String {
    let t = written.split(['<', '(']).next().unwrap_or(written);
    let t = t.trim().trim_end_matches('?');
    t.rsplit('.').next().unwrap_or(t).trim().to_string()
}

/// The simple names of the types written under `node` whose kind is one of `kinds`, not
/// descending into them (a generic's arguments are no supertypes).
pub(crate) fn types_under(
    node: Node<'_>,
    kinds: &[&str],
    text: &dyn Fn(Node<'_>) -> String,
    out: &mut Vec<String>,
) {
    let mut cursor = node.walk();
    for c in node.named_children(&mut cursor) {
        if kinds.contains(&c.kind()) {
            let name = simple_name(&text(c));
            if !name.is_empty() {
                out.push(name);
            }
        } else {
            types_under(c, kinds, text, out);
        }
    }
}

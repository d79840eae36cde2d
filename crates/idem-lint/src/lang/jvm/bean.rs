//! Java beans and builders: `getEventId()` reads the property `eventId`, `setStatus(s)`
//! writes `status`, and a builder's or setter's one value is named by its method.

use crate::ir::Call;

/// The property of a bean accessor: `getEventId` → `eventId`, `isPaid` → `paid`,
/// `setStatus` → `status` (with `prefixes` `["set"]`).
pub(crate) fn accessor(name: &str, prefixes: &[&str]) -> Option<String> {
    prefixes.iter().find_map(|p| {
        let rest = name.strip_prefix(p)?;
        let mut chars = rest.chars();
        let first = chars.next().filter(char::is_ascii_uppercase)?;
        Some(first.to_ascii_lowercase().to_string() + chars.as_str())
    })
}

/// Names a builder's or a setter's one value by its method, as a keyword argument
/// (`RequestOptions.builder().setIdempotencyKey(key)`, Lombok's `Payment.builder().eventId(id)`).
pub(crate) fn name_builder_value(call: &mut Call) {
    let [value] = call.args.as_slice() else {
        return;
    };
    let name = call.callee.last().cloned().unwrap_or_default();
    let built = call
        .callee
        .iter()
        .any(|s| s == "builder" || s == "newBuilder");
    if let Some(key) = accessor(&name, &["set"]).or_else(|| built.then_some(name)) {
        let value = value.clone();
        call.kwargs.push((key, value));
    }
}

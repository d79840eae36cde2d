//! `--json` output of the list and show commands: the admin API's JSON, with every time (a
//! `…_at` field, milliseconds since the epoch there) written as RFC 3339 UTC with milliseconds,
//! as the listings show times.

use idem_gateway::time::format_time;
use serde::Serialize;
use serde_json::Value;

/// Prints `value` as pretty JSON with its times in RFC 3339.
pub(super) fn print(value: &impl Serialize) -> anyhow::Result<()> {
    let mut shown = serde_json::to_value(value)?;
    rfc3339_times(&mut shown);
    outln!("{}", serde_json::to_string_pretty(&shown)?)?;
    Ok(())
}

/// Writes every time of `value` (a `…_at` field: ms since the epoch, as `/admin` answers) as
/// RFC 3339 UTC with milliseconds.
fn rfc3339_times(value: &mut Value) {
    match value {
        Value::Object(fields) => {
            for (name, field) in fields.iter_mut() {
                match field.as_i64() {
                    Some(ms) if name.ends_with("_at") => *field = Value::from(format_time(ms)),
                    _ => rfc3339_times(field),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(rfc3339_times),
        _ => {}
    }
}

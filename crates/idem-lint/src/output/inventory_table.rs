//! The inventory as a table, for people (aligned text) and for a pull-request comment
//! (Markdown): one row per handler, then the registry join's three lists.

use std::fmt::Write;

use super::utc_time::utc;
use crate::inventory::{Handler, Inventory, RegistryJoin, RegistryRow};

const HEADER: [&str; 6] = [
    "handler", "function", "kind", "consumer", "marker", "verdict",
];

fn cells(h: &Handler) -> [String; 6] {
    [
        format!("{}:{}", h.path.display(), h.line),
        h.function.clone(),
        h.role.as_str().to_string(),
        h.consumer.as_ref().map_or_else(
            || "-".to_string(),
            |c| format!("{} ({})", c.name, c.source.as_str()),
        ),
        h.marker.as_str().to_string(),
        h.verdict.as_str().to_string(),
    ]
}

fn row_cells(r: &RegistryRow) -> [String; 4] {
    [
        r.consumer.clone(),
        r.kind.clone(),
        format!(
            "{}{}",
            if r.first_seen_exact {
                ""
            } else {
                "at or before "
            },
            utc(r.first_seen)
        ),
        utc(r.last_seen),
    ]
}

const ROW_HEADER: [&str; 4] = ["consumer", "kind", "first seen (UTC)", "last seen (UTC)"];

/// Rows as aligned text columns, two spaces apart.
fn aligned<const N: usize>(out: &mut String, header: [&str; N], rows: &[[String; N]]) {
    let mut width = header.map(str::len);
    for r in rows {
        for (w, c) in width.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut line = |cols: Vec<&str>| {
        let text: Vec<String> = cols
            .iter()
            .zip(width)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        let _ = writeln!(out, "{}", text.join("  ").trim_end());
    };
    line(header.to_vec());
    for r in rows {
        line(r.iter().map(String::as_str).collect());
    }
}

/// Rows as a Markdown table: `|` in a cell escaped, `<` and `>` as entities (GitHub would
/// read `<anonymous>` as an HTML tag and show nothing).
fn markdown<const N: usize>(out: &mut String, header: [&str; N], rows: &[[String; N]]) {
    let cell = |c: &str| {
        c.replace('|', "\\|")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
    };
    let _ = writeln!(out, "| {} |", header.join(" | "));
    let _ = writeln!(out, "|{}", "---|".repeat(N));
    for r in rows {
        let cols: Vec<String> = r.iter().map(|c| cell(c)).collect();
        let _ = writeln!(out, "| {} |", cols.join(" | "));
    }
}

/// The registry join's three lists, each titled, in `table`'s form.
fn join_sections(
    out: &mut String,
    join: &RegistryJoin,
    title: &dyn Fn(&str) -> String,
    handlers: &dyn Fn(&mut String, &[[String; 6]]),
    rows: &dyn Fn(&mut String, &[[String; 4]]),
) {
    let _ = write!(out, "\n{}", title("Running, not in code"));
    if join.running_not_in_code.is_empty() {
        let _ = writeln!(out, "none");
    } else {
        rows(
            out,
            &join
                .running_not_in_code
                .iter()
                .map(row_cells)
                .collect::<Vec<_>>(),
        );
    }
    for (name, list) in [
        ("In code, no marker", &join.in_code_no_marker),
        ("In code, never seen running", &join.in_code_never_seen),
    ] {
        let _ = write!(out, "\n{}", title(name));
        if list.is_empty() {
            let _ = writeln!(out, "none");
        } else {
            handlers(out, &list.iter().map(cells).collect::<Vec<_>>());
        }
    }
}

/// The inventory as aligned text: a table of handlers (file:line, function, kind, consumer
/// with where its name came from, marker, verdict), then — with a registry — the lists
/// "Running, not in code", "In code, no marker" and "In code, never seen running", skipped
/// files as warnings and a closing count line.
pub fn inventory_to_text(inventory: &Inventory, join: Option<&RegistryJoin>) -> String {
    let mut out = String::new();
    let rows: Vec<_> = inventory.handlers.iter().map(cells).collect();
    aligned(&mut out, HEADER, &rows);
    if let Some(join) = join {
        join_sections(
            &mut out,
            join,
            &|t| format!("{t}:\n"),
            &|o, r| aligned(o, HEADER, r),
            &|o, r| aligned(o, ROW_HEADER, r),
        );
    }
    for s in &inventory.skipped {
        let _ = writeln!(out, "warning: skipped {}: {}", s.path.display(), s.reason);
    }
    let _ = writeln!(out, "\n{}", summary(inventory));
    out
}

/// The inventory as Markdown for a pull-request comment: a heading, the handlers' table, the
/// registry join's lists as tables (with a registry), and the count line.
pub fn inventory_to_markdown(inventory: &Inventory, join: Option<&RegistryJoin>) -> String {
    let mut out = String::from("### idem lint: handler inventory\n\n");
    let rows: Vec<_> = inventory.handlers.iter().map(cells).collect();
    markdown(&mut out, HEADER, &rows);
    if let Some(join) = join {
        join_sections(
            &mut out,
            join,
            &|t| format!("#### {t}\n\n"),
            &|o, r| markdown(o, HEADER, r),
            &|o, r| markdown(o, ROW_HEADER, r),
        );
    }
    let _ = writeln!(out, "\n{}", summary(inventory));
    out
}

fn summary(inventory: &Inventory) -> String {
    let n = inventory.handlers.len();
    format!(
        "idem lint: {n} handler{} in {} file{} ({} skipped)",
        if n == 1 { "" } else { "s" },
        inventory.files_linted,
        if inventory.files_linted == 1 { "" } else { "s" },
        inventory.skipped.len()
    )
}

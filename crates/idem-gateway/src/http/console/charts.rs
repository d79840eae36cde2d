//! Bar charts as inline SVG, drawn on the server (the console runs no script under its CSP):
//! one bar per bucket of the chosen range, scaled to the largest, with a y axis (0 and the
//! largest count) and an x axis (the first bucket's start and the end, UTC). Hovering a bucket
//! shows its time and count through an SVG `<title>`; the whole chart is an image with a text
//! alternative (its range, total and largest bar), so it reads without sight.

use maud::{Markup, html};

/// Each bar's width and the gap after it, in px.
const BAR: u64 = 3;
const GAP: u64 = 1;

/// The axis chart's plot height, and the room left for the y axis' labels and under the plot
/// for the x axis' labels, in px.
const PLOT: u64 = 80;
const LEFT: u64 = 44;
const BELOW: u64 = 18;

/// `ms` as `HH:MM` (UTC), or `MM-DD HH:MM` when `with_day`.
fn clock(ms: i64, with_day: bool) -> String {
    let text = crate::model::time::format_time(ms);
    // 2026-12-03T14:05:00.000Z
    if with_day {
        format!("{} {}", &text[5..10], &text[11..16])
    } else {
        text[11..16].to_owned()
    }
}

/// A bar chart with axes and values: `values` (oldest first) are counts per bucket of
/// `bucket_ms`, the last one ending at `end` (ms). The y axis shows 0 and the largest count,
/// the x axis the first bucket's start and the end; hovering a bucket shows its time and count
/// (an SVG `<title>`, no script). `label` says what is counted ("app delivered").
pub(crate) fn chart(label: &str, values: &[u64], end: i64, bucket_ms: i64) -> Markup {
    let max = values.iter().copied().max().unwrap_or(0);
    let total: u64 = values.iter().sum();
    let n = values.len() as u64;
    let width = LEFT + n * (BAR + GAP) + 4;
    let height = PLOT + BELOW;
    let start = end - bucket_ms * i64::try_from(values.len()).unwrap_or(0);
    let with_day = end - start > 86_400_000;
    let description = format!(
        "{label} from {} to {}: {total} in all, at most {max} in one bar",
        clock(start, with_day),
        clock(end, with_day)
    );
    let scaled = |value: u64| {
        if max == 0 || value == 0 {
            0
        } else {
            (value * PLOT / max).max(1)
        }
    };
    html! {
        svg.chart.axes xmlns="http://www.w3.org/2000/svg" width=(width) height=(height)
            viewBox={ "0 0 " (width) " " (height) } role="img" aria-label=(description) {
            title { (description) }
            line.axis x1=(LEFT - 2) y1="0" x2=(LEFT - 2) y2=(PLOT) {}
            line.axis x1=(LEFT - 2) y1=(PLOT) x2=(width) y2=(PLOT) {}
            text.tick x=(LEFT - 6) y="10" text-anchor="end" { (max) }
            text.tick x=(LEFT - 6) y=(PLOT) text-anchor="end" { "0" }
            text.tick x=(LEFT) y=(height - 4) text-anchor="start" { (clock(start, with_day)) }
            text.tick x=(width - 2) y=(height - 4) text-anchor="end" { (clock(end, with_day)) " UTC" }
            @for (i, value) in values.iter().enumerate() {
                @let x = LEFT + i as u64 * (BAR + GAP);
                @let from = start + bucket_ms * i as i64;
                @let h = scaled(*value);
                g.bucket data-value=(value) {
                    title { (clock(from, with_day)) "–" (clock(from + bucket_ms, with_day)) ": " (value) }
                    rect.hit x=(x) y="0" width=(BAR + GAP) height=(PLOT) {}
                    @if h > 0 {
                        rect.bar x=(x) y=(PLOT - h) width=(BAR) height=(h) {}
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_axis_chart_shows_its_scale_its_times_and_each_value_on_hover() {
        // Three minutes ending at 00:03 UTC.
        let svg = chart("app delivered", &[4, 0, 159], 180_000, 60_000).into_string();
        assert!(
            svg.contains("app delivered from 00:00 to 00:03: 163 in all, at most 159 in one bar"),
            "{svg}"
        );
        assert!(
            svg.contains(">159</text>") && svg.contains(">0</text>"),
            "{svg}"
        );
        assert!(svg.contains("<title>00:00–00:01: 4</title>"), "{svg}");
        assert!(svg.contains("<title>00:01–00:02: 0</title>"), "{svg}");
        assert!(svg.contains("<title>00:02–00:03: 159</title>"), "{svg}");
        // 4 of 159 is a short bar (2 px), 159 the full plot.
        assert!(svg.contains("height=\"2\""), "{svg}");
        assert!(svg.contains(&format!("height=\"{PLOT}\"")), "{svg}");
        assert_eq!(svg.matches("class=\"bar\"").count(), 2, "{svg}");
        // A week's chart names the days.
        let week = chart("x", &[1; 28], 7 * 86_400_000, 6 * 3_600_000).into_string();
        assert!(
            week.contains("01-01 00:00") && week.contains("01-08 00:00"),
            "{week}"
        );
    }
}

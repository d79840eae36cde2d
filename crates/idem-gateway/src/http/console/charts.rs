//! Small bar charts as inline SVG, drawn on the server: one bar per minute or hour, scaled to
//! the largest. Each chart is an image with a text alternative (its total and largest bar),
//! so it reads without sight and without script.

use maud::{Markup, html};

/// The chart's height in px.
const HEIGHT: u64 = 28;
/// Each bar's width and the gap after it, in px.
const BAR: u64 = 3;
const GAP: u64 = 1;

/// A bar chart of `values` (oldest first), described by `label` (what one bar counts, such as
/// "accepted per minute, last hour").
pub(crate) fn bars(label: &str, values: &[u64]) -> Markup {
    let max = values.iter().copied().max().unwrap_or(0);
    let total: u64 = values.iter().sum();
    let width = values.len() as u64 * (BAR + GAP);
    let description = format!("{label}: {total} in all, at most {max} in one bar");
    html! {
        svg.chart xmlns="http://www.w3.org/2000/svg" width=(width) height=(HEIGHT)
            viewBox={ "0 0 " (width) " " (HEIGHT) } role="img" aria-label=(description) {
            title { (description) }
            @for (i, value) in values.iter().enumerate() {
                @let x = i as u64 * (BAR + GAP);
                @let h = bar_height(*value, max);
                // Closed explicitly: in HTML an SVG element without its end tag would hold the
                // next one, which is then not drawn.
                rect.base x=(x) y=(HEIGHT - 1) width=(BAR) height="1" {}
                @if h > 0 {
                    rect.bar x=(x) y=(HEIGHT - h) width=(BAR) height=(h) {}
                }
            }
        }
    }
}

/// The height in px of a bar of `value` when the largest is `max`: at least 1 px for any
/// count, so a single event shows.
fn bar_height(value: u64, max: u64) -> u64 {
    if value == 0 || max == 0 {
        return 0;
    }
    (value * (HEIGHT - 2) / max).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_scale_to_the_largest_and_a_single_count_shows() {
        assert_eq!(bar_height(0, 10), 0);
        assert_eq!(bar_height(10, 10), HEIGHT - 2);
        assert_eq!(bar_height(1, 1_000), 1);
        let svg = bars("accepted per minute", &[0, 2, 4]).into_string();
        assert!(
            svg.contains("accepted per minute: 6 in all, at most 4 in one bar"),
            "{svg}"
        );
        assert_eq!(svg.matches("class=\"bar\"").count(), 2, "{svg}");
        assert_eq!(
            svg.matches("</rect>").count(),
            5,
            "every rect closed: {svg}"
        );
    }
}

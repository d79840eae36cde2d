//! Text a sender chose (event ids, types, entities), as the operator's terminal and the log
//! are given it.

use std::borrow::Cow;
use std::fmt::Write as _;

/// `text` with each control character escaped (`\n`, `\u{1b}`): a newline would break a table
/// row, and an escape sequence would reach the terminal (set its title, clear the screen).
/// Everything else is kept, so that the id shown is the one to type into `idem events show`.
pub(crate) fn printable(text: &str) -> Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return Cow::Borrowed(text);
    }
    let mut shown = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c.is_control() {
            let _ = write!(shown, "{}", c.escape_debug());
        } else {
            shown.push(c);
        }
    }
    Cow::Owned(shown)
}

#[cfg(test)]
mod tests {
    use super::printable;

    #[test]
    fn control_characters_are_escaped_and_the_rest_kept() {
        assert_eq!(printable("evt_1"), "evt_1");
        assert_eq!(printable("évt_ü 1"), "évt_ü 1");
        assert_eq!(
            printable("evt\u{1b}]0;PWNED\u{7}\u{1b}[2J"),
            r"evt\u{1b}]0;PWNED\u{7}\u{1b}[2J"
        );
        assert_eq!(printable("evt_nl\nx"), r"evt_nl\nx");
    }
}

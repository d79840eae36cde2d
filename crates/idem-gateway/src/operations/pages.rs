//! Keyset pages of the admin lists (`GET /admin/events`, `GET /admin/dlq`): each page ends
//! with the cursor of its last row, and the next page starts after it, so rows inserted
//! meanwhile neither shift a row onto two pages nor skip one.

use serde::Serialize;

use crate::error::RequestError;

/// One page of a list: its rows, and the cursor the next page starts after when more rows
/// follow (`None` on the last page).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Page<T> {
    /// The rows, in the list's order.
    pub items: Vec<T>,
    /// `after=` of the next page.
    pub next: Option<String>,
}

/// The cursor of a row at `(time, id)`: `{time}_{id}`.
pub(crate) fn cursor(time: i64, id: i64) -> String {
    format!("{time}_{id}")
}

/// The `(time, id)` of a cursor [`cursor`] wrote.
///
/// # Errors
/// [`RequestError::BadCursor`] for any other text.
pub(crate) fn parse_cursor(text: &str) -> Result<(i64, i64), RequestError> {
    text.split_once('_')
        .and_then(|(time, id)| Some((time.parse().ok()?, id.parse().ok()?)))
        .ok_or_else(|| RequestError::BadCursor {
            value: text.to_owned(),
        })
}

/// The first `limit` of `rows` (read with one more than `limit`), and the cursor of the last
/// one kept when a row was left over.
pub(crate) fn page_of<R, T>(
    mut rows: Vec<R>,
    limit: u32,
    key: impl Fn(&R) -> (i64, i64),
    item: impl Fn(R) -> T,
) -> Page<T> {
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let next = if rows.len() > limit {
        rows.truncate(limit);
        rows.last().map(|row| {
            let (time, id) = key(row);
            cursor(time, id)
        })
    } else {
        None
    };
    Page {
        items: rows.into_iter().map(item).collect(),
        next,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_read_back() {
        assert_eq!(
            parse_cursor(&cursor(1_700_000_000_123, 42)),
            Ok((1_700_000_000_123, 42))
        );
        for bad in ["", "12", "a_1", "1_b", "1_2_3", "_"] {
            assert!(parse_cursor(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_page_says_whether_more_follow() {
        let rows = vec![(1, 10), (2, 20), (3, 30)];
        let full = page_of(rows.clone(), 2, |r| *r, |r| r.1);
        assert_eq!(full.items, vec![10, 20]);
        assert_eq!(full.next.as_deref(), Some("2_20"));
        let last = page_of(rows, 3, |r| *r, |r| r.1);
        assert_eq!((last.items.len(), last.next), (3, None));
    }
}

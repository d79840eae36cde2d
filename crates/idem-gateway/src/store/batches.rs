//! How a batch of rows is split into the statements that carry it. A multi-row statement's text
//! changes with its row count, and a database prepares (and a connection caches) each text on
//! its own. PostgreSQL and MySQL keep every length prepared, so a batch goes in chunks of up to
//! the statement's bound. SQLite prepares in the gateway's own process, and a cache holding every
//! length it met filled with large programs rarely run again (docs/gateway.md, "Where the peak
//! is: the allocations"), so a SQLite batch goes in chunks of a few fixed lengths, each prepared
//! once per connection and kept.

/// The row counts of a SQLite batch statement: a batch is cut into chunks of these, largest first
/// (a binary decomposition past the first size), so a batch of `n` rows takes `n / 32` statements
/// plus one per bit set in `n % 32`, and each batch statement has at most six texts per connection.
pub(crate) const SQLITE_LENGTHS: [usize; 6] = [32, 16, 8, 4, 2, 1];

/// Splits `items` into consecutive chunks, in order, none empty: of at most `most` items each
/// when `any_length` (the store keeps a text of every length), else of the lengths of
/// [`SQLITE_LENGTHS`] (none longer than `most`). `most` must be at least 1.
pub(crate) fn chunks<T>(items: &[T], most: usize, any_length: bool) -> impl Iterator<Item = &[T]> {
    let mut rest = items;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let len = if any_length {
            rest.len()
        } else {
            SQLITE_LENGTHS
                .into_iter()
                .find(|&len| len <= rest.len())
                .unwrap_or(1)
        };
        let (chunk, tail) = rest.split_at(len.min(most).max(1));
        rest = tail;
        Some(chunk)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lengths(n: usize, most: usize, any_length: bool) -> Vec<usize> {
        let items: Vec<usize> = (0..n).collect();
        let chunks: Vec<&[usize]> = chunks(&items, most, any_length).collect();
        // Every item once, in order.
        assert_eq!(chunks.concat(), items);
        chunks.iter().map(|chunk| chunk.len()).collect()
    }

    #[test]
    fn sqlite_batches_take_the_fixed_lengths_largest_first() {
        assert_eq!(lengths(0, 1_000, false), Vec::<usize>::new());
        assert_eq!(lengths(1, 1_000, false), [1]);
        assert_eq!(lengths(31, 1_000, false), [16, 8, 4, 2, 1]);
        assert_eq!(lengths(32, 1_000, false), [32]);
        assert_eq!(lengths(100, 1_000, false), [32, 32, 32, 4]);
        assert_eq!(lengths(20, 8, false), [8, 8, 4]);
    }

    #[test]
    fn other_stores_take_any_length_up_to_the_bound() {
        assert_eq!(lengths(0, 1_000, true), Vec::<usize>::new());
        assert_eq!(lengths(31, 1_000, true), [31]);
        assert_eq!(lengths(2_500, 1_000, true), [1_000, 1_000, 500]);
    }
}

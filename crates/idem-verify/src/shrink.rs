//! Delta debugging (Zeller's ddmin) over the deliveries of a failing run.

use tokio::time::Instant;

/// Shrinks `items` to a 1-minimal subsequence for which `fails` still answers `true` (removing
/// any single item makes it pass), keeping the items' relative order. `items` must fail.
/// Stops early once `deadline` has passed; the boolean says whether the result is 1-minimal.
///
/// # Errors
/// The first error `fails` returns.
pub async fn ddmin<T, E>(
    mut items: Vec<T>,
    mut fails: impl AsyncFnMut(&[T]) -> Result<bool, E>,
    deadline: Instant,
) -> Result<(Vec<T>, bool), E>
where
    T: Clone,
{
    let mut n = 2usize;
    while items.len() >= 2 {
        let chunks = split(items.len(), n);
        let mut reduced = false;
        for &(start, end) in &chunks {
            if Instant::now() >= deadline {
                return Ok((items, false));
            }
            let subset = items[start..end].to_vec();
            if fails(&subset).await? {
                items = subset;
                n = 2;
                reduced = true;
                break;
            }
        }
        if !reduced && n > 2 {
            for &(start, end) in &chunks {
                if Instant::now() >= deadline {
                    return Ok((items, false));
                }
                let complement: Vec<T> = items[..start]
                    .iter()
                    .chain(&items[end..])
                    .cloned()
                    .collect();
                if fails(&complement).await? {
                    items = complement;
                    n = (n - 1).max(2);
                    reduced = true;
                    break;
                }
            }
        }
        if !reduced {
            if n >= items.len() {
                break;
            }
            n = (2 * n).min(items.len());
        }
    }
    Ok((items, true))
}

/// `len` split into `n` contiguous, nearly equal, non-empty ranges.
fn split(len: usize, n: usize) -> Vec<(usize, usize)> {
    let n = n.clamp(1, len.max(1));
    (0..n).map(|i| (i * len / n, (i + 1) * len / n)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn finds_the_two_culprits() {
        let items: Vec<u32> = (0..100).collect();
        let deadline = Instant::now() + Duration::from_secs(10);
        let (min, minimal) = ddmin(
            items,
            async |s: &[u32]| Ok::<_, ()>(s.contains(&17) && s.contains(&80)),
            deadline,
        )
        .await
        .unwrap();
        assert_eq!((min, minimal), (vec![17, 80], true));
    }
}

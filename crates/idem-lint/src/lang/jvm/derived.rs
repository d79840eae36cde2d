//! Spring Data's derived queries: a repository method's name states what it filters by
//! (`existsByOrderId`, `findFirstByTenantIdAndStatusOrderByCreatedAtDesc`), as the
//! reference documentation's "query creation from method names" defines it. A check that
//! asks which columns a look-up filtered by reads them here, as it reads a `where` object.

use crate::ir::Call;

/// The verbs a derived query starts with.
const SUBJECTS: &[&str] = &[
    "find", "exists", "count", "get", "read", "query", "search", "stream",
];

/// Operator keywords a criterion ends with, longest first.
const OPERATORS: &[&str] = &[
    "AllIgnoreCase",
    "IgnoreCase",
    "GreaterThanEqual",
    "LessThanEqual",
    "GreaterThan",
    "LessThan",
    "IsNotNull",
    "NotNull",
    "IsNull",
    "Null",
    "IsTrue",
    "True",
    "IsFalse",
    "False",
    "Between",
    "After",
    "Before",
    "NotLike",
    "Like",
    "StartingWith",
    "EndingWith",
    "NotContaining",
    "Containing",
    "NotIn",
    "In",
    "Equals",
    "Not",
    "Is",
];

/// The properties a repository's derived query filters by, lowercased at the first letter
/// as the entity's fields are written (`orderId`); nothing for any other call. Only on a
/// receiver named as repositories are (`paymentRepository`, `orderRepo`, `userDao`), so a
/// client's `findByIdAndUpdate` is not read as one.
pub(crate) fn filter_columns(call: &Call) -> Vec<String> {
    let [.., receiver, method] = call.callee.as_slice() else {
        return Vec::new();
    };
    let r = receiver.to_lowercase();
    if !(r.ends_with("repository") || r.ends_with("repo") || r.ends_with("dao")) {
        return Vec::new();
    }
    let Some(rest) = SUBJECTS.iter().find_map(|s| method.strip_prefix(s)) else {
        return Vec::new();
    };
    // `First`, `Top10`, `Distinct`, or an entity name before `By`.
    let Some(by) = upper_word_at(rest, "By") else {
        return Vec::new();
    };
    let criteria = &rest[by + 2..];
    // `findById`, `existsById`: CrudRepository's own methods, by the entity's `@Id` (however
    // its field is named), not a property called `id`.
    if criteria == "Id" {
        return Vec::new();
    }
    let criteria = upper_word_at(criteria, "OrderBy").map_or(criteria, |o| &criteria[..o]);
    split_words(criteria, &["And", "Or"])
        .into_iter()
        .map(strip_operator)
        .filter(|p| !p.is_empty())
        .map(|p| {
            let mut chars = p.chars();
            let first = chars.next().map(|c| c.to_ascii_lowercase());
            first.into_iter().chain(chars).collect()
        })
        .collect()
}

/// Where `word` starts in `s` as a camel-case word (followed by an upper-case letter).
fn upper_word_at(s: &str, word: &str) -> Option<usize> {
    s.match_indices(word).map(|(i, _)| i).find(|&i| {
        s[i + word.len()..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_uppercase())
    })
}

/// `s` split at each of `words` written as a camel-case word.
fn split_words<'s>(s: &'s str, words: &[&str]) -> Vec<&'s str> {
    let mut parts = Vec::new();
    let mut start = 0;
    let mut i = 1;
    while i < s.len() {
        let sep = words.iter().find(|w| {
            s[i..].starts_with(**w)
                && s[i + w.len()..]
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_uppercase())
        });
        match sep {
            Some(w) => {
                parts.push(&s[start..i]);
                start = i + w.len();
                i = start + 1;
            }
            None => i += s[i..].chars().next().map_or(1, char::len_utf8),
        }
    }
    parts.push(&s[start..]);
    parts
}

fn strip_operator(p: &str) -> &str {
    OPERATORS
        .iter()
        .find_map(|o| p.strip_suffix(o).filter(|rest| !rest.is_empty()))
        .unwrap_or(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(callee: &[&str]) -> Call {
        Call {
            callee: callee.iter().map(|s| s.to_string()).collect(),
            receiver: None,
            args: Vec::new(),
            kwargs: Vec::new(),
            is_new: false,
            pos: Default::default(),
        }
    }

    #[test]
    fn reads_the_criteria_of_a_derived_query() {
        let cols = |c: &[&str]| filter_columns(&call(c));
        assert_eq!(cols(&["paymentRepository", "existsByOrderId"]), ["orderId"]);
        assert_eq!(
            cols(&[
                "promotionRepo",
                "findFirstByTenantIdAndStatusAndDeletedAtIsNullOrderByCreatedAtDesc"
            ]),
            ["tenantId", "status", "deletedAt"]
        );
        assert_eq!(cols(&["userDao", "countByEmailIgnoreCase"]), ["email"]);
        assert!(cols(&["Payment", "findByIdAndUpdate"]).is_empty());
        assert!(cols(&["paymentRepository", "save"]).is_empty());
        assert!(cols(&["processedEventRepository", "existsById"]).is_empty());
    }
}

//! `$N` parameters, as the suites write them (the same on SQLite and PostgreSQL), turned into
//! MySQL's `?`: [`to_question_marks`] rewrites the text and says which `$N` each `?` stands for,
//! so that the bind values can be given in that order (a `$N` used twice is bound twice).

/// `sql` with every `$N` outside a string literal replaced by `?`, and the `N`s in the order they
/// appear (1-based, as written).
///
/// # Panics
/// When a `$` outside a string literal is not followed by a number: a test's statement is
/// wrong, and saying so beats sending it.
pub fn to_question_marks(sql: &str) -> (String, Vec<usize>) {
    let mut out = String::with_capacity(sql.len());
    let mut order = Vec::new();
    let mut chars = sql.chars().peekable();
    let mut in_string = false;
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                // `''` inside a literal is an escaped quote: leaving and entering again.
                in_string = !in_string;
                out.push(c);
            }
            '$' if !in_string => {
                let mut digits = String::new();
                while let Some(d) = chars.next_if(char::is_ascii_digit) {
                    digits.push(d);
                }
                let n = digits
                    .parse()
                    .unwrap_or_else(|_| panic!("a `$` without a parameter number in {sql:?}"));
                order.push(n);
                out.push('?');
            }
            _ => out.push(c),
        }
    }
    (out, order)
}

#[cfg(test)]
mod tests {
    use super::to_question_marks;

    #[test]
    fn parameters_become_question_marks_in_their_order() {
        let (sql, order) = to_question_marks(
            "UPDATE t SET a = $2, b = '$1 it''s' WHERE c = $1 AND d = $10 AND e = $2",
        );
        assert_eq!(
            sql,
            "UPDATE t SET a = ?, b = '$1 it''s' WHERE c = ? AND d = ? AND e = ?"
        );
        assert_eq!(order, [2, 1, 10, 2]);
    }

    #[test]
    fn text_without_parameters_is_unchanged() {
        assert_eq!(
            to_question_marks("SELECT 1"),
            ("SELECT 1".to_owned(), vec![])
        );
    }
}

//! Whether two operations of a function lie on branches that exclude each other: one under
//! `if (c)` and the other under its `else`, or under two cases of one `switch`/`match` on the
//! same value (`case "invoice.paid"` and `case "checkout.session.completed"`). A claim or a
//! look-up in one event type's branch does nothing for the work of another's, so the checks
//! that ask "was the event checked before this?" skip operations on an excluding branch.

use crate::ir::{Call, Cond, Expr, Function};

/// Whether ops `a` and `b` of `func` can never both run in one call of it.
pub(crate) fn exclusive(func: &Function, a: usize, b: usize) -> bool {
    let (Some(x), Some(y)) = (func.ops.get(a), func.ops.get(b)) else {
        return false;
    };
    x.conds.iter().filter(|c| !y.conds.contains(c)).any(|&ca| {
        (y.conds.iter().filter(|c| !x.conds.contains(c)))
            .any(|&cb| excludes(&func.conds[ca], &func.conds[cb]))
    })
}

/// Two conditions that cannot both hold: one test and its negation (an `if` and its `else`),
/// or one value compared equal with two different literals (two cases of a switch).
fn excludes(a: &Cond, b: &Cond) -> bool {
    if a.is_catch || b.is_catch {
        return false;
    }
    if a.negated != b.negated {
        return same(&a.test, &b.test);
    }
    if a.negated {
        return false;
    }
    match (case_of(&a.test), case_of(&b.test)) {
        (Some((va, la)), Some((vb, lb))) => {
            same(va, vb) && literal(la) && literal(lb) && !same(la, lb)
        }
        _ => false,
    }
}

/// `value == label` (or `===`, `is`): the value and the label.
fn case_of(test: &Expr) -> Option<(&Expr, &Expr)> {
    match test {
        Expr::Binary { op, left, right } if matches!(op.as_str(), "==" | "===" | "is") => {
            Some((left, right))
        }
        _ => None,
    }
}

fn literal(e: &Expr) -> bool {
    matches!(e, Expr::Str(_) | Expr::Num(_))
        || matches!(e, Expr::Path(p) if p.last().is_some_and(|s| s.starts_with(|c: char| c.is_ascii_uppercase())))
}

/// Structural equality of the expressions a condition is made of (a call is the same call
/// when it is the one at the same place).
fn same(a: &Expr, b: &Expr) -> bool {
    match (a, b) {
        (Expr::Str(x), Expr::Str(y)) => x == y,
        (Expr::Num(x), Expr::Num(y)) => x == y,
        (Expr::Path(x), Expr::Path(y)) => x == y,
        (Expr::Not(x), Expr::Not(y)) => same(x, y),
        (
            Expr::Binary {
                op: o1,
                left: l1,
                right: r1,
            },
            Expr::Binary {
                op: o2,
                left: l2,
                right: r2,
            },
        ) => o1 == o2 && same(l1, l2) && same(r1, r2),
        (Expr::Call(x), Expr::Call(y)) => same_call(x, y),
        (Expr::Template(x), Expr::Template(y))
        | (Expr::List(x), Expr::List(y))
        | (Expr::Other(x), Expr::Other(y)) => {
            !x.is_empty() && x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(p, q))
        }
        _ => false,
    }
}

fn same_call(x: &Call, y: &Call) -> bool {
    x.pos == y.pos && x.callee == y.callee
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The function `handle` of `source` (a file named `path`) and each op's line.
    fn ops_at(path: &str, source: &str) -> (Function, Vec<u32>) {
        let module = crate::lang::lower_for_test(path, source);
        let f = module
            .functions
            .into_iter()
            .find(|f| f.name == "handle")
            .unwrap();
        let lines = f.ops.iter().map(|o| o.pos.line).collect();
        (f, lines)
    }

    /// The first op on `line`.
    fn at(lines: &[u32], line: u32) -> usize {
        lines.iter().position(|&l| l == line).unwrap()
    }

    #[test]
    fn switch_cases_and_if_else_exclude_each_other() {
        let src = "async function handle(event) {
  switch (event.type) {
    case 'a':
      await one(event);
      break;
    case 'b':
      await two(event);
      break;
  }
  if (event.live) {
    await three(event);
  } else {
    await four(event);
  }
  await five(event);
}
";
        let (f, lines) = ops_at("h.ts", src);
        let (one, two, three, four, five) = (
            at(&lines, 4),
            at(&lines, 7),
            at(&lines, 11),
            at(&lines, 13),
            at(&lines, 15),
        );
        assert!(exclusive(&f, one, two));
        assert!(exclusive(&f, three, four));
        assert!(!exclusive(&f, one, three), "a case and a later if both run");
        assert!(!exclusive(&f, one, five));
        assert!(!exclusive(&f, four, five));
    }

    #[test]
    fn python_elif_chains_exclude_each_other() {
        let src = "def handle(event):
    if event['type'] == 'a':
        one(event)
    elif event['type'] == 'b':
        two(event)
    three(event)
";
        let (f, lines) = ops_at("h.py", src);
        assert!(exclusive(&f, at(&lines, 3), at(&lines, 5)));
        assert!(!exclusive(&f, at(&lines, 3), at(&lines, 6)));
    }
}

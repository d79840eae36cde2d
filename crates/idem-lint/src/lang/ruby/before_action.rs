//! One `before_action` callback of a controller and the actions it runs before (read from the
//! class body in `callbacks`).

use crate::ir::Pos;

/// One `before_action` callback.
#[derive(Debug, Clone)]
pub(super) struct BeforeAction {
    pub(super) name: String,
    pub(super) pos: Pos,
    /// `only:`: the actions it runs for (`None`: every action).
    pub(super) only: Option<Vec<String>>,
    /// `except:`: the actions it skips.
    pub(super) except: Vec<String>,
}

impl BeforeAction {
    /// Whether the callback runs before `action`.
    pub(super) fn runs_before(&self, action: &str) -> bool {
        self.only
            .as_ref()
            .is_none_or(|only| only.iter().any(|a| a == action))
            && !self.except.iter().any(|a| a == action)
    }
}

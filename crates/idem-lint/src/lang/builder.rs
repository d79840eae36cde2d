//! What every lowering shares: node text and positions, the function being built, its
//! enclosing conditions, loops and transactions.

use tree_sitter::Node;

use crate::ir::{Call, Cond, Expr, Function, Module, Op, OpKind, Pos};

struct Frame {
    func: Function,
    conds: Vec<usize>,
    tx: Vec<u32>,
    /// The ids of the enclosing statements that start work nobody waits for, outermost first.
    detached: Vec<u32>,
}

/// Builds a [`Module`] while a lowering walks the tree.
pub(super) struct Builder<'s> {
    pub(super) src: &'s str,
    line_starts: Vec<usize>,
    frames: Vec<Frame>,
    next_tx: u32,
    next_detached: u32,
    /// How deep the lowering is in the tree: past [`MAX_DEPTH`] nodes are skipped, so a
    /// pathological file (a 50,000-term concatenation) cannot exhaust the stack.
    depth: u32,
    /// How many links of a call chain (`a.b().c()…`) enclose the one being lowered (see
    /// [`MAX_CHAIN`]).
    chain: u32,
    pub(super) module: Module,
}

/// The deepest syntax nesting lowered; deeper subtrees are left out.
const MAX_DEPTH: u32 = 256;

/// The longest call chain kept whole. Each link holds the chain under it as its receiver, and
/// each is an operation, so a chain of n links costs n² to build and n³ to record: past this,
/// a link keeps its own name and loses the links under it (a 1,000-link Java chain took over
/// 5 GB before).
const MAX_CHAIN: u32 = 64;

/// The name of the function holding a file's top-level statements.
pub(crate) const MODULE: &str = "<module>";

/// Callee methods whose function argument runs in a transaction.
pub(super) fn opens_transaction(call: &Call) -> bool {
    let m = call.method();
    matches!(
        m.as_str(),
        "transaction"
            | "$transaction"
            | "withtransaction"
            | "runintransaction"
            | "transact"
            | "withtx"
            | "intx"
            | "runintx"
    ) || (m == "begin" && call.callee.len() > 1)
        // A project's own wrapper: `adminTransaction(async (tx) => …)`,
        // `withDbTransaction(cb)`; not a payment's `createTransaction(…)`.
        || m.ends_with("transaction")
            && !["create", "insert", "add", "save", "record", "get", "find", "update", "delete", "cancel", "refund", "process", "handle", "verify", "fetch", "list"]
                .iter()
                .any(|v| m.starts_with(v))
}

/// Callee methods whose function argument runs inline, as part of the caller.
pub(super) fn runs_inline(call: &Call) -> bool {
    matches!(
        call.method().as_str(),
        "then"
            | "catch"
            | "finally"
            | "foreach"
            | "map"
            | "flatmap"
            | "filter"
            | "reduce"
            | "some"
            | "every"
            | "find"
            | "each"
            | "all"
            | "allsettled"
            | "for_each"
            | "wrap"
    )
}

impl<'s> Builder<'s> {
    pub(super) fn new(src: &'s str) -> Self {
        let mut line_starts = vec![0];
        line_starts.extend(src.match_indices('\n').map(|(i, _)| i + 1));
        let mut b = Builder {
            src,
            line_starts,
            frames: Vec::new(),
            next_tx: 0,
            next_detached: 0,
            depth: 0,
            chain: 0,
            module: Module::default(),
        };
        // The file's top level is a function of its own: scripts consume in a loop there.
        b.begin_function(Function::new(MODULE.to_string()));
        b
    }

    /// Ends the top level: its calls and assignments become the module's top calls and
    /// globals, and its operations the function `<module>`.
    pub(super) fn finish(mut self) -> Module {
        while self.frames.len() > 1 {
            self.end_function();
        }
        if let Some(frame) = self.frames.pop() {
            for op in &frame.func.ops {
                match &op.kind {
                    OpKind::Call(call) => self.module.top_calls.push(call.clone()),
                    OpKind::Assign {
                        targets,
                        value,
                        op: None,
                    } => {
                        for t in targets {
                            self.module.globals.push((t.clone(), value.clone()));
                        }
                    }
                    _ => {}
                }
            }
            if !frame.func.ops.is_empty() {
                self.module.functions.push(frame.func);
            }
        }
        self.module
    }

    /// Enters a node; `false` when it is too deep to lower (then do not call [`leave`](Self::leave)).
    pub(super) fn enter(&mut self) -> bool {
        if self.depth >= MAX_DEPTH {
            return false;
        }
        self.depth += 1;
        true
    }

    pub(super) fn leave(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    /// Enters one more link of a call chain's receivers; `false` past [`MAX_CHAIN`] (the
    /// caller then leaves the receiver out). Pair with [`Builder::leave_chain`].
    pub(super) fn enter_chain(&mut self) -> bool {
        if self.chain >= MAX_CHAIN {
            return false;
        }
        self.chain += 1;
        true
    }

    pub(super) fn leave_chain(&mut self) {
        self.chain = self.chain.saturating_sub(1);
    }

    /// A binary expression's operator and operands, by the field names the grammars share
    /// (`operator`, `left`, `right`).
    pub(super) fn binary_fields<'t>(
        &self,
        n: Node<'t>,
    ) -> (String, Option<Node<'t>>, Option<Node<'t>>) {
        let op = n
            .child_by_field_name("operator")
            .map(|o| self.text(o).to_string())
            .unwrap_or_default();
        (
            op,
            n.child_by_field_name("left"),
            n.child_by_field_name("right"),
        )
    }

    pub(super) fn text(&self, node: Node<'_>) -> &'s str {
        self.src.get(node.byte_range()).unwrap_or("")
    }

    pub(super) fn pos(&self, node: Node<'_>) -> Pos {
        let p = node.start_position();
        let start = self.line_starts.get(p.row).copied().unwrap_or(0);
        let column = self
            .src
            .get(start..start + p.column)
            .map_or(p.column, |s| s.chars().count());
        Pos {
            line: p.row as u32 + 1,
            column: column as u32 + 1,
        }
    }

    /// Starts a new function; operations go to it until [`end_function`](Self::end_function).
    pub(super) fn begin_function(&mut self, func: Function) {
        self.frames.push(Frame {
            func,
            conds: Vec::new(),
            tx: Vec::new(),
            detached: Vec::new(),
        });
    }

    /// Records that the function lowered last is registered by the call at `at` (it was
    /// written as one of that call's arguments).
    pub(super) fn registered_last(&mut self, at: Pos) {
        if let Some(f) = self.module.functions.last_mut() {
            f.registered_at = Some(at);
        }
    }

    pub(super) fn end_function(&mut self) {
        if let Some(frame) = self.frames.pop() {
            self.module.functions.push(frame.func);
        }
    }

    /// Emits a plain assignment (`=`, no compound operator) of `value` to `targets`.
    pub(super) fn assign(&mut self, targets: Vec<String>, value: Expr, pos: Pos) {
        self.emit(
            OpKind::Assign {
                targets,
                op: None,
                value,
            },
            pos,
        );
    }

    pub(super) fn emit(&mut self, kind: OpKind, pos: Pos) {
        let Some(frame) = self.frames.last_mut() else {
            return;
        };
        frame.func.ops.push(Op {
            kind,
            pos,
            conds: frame.conds.clone(),
            lexical_tx: frame.tx.last().copied(),
            origin: None,
            detached: frame.detached.first().copied().unwrap_or(0),
        });
    }

    /// Operations emitted until [`pop_detached`](Self::pop_detached) run in work nobody waits
    /// for (a goroutine, a deferred callback, an unawaited call).
    pub(super) fn push_detached(&mut self) {
        self.next_detached += 1;
        let id = self.next_detached;
        if let Some(frame) = self.frames.last_mut() {
            frame.detached.push(id);
        }
    }

    pub(super) fn pop_detached(&mut self) {
        if let Some(frame) = self.frames.last_mut() {
            frame.detached.pop();
        }
    }

    pub(super) fn push_cond(&mut self, test: Expr, negated: bool, is_catch: bool) {
        if let Some(frame) = self.frames.last_mut() {
            frame.func.conds.push(Cond {
                test,
                negated,
                is_catch,
            });
            frame.conds.push(frame.func.conds.len() - 1);
        }
    }

    pub(super) fn pop_cond(&mut self) {
        if let Some(frame) = self.frames.last_mut() {
            frame.conds.pop();
        }
    }

    pub(super) fn push_tx(&mut self) {
        self.next_tx += 1;
        let id = self.next_tx;
        if let Some(frame) = self.frames.last_mut() {
            frame.tx.push(id);
        }
    }

    /// Marks the function being built as opening `tx`, a transaction that joins its caller's.
    pub(super) fn set_joins_caller_tx(&mut self, tx: Option<u32>) {
        if let Some(frame) = self.frames.last_mut() {
            frame.func.joins_caller_tx = tx;
        }
    }

    /// The transaction opened innermost around the operations being emitted.
    pub(super) fn open_tx(&self) -> Option<u32> {
        self.frames.last().and_then(|f| f.tx.last().copied())
    }

    pub(super) fn pop_tx(&mut self) {
        if let Some(frame) = self.frames.last_mut() {
            frame.tx.pop();
        }
    }

    /// Leaves every open transaction until [`resume_tx`](Self::resume_tx): for work that
    /// runs once the transaction commits (Ruby's `after_commit do … end`).
    pub(super) fn suspend_tx(&mut self) -> Vec<u32> {
        self.frames
            .last_mut()
            .map(|f| std::mem::take(&mut f.tx))
            .unwrap_or_default()
    }

    pub(super) fn resume_tx(&mut self, saved: Vec<u32>) {
        if let Some(frame) = self.frames.last_mut() {
            frame.tx = saved;
        }
    }
}

/// The named children of a node, comments left out (they may sit between any two nodes).
pub(super) fn named(node: Node<'_>) -> Vec<Node<'_>> {
    let mut cursor = node.walk();
    node.named_children(&mut cursor)
        .filter(|c| c.kind() != "comment")
        .collect()
}

/// Where a call is reported: at its method name for `a.b.method(…)` (so a chain split over
/// lines points at the line of the call), else at its start.
pub(super) fn call_pos(b: &Builder<'_>, call: Node<'_>, method: Option<Node<'_>>) -> Pos {
    method.map_or_else(|| b.pos(call), |m| b.pos(m))
}

/// Decodes the common escapes of a string literal's text.
pub(super) fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some(other) => out.push(other),
            None => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::ir::{Call, OpKind};

    /// The callee segments recorded for every call of a file: a chain of n links kept whole
    /// records n²/2 (each link holds the path to it), one cut at `MAX_CHAIN` at most 64 a link.
    fn recorded_segments(path: &str, source: &str) -> usize {
        let module = crate::lang::lower_for_test(path, source);
        let calls = module
            .functions
            .iter()
            .flat_map(|f| &f.ops)
            .filter_map(|op| match &op.kind {
                OpKind::Call(c) => Some(c),
                _ => None,
            });
        calls.map(|c: &Call| c.callee.len()).sum()
    }

    #[test]
    fn a_long_call_chain_is_cut_in_java_and_kotlin() {
        let links = 300;
        let chain: String = (0..links).map(|i| format!("\n        .b{i}()")).collect();
        let java = format!("class A {{ void f() {{ Object s = a{chain}; }} }}\n");
        let kotlin = format!("fun f() {{ val s = a{chain} }}\n");
        for (path, source) in [("A.java", java), ("a.kt", kotlin)] {
            let segments = recorded_segments(path, &source);
            // Whole, the chain would record 300·301/2 = 45,150 segments.
            assert!(
                segments >= links,
                "{path}: every link is a call ({segments})"
            );
            assert!(segments <= 66 * links, "{path}: {segments} segments");
        }
    }
}

//! Kotlin declarations: classes and objects (constructor properties as typed fields, JPA
//! keys, proxy self-invocations), annotations and functions.

use std::collections::HashMap;

use tree_sitter::Node;

use super::{Lower, kid, kids, simple_type};
use crate::ir::{Expr, Function, OpKind};
use crate::lang::jvm::annotation::{Annotation, method_role};
use crate::lang::jvm::entity::{Field, unique_keys, version_columns};
use crate::lang::jvm::proxy::{TxMethod, self_invocations};
use crate::lang::jvm::supertypes::types_under;

impl Lower<'_> {
    /// A class, interface or object: its constructor properties (field types for receivers,
    /// JPA keys), members, and proxy self-invocations.
    pub(super) fn class(&mut self, n: Node<'_>) {
        let name = self.name_of(n);
        let annotations = self.annotations_of(n);
        let interface = {
            let mut cursor = n.walk();
            n.children(&mut cursor).any(|c| c.kind() == "interface")
        };
        self.supertypes(n);
        let start = self.b.module.functions.len();
        let mut fields: Vec<Field> = Vec::new();
        let mut tx_methods: HashMap<String, TxMethod> = HashMap::new();
        if let Some(params) = kid(n, "primary_constructor").and_then(|p| kid(p, "class_parameters"))
        {
            for p in kids(params) {
                let pname = self.name_of(p);
                let anns = self.annotations_of(p);
                let ty = kids(p)
                    .into_iter()
                    .find(|c| c.kind().ends_with("type"))
                    .map(|t| simple_type(&self.text(t)))
                    .unwrap_or_default();
                let pos = self.b.pos(p);
                let value = Expr::Object {
                    type_name: Some(ty),
                    fields: Vec::new(),
                };
                self.b.assign(vec![pname.clone()], value, pos);
                fields.push((pname, anns));
            }
        }
        let body = kid(n, "class_body").or_else(|| kid(n, "enum_class_body"));
        for m in body.map(kids).unwrap_or_default() {
            match m.kind() {
                "function_declaration" => {
                    if let Some((method, tm)) = self.function(m, &annotations, interface) {
                        tx_methods.insert(method, tm);
                    }
                }
                "property_declaration" => {
                    let anns = self.annotations_of(m);
                    if let Some(d) = kid(m, "variable_declaration") {
                        fields.push((self.name_of(d), anns));
                    }
                    self.property(m);
                }
                "enum_entry" => {
                    if let Some(b) = kid(m, "class_body") {
                        self.anonymous_class(b);
                    }
                }
                _ => self.stmt(m),
            }
        }
        let keys = unique_keys(&name, &annotations, &fields);
        self.b.module.unique_keys.extend(keys);
        let versions = version_columns(&name, &annotations, &fields);
        self.b.module.version_columns.extend(versions);
        let end = self.b.module.functions.len();
        self_invocations(&mut self.b.module, start..end, &tx_methods);
    }

    /// Records the class's supertypes (`class Adapter(…) : Port, Base()`).
    fn supertypes(&mut self, n: Node<'_>) {
        let mut found = Vec::new();
        for c in kids(n) {
            if c.kind().starts_with("delegation_specifier") {
                let text = |t: Node<'_>| self.text(t);
                types_under(c, &["user_type"], &text, &mut found);
            }
        }
        self.b.module.supertypes.extend(found);
    }

    pub(super) fn anonymous_class(&mut self, body: Node<'_>) {
        for m in kids(body) {
            match m.kind() {
                "function_declaration" => {
                    self.function(m, &[], false);
                }
                _ => self.stmt(m),
            }
        }
    }

    pub(super) fn annotations_of(&mut self, n: Node<'_>) -> Vec<Annotation> {
        let Some(mods) = kid(n, "modifiers") else {
            return Vec::new();
        };
        kids(mods)
            .into_iter()
            .filter(|a| a.kind() == "annotation")
            .map(|a| self.annotation(a))
            .collect()
    }

    /// `@Name`, `@Name(args)`, `@field:Name(args)`.
    pub(super) fn annotation(&mut self, a: Node<'_>) -> Annotation {
        if let Some(ci) = kid(a, "constructor_invocation") {
            let name = kid(ci, "user_type")
                .map(|t| self.text(t))
                .unwrap_or_default();
            let mut args = Vec::new();
            if let Some(list) = kid(ci, "value_arguments") {
                for arg in kids(list) {
                    let (key, value) = self.value_argument(arg);
                    args.push((key.unwrap_or_else(|| "value".to_string()), value));
                }
            }
            return Annotation::new(&simple_type(&name), args, self.b.pos(a));
        }
        let name = kids(a)
            .into_iter()
            .find(|c| c.kind() != "use_site_target")
            .map(|t| self.text(t))
            .unwrap_or_default();
        Annotation::new(&simple_type(&name), Vec::new(), self.b.pos(a))
    }

    /// `name = value` or `value`.
    pub(super) fn value_argument(&mut self, arg: Node<'_>) -> (Option<String>, Expr) {
        let parts = kids(arg);
        match parts.as_slice() {
            [name, value] if name.kind() == "identifier" => {
                let key = self.text(*name);
                (Some(key), self.expr(*value))
            }
            [value] => (None, self.expr(*value)),
            _ => (
                None,
                Expr::Other(parts.iter().map(|p| self.expr(*p)).collect()),
            ),
        }
    }

    /// A function or method, as the Java lowering's `method`.
    pub(super) fn function(
        &mut self,
        n: Node<'_>,
        class: &[Annotation],
        interface: bool,
    ) -> Option<(String, TxMethod)> {
        let name = self.name_of(n);
        let annotations = self.annotations_of(n);
        let role = method_role(class, &annotations);
        let mods = kid(n, "modifiers")
            .map(|m| self.text(m))
            .unwrap_or_default();
        // Kotlin's classes and methods are final unless `open` (Spring's kotlin-spring plugin
        // opens annotated ones): private ones are never proxied.
        let proxied = !mods.contains("private");
        let mut f = Function::new(name.clone());
        f.pos = self.b.pos(n);
        f.registrations = role.registrations;
        let joins = role.joins;
        if let Some(params) = kid(n, "function_value_parameters") {
            let mut pending: Vec<String> = Vec::new();
            for p in kids(params) {
                match p.kind() {
                    "parameter_modifiers" => {
                        for a in kids(p).into_iter().filter(|a| a.kind() == "annotation") {
                            let a = self.annotation(a);
                            let mut s = a.name.clone();
                            for (_, v) in &a.args {
                                if let Some(t) = v.string_text() {
                                    s.push(' ');
                                    s.push_str(&t);
                                }
                            }
                            pending.push(s);
                        }
                    }
                    "parameter" => {
                        f.params.push(self.name_of(p));
                        let ty = kids(p)
                            .into_iter()
                            .find(|c| c.kind().ends_with("type"))
                            .map(|t| self.text(t))
                            .unwrap_or_default();
                        pending.push(ty);
                        f.param_types.push(pending.join(" "));
                        pending.clear();
                    }
                    _ => {}
                }
            }
        }
        let body = kid(n, "function_body");
        let query = crate::lang::jvm::method::repository_query(&annotations);
        if body.is_none() && query.is_none() {
            return None;
        }
        let return_type = kids(n)
            .into_iter()
            .find(|c| c.kind().ends_with("type") && c.kind() != "type_parameters")
            .map(|t| self.text(t))
            .unwrap_or_default();
        let saved = std::mem::replace(&mut self.return_type, return_type);
        self.b.begin_function(f);
        // Spring's proxy applies `@Transactional` to methods it can intercept only.
        let transactional = role.transactional && proxied && (!interface || body.is_none());
        let opened = crate::lang::jvm::method::open(
            &mut self.b,
            &annotations,
            transactional,
            proxied,
            joins,
            query,
        );
        if let Some(body) = body {
            match kids(body).into_iter().next() {
                Some(b) if b.kind() == "block" => self.stmt(b),
                // `fun f() = expr`: the expression is what it returns.
                Some(e) => {
                    let v = self.expr(e);
                    let pos = self.b.pos(e);
                    self.b.emit(OpKind::Return(Some(v)), pos);
                }
                None => {}
            }
        }
        self.b.end_function();
        self.return_type = saved;
        let index = self.b.module.functions.len().checked_sub(1)?;
        crate::lang::jvm::method::finish(&mut self.b, &annotations, &opened);
        match (opened.transactional, opened.tx) {
            (true, Some(tx)) => Some((name, TxMethod { index, tx })),
            _ => None,
        }
    }
}

//! Java declarations: classes (their fields' JPA keys, proxy self-invocations), annotations
//! and methods (registrations, transactions, Spring Data `@Query` methods).

use std::collections::HashMap;

use tree_sitter::Node;

use super::{Lower, empty, kids};
use crate::ir::Function;
use crate::lang::jvm::annotation::{Annotation, method_role};
use crate::lang::jvm::entity::{Field, unique_keys, version_columns};
use crate::lang::jvm::proxy::{TxMethod, self_invocations};
use crate::lang::jvm::supertypes::types_under;

impl Lower<'_> {
    /// A class, interface, enum or record: its methods, nested classes, fields (for JPA
    /// keys) and initialisers.
    pub(super) fn class(&mut self, n: Node<'_>) {
        let name = self.field_text(n, "name");
        let annotations = self.annotations_of(n);
        let start = self.b.module.functions.len();
        let mut fields: Vec<Field> = Vec::new();
        let mut tx_methods: HashMap<String, TxMethod> = HashMap::new();
        if let Some(params) = n.child_by_field_name("parameters") {
            for p in kids(params) {
                fields.push((self.field_text(p, "name"), self.annotations_of(p)));
            }
        }
        let interface = n.kind() == "interface_declaration";
        self.supertypes(n);
        let mut members = Vec::new();
        if let Some(body) = n.child_by_field_name("body") {
            for m in kids(body) {
                if m.kind() == "enum_body_declarations" {
                    members.extend(kids(m));
                } else {
                    members.push(m);
                }
            }
        }
        for m in members {
            match m.kind() {
                "method_declaration"
                | "constructor_declaration"
                | "compact_constructor_declaration" => {
                    if let Some((method, tm)) = self.method(m, &annotations, interface) {
                        tx_methods.insert(method, tm);
                    }
                }
                "field_declaration" | "constant_declaration" => {
                    let anns = self.annotations_of(m);
                    let mut cursor = m.walk();
                    for d in m.children_by_field_name("declarator", &mut cursor) {
                        fields.push((self.field_text(d, "name"), anns.clone()));
                    }
                    self.declaration(m);
                }
                "enum_constant" => {
                    if let Some(body) = m.child_by_field_name("body") {
                        self.anonymous_class(body);
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

    /// Records the types the class extends and implements (`extends Base implements Port`,
    /// an interface's `extends`).
    fn supertypes(&mut self, n: Node<'_>) {
        let mut found = Vec::new();
        let mut cursor = n.walk();
        for c in n.named_children(&mut cursor) {
            if matches!(
                c.kind(),
                "superclass" | "super_interfaces" | "extends_interfaces"
            ) {
                let text = |t: Node<'_>| self.text(t);
                types_under(
                    c,
                    &["type_identifier", "scoped_type_identifier", "generic_type"],
                    &text,
                    &mut found,
                );
            }
        }
        self.b.module.supertypes.extend(found);
    }

    /// The methods of an anonymous class body (`new TransactionCallback<>() { … }`).
    pub(super) fn anonymous_class(&mut self, body: Node<'_>) {
        for m in kids(body) {
            match m.kind() {
                "method_declaration" => {
                    self.method(m, &[], false);
                }
                _ => self.stmt(m),
            }
        }
    }

    /// The annotations in a declaration's modifiers.
    pub(super) fn annotations_of(&mut self, n: Node<'_>) -> Vec<Annotation> {
        let Some(mods) = kids(n).into_iter().find(|c| c.kind() == "modifiers") else {
            return Vec::new();
        };
        kids(mods)
            .into_iter()
            .filter(|a| matches!(a.kind(), "annotation" | "marker_annotation"))
            .map(|a| self.annotation(a))
            .collect()
    }

    pub(super) fn annotation(&mut self, a: Node<'_>) -> Annotation {
        let name = self.field_text(a, "name");
        let mut args = Vec::new();
        if let Some(list) = a.child_by_field_name("arguments") {
            for arg in kids(list) {
                if arg.kind() == "element_value_pair" {
                    let key = self.field_text(arg, "key");
                    let value = arg
                        .child_by_field_name("value")
                        .map_or_else(empty, |v| self.expr(v));
                    args.push((key, value));
                } else {
                    let value = self.expr(arg);
                    args.push(("value".to_string(), value));
                }
            }
        }
        Annotation::new(&name, args, self.b.pos(a))
    }

    /// A method: its parameters (annotations written into their types: `RequestBody
    /// String`), its registrations, and its body in the transaction its annotations open.
    /// Returns its name and transaction when it is a proxied `@Transactional` method.
    pub(super) fn method(
        &mut self,
        n: Node<'_>,
        class: &[Annotation],
        interface: bool,
    ) -> Option<(String, TxMethod)> {
        let name = self.field_text(n, "name");
        let annotations = self.annotations_of(n);
        let role = method_role(class, &annotations);
        let mods = kids(n)
            .into_iter()
            .find(|c| c.kind() == "modifiers")
            .map(|m| self.text(m))
            .unwrap_or_default();
        // A proxy intercepts only calls of public, non-static methods from outside.
        let proxied = !mods.contains("private") && !mods.contains("static");
        let mut f = Function::new(name.clone());
        f.pos = self.b.pos(n);
        f.registrations = role.registrations;
        let joins = role.joins;
        if let Some(params) = n.child_by_field_name("parameters") {
            for p in kids(params) {
                if !matches!(p.kind(), "formal_parameter" | "spread_parameter") {
                    continue;
                }
                let anns: Vec<String> = self
                    .annotations_of(p)
                    .into_iter()
                    .map(|a| {
                        let mut s = a.name.clone();
                        for (_, v) in &a.args {
                            if let Some(t) = v.string_text() {
                                s.push(' ');
                                s.push_str(&t);
                            }
                        }
                        s
                    })
                    .collect();
                let ty = p
                    .child_by_field_name("type")
                    .map(|t| self.text(t))
                    .or_else(|| {
                        kids(p)
                            .into_iter()
                            .find(|c| c.kind().ends_with("type"))
                            .map(|t| self.text(t))
                    })
                    .unwrap_or_default();
                let pname = p
                    .child_by_field_name("name")
                    .or_else(|| {
                        kids(p)
                            .into_iter()
                            .find(|c| c.kind() == "variable_declarator")
                            .and_then(|d| d.child_by_field_name("name"))
                    })
                    .map(|x| self.text(x))
                    .unwrap_or_default();
                f.params.push(pname);
                let mut full = anns.join(" ");
                if !full.is_empty() {
                    full.push(' ');
                }
                full.push_str(&ty);
                f.param_types.push(full);
            }
        }
        let body = n.child_by_field_name("body");
        // A Spring Data repository method: its `@Query` is the SQL a call of it runs.
        let query = crate::lang::jvm::method::repository_query(&annotations);
        if body.is_none() && query.is_none() {
            return None;
        }
        let return_type = self.field_text(n, "type");
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
            self.stmt(body);
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

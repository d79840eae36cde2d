//! The workspace's module graph has no import cycle (docs/design.md §3): in a cycle no file can
//! be read first.
//!
//! A file refers to a module when it names it by `use crate::…`, an inline `crate::…` path
//! (in code or inside a macro call) or `super::…`; a path to an item that a module re-exports
//! (`pub use`) refers to the module that defines it. Comments and `#[cfg(test)]` items are left
//! out, and so are each crate's `error` modules: an error type that names the values it carries,
//! while every module returns it, is the usual Rust shape. Every crate under `crates/` and
//! `examples/` is read, binaries included (`src/bin/` is not: none is in the tree).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;

/// A module: its path from the crate root (`["config", "source"]`).
type Module = Vec<String>;

/// One crate's module files and what each refers to.
struct Crate {
    name: String,
    files: BTreeMap<Module, PathBuf>,
    /// `(module, name)` → the path a `pub use` in that module gives it (absolute, from the root).
    reexports: BTreeMap<(Module, String), Vec<String>>,
    /// Each module → the modules it refers to.
    edges: BTreeMap<Module, BTreeSet<Module>>,
}

#[test]
fn no_crate_has_an_import_cycle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut cycles = Vec::new();
    let mut crates = 0;
    for parent in ["crates", "examples"] {
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(root.join(parent))
            .expect("read the workspace")
            .map(|entry| entry.expect("a directory entry").path())
            .filter(|dir| dir.join("src").is_dir())
            .collect();
        dirs.sort();
        for dir in dirs {
            let krate = read_crate(&dir);
            crates += 1;
            for cycle in cycles_of(&krate) {
                cycles.push(format!("{}: {}", krate.name, cycle.join(" -> ")));
            }
        }
    }
    assert!(
        crates >= 9,
        "only {crates} crates found under {}",
        root.display()
    );
    assert!(
        cycles.is_empty(),
        "import cycles between modules:\n{}",
        cycles.join("\n")
    );
}

/// The definition catches the shapes the workspace once had: a module and its configuration
/// pointing at each other, through a re-export, and `super::` between siblings.
#[test]
fn the_cycles_the_workspace_once_had_are_found() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let src = dir.path().join("src");
    let write = |path: &str, text: &str| {
        let path = src.join(path);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("create a directory");
        std::fs::write(path, text).expect("write a file");
    };
    write(
        "lib.rs",
        "mod config;\nmod ingest;\nmod error;\npub use config::Config;\n",
    );
    // config/mod.rs re-exports what config/raw.rs defines; raw names ingest; ingest names
    // the config through the root's re-export; error modules never count.
    write(
        "config/mod.rs",
        "mod raw;\npub use raw::Raw;\npub struct Config;\n",
    );
    write(
        "config/raw.rs",
        "pub struct Raw(crate::ingest::Fields);\nfn f() -> crate::error::Error { todo!() }\n",
    );
    write(
        "ingest/mod.rs",
        "pub struct Fields;\nfn f() { let _ = crate::config::Raw::default; }\n// crate::lib is a comment\n",
    );
    write("error.rs", "pub struct Error(crate::config::Config);\n");
    let krate = read_crate(dir.path());
    let found = cycles_of(&krate);
    assert_eq!(found, [vec!["config/raw", "ingest", "config/raw"]]);

    // Inside a macro call, and between siblings through `super::`.
    write(
        "config/mod.rs",
        "mod raw;\nmod relay;\npub struct Config;\n",
    );
    write(
        "config/raw.rs",
        "fn f() { tracing::info!(x = ?super::relay::R); }\n",
    );
    write(
        "config/relay.rs",
        "pub struct R;\nuse super::raw as _;\nfn g() { let _ = super::raw::f; }\n",
    );
    write("ingest/mod.rs", "pub struct Fields;\n");
    let krate = read_crate(dir.path());
    assert_eq!(
        cycles_of(&krate),
        [vec!["config/raw", "config/relay", "config/raw"]]
    );
}

fn read_crate(dir: &Path) -> Crate {
    let src = dir.join("src");
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut files = BTreeMap::new();
    let mut stack = vec![src.clone()];
    while let Some(next) = stack.pop() {
        for entry in std::fs::read_dir(&next).expect("read a source directory") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.insert(module_of(&src, &path), path);
            }
        }
    }
    let mut krate = Crate {
        name,
        files,
        reexports: BTreeMap::new(),
        edges: BTreeMap::new(),
    };
    let parsed: Vec<(Module, syn::File)> = krate
        .files
        .iter()
        .map(|(module, path)| {
            let text = std::fs::read_to_string(path).expect("read a source file");
            let file = syn::parse_file(&text)
                .unwrap_or_else(|e| panic!("{} does not parse: {e}", path.display()));
            (module.clone(), file)
        })
        .collect();
    for (module, file) in &parsed {
        for item in &file.items {
            if let syn::Item::Use(item) = item
                && !matches!(item.vis, syn::Visibility::Inherited)
                && !is_test(&item.attrs)
            {
                let mut found = Vec::new();
                flatten(&item.tree, Vec::new(), &mut found);
                for (path, alias) in found {
                    if let Some(target) = absolute(module, &path, &krate.files) {
                        krate.reexports.insert((module.clone(), alias), target);
                    }
                }
            }
        }
    }
    krate
        .files
        .retain(|module, _| module.last().is_none_or(|last| last != "error"));
    let edges = parsed
        .into_iter()
        .filter(|(module, _)| krate.files.contains_key(module))
        .map(|(module, file)| {
            let mut paths = Paths::default();
            paths.visit_file(&file);
            let targets: BTreeSet<Module> = paths
                .0
                .iter()
                .filter_map(|path| absolute(&module, path, &krate.files))
                .filter_map(|path| resolve(&krate, &path, 0))
                .filter(|target| *target != module)
                .collect();
            (module, targets)
        })
        .collect();
    krate.edges = edges;
    krate
}

/// The module a file holds: `lib.rs`/`main.rs` the root, `a/mod.rs` and `a.rs` module `a`.
fn module_of(src: &Path, path: &Path) -> Module {
    let relative = path.strip_prefix(src).expect("a file under src");
    let mut parts: Module = relative
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") || parts == ["lib"] || parts == ["main"] {
        parts.pop();
    }
    parts
}

/// Whether the attributes hold `#[cfg(test)]`.
fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.meta
                .require_list()
                .is_ok_and(|l| l.tokens.to_string() == "test")
    })
}

fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    match item {
        syn::Item::Const(i) => &i.attrs,
        syn::Item::Enum(i) => &i.attrs,
        syn::Item::Fn(i) => &i.attrs,
        syn::Item::Impl(i) => &i.attrs,
        syn::Item::Macro(i) => &i.attrs,
        syn::Item::Mod(i) => &i.attrs,
        syn::Item::Static(i) => &i.attrs,
        syn::Item::Struct(i) => &i.attrs,
        syn::Item::Trait(i) => &i.attrs,
        syn::Item::Type(i) => &i.attrs,
        syn::Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

/// Every path a `use` tree names, with the name it is given.
fn flatten(tree: &syn::UseTree, prefix: Vec<String>, out: &mut Vec<(Vec<String>, String)>) {
    match tree {
        syn::UseTree::Path(p) => {
            let mut next = prefix;
            next.push(p.ident.to_string());
            flatten(&p.tree, next, out);
        }
        syn::UseTree::Name(n) => {
            let mut path = prefix;
            if n.ident != "self" {
                path.push(n.ident.to_string());
            }
            let name = path.last().cloned().unwrap_or_default();
            out.push((path, name));
        }
        syn::UseTree::Rename(r) => {
            let mut path = prefix;
            path.push(r.ident.to_string());
            out.push((path, r.rename.to_string()));
        }
        syn::UseTree::Glob(_) => out.push((prefix, "*".to_owned())),
        syn::UseTree::Group(g) => {
            for tree in &g.items {
                flatten(tree, prefix.clone(), out);
            }
        }
    }
}

/// `path` as written in `module`, from the crate root: `crate::a::B` is `a::B`, `super::x` is
/// the parent's `x`, and a path to a child module declared in `module` is under it. `None` for
/// paths into other crates.
fn absolute(
    module: &Module,
    path: &[String],
    files: &BTreeMap<Module, PathBuf>,
) -> Option<Vec<String>> {
    let (first, rest) = path.split_first()?;
    match first.as_str() {
        "crate" => Some(rest.to_vec()),
        "super" => {
            let mut base = module.clone();
            base.pop()?;
            let mut rest = rest;
            while rest.first().is_some_and(|s| s == "super") {
                base.pop()?;
                rest = &rest[1..];
            }
            base.extend(rest.iter().cloned());
            Some(base)
        }
        "self" => {
            let mut base = module.clone();
            base.extend(rest.iter().cloned());
            Some(base)
        }
        _ => {
            // `pub use child::X` in a module that declares `mod child;`.
            let mut child = module.clone();
            child.push(first.clone());
            files.contains_key(&child).then(|| {
                let mut base = module.clone();
                base.extend(path.iter().cloned());
                base
            })
        }
    }
}

/// The module that defines what `path` (from the root) names: the longest prefix that is a
/// module file, followed through that module's re-exports.
fn resolve(krate: &Crate, path: &[String], depth: usize) -> Option<Module> {
    for n in (0..=path.len()).rev() {
        let prefix = path[..n].to_vec();
        if is_error(krate, &prefix) {
            return None;
        }
        if !krate.files.contains_key(&prefix) {
            continue;
        }
        if let Some(name) = path.get(n)
            && depth < 8
            && let Some(target) = krate.reexports.get(&(prefix.clone(), name.clone()))
        {
            let mut target = target.clone();
            target.extend(path[n + 1..].iter().cloned());
            if let Some(found) = resolve(krate, &target, depth + 1) {
                return Some(found);
            }
        }
        return Some(prefix);
    }
    None
}

/// Whether `module` is one of the crate's `error` modules, which the graph leaves out.
fn is_error(krate: &Crate, module: &Module) -> bool {
    module.last().is_some_and(|last| last == "error") && !krate.files.contains_key(module)
}

/// The `crate::`, `super::` and `self::` paths of a file, in code and in macro calls.
#[derive(Default)]
struct Paths(Vec<Vec<String>>);

impl<'ast> Visit<'ast> for Paths {
    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        if segments
            .first()
            .is_some_and(|s| s == "crate" || s == "super")
        {
            self.0.push(segments);
        }
        syn::visit::visit_path(self, path);
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        let mut found = Vec::new();
        flatten(&item.tree, Vec::new(), &mut found);
        self.0.extend(
            found
                .into_iter()
                .map(|(path, _)| path)
                .filter(|path| path.first().is_some_and(|s| s == "crate" || s == "super")),
        );
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        syn::visit::visit_macro(self, mac);
        macro_paths(mac.tokens.clone(), &mut self.0);
    }

    fn visit_item(&mut self, item: &'ast syn::Item) {
        if !is_test(item_attrs(item)) {
            syn::visit::visit_item(self, item);
        }
    }
}

/// `crate :: a :: b` and `super :: x` sequences in a macro call's tokens.
fn macro_paths(tokens: TokenStream, out: &mut Vec<Vec<String>>) {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    let mut i = 0;
    while i < tokens.len() {
        match &tokens[i] {
            TokenTree::Group(group) => macro_paths(group.stream(), out),
            TokenTree::Ident(ident) if ident == "crate" || ident == "super" => {
                let mut path = vec![ident.to_string()];
                let mut j = i + 1;
                while let (
                    Some(TokenTree::Punct(a)),
                    Some(TokenTree::Punct(b)),
                    Some(TokenTree::Ident(next)),
                ) = (tokens.get(j), tokens.get(j + 1), tokens.get(j + 2))
                {
                    if a.as_char() != ':' || b.as_char() != ':' {
                        break;
                    }
                    path.push(next.to_string());
                    j += 3;
                }
                if path.len() > 1 {
                    out.push(path);
                }
                i = j;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
}

/// One cycle through each group of modules that refer to each other, as module names joined by
/// `/`, from the group's first module back to it.
fn cycles_of(krate: &Crate) -> Vec<Vec<String>> {
    let edges = &krate.edges;
    let name = |m: &Module| {
        if m.is_empty() {
            "(root)".to_owned()
        } else {
            m.join("/")
        }
    };
    let mut cycles = Vec::new();
    for component in strongly_connected(edges) {
        if component.len() < 2 {
            continue;
        }
        // One cycle through the component, from its first module, by breadth-first search.
        let start = &component[0];
        let inside: BTreeSet<&Module> = component.iter().collect();
        let mut previous: BTreeMap<&Module, &Module> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([start]);
        let mut closing = None;
        while let Some(at) = queue.pop_front() {
            for next in edges.get(at).into_iter().flatten() {
                if !inside.contains(next) {
                    continue;
                }
                if next == start {
                    closing = Some(at);
                    break;
                }
                if !previous.contains_key(next) {
                    previous.insert(next, at);
                    queue.push_back(next);
                }
            }
            if closing.is_some() {
                break;
            }
        }
        let mut path = vec![name(start)];
        let mut at = closing.expect("a component of two or more modules has a cycle");
        let mut back = vec![name(at)];
        while at != start {
            at = previous[at];
            if at != start {
                back.push(name(at));
            }
        }
        back.reverse();
        path.extend(back.into_iter().filter(|m| *m != name(start)));
        path.push(name(start));
        cycles.push(path);
    }
    cycles
}

/// Tarjan's strongly connected components, each sorted, in a fixed order.
fn strongly_connected(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    struct State<'a> {
        edges: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<&'a Module, usize>,
        low: BTreeMap<&'a Module, usize>,
        stack: Vec<&'a Module>,
        on_stack: BTreeSet<&'a Module>,
        out: Vec<Vec<Module>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a Module) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.edges.get(v).into_iter().flatten() {
            let Some((w, _)) = s.edges.get_key_value(w) else {
                continue;
            };
            if !s.index.contains_key(w) {
                visit(s, w);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.clone());
                if w == v {
                    break;
                }
            }
            component.sort();
            s.out.push(component);
        }
    }
    let mut state = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !state.index.contains_key(v) {
            visit(&mut state, v);
        }
    }
    state.out.sort();
    state.out
}

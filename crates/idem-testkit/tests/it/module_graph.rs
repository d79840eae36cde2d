//! The workspace's module graph has no import cycle (docs/design.md §3), and the gateway's modules
//! import only what their layer allows (docs/design.md §5).
//!
//! The rule is the one `/work/shared/tools/module_cycles.py` (with `module_graph.py --reader`)
//! applies, so that the test and the review's tool count the same edges, as a reader meets them:
//!
//! - every `use` and every path in code counts (`crate::…`, `super::…`, `self::…`, a child
//!   module's name such as `counts::ops::CountOps`, a name a `use` brought in), in macro calls
//!   too, resolved to the file that defines the item (a `pub use` is followed to its target);
//! - a `pub use` (re-export) is a signpost and counts as no edge; nor does a path to the crate
//!   root;
//! - `#[cfg(test)]` items are left out, the rest of the file is read;
//! - allowed: a cycle inside one folder (its `mod.rs` registering its direct children, which take
//!   shared types from it), and an error module naming the types its variants carry (a path
//!   from an `error` module ending in an upper-case name); an error module that calls another
//!   module's function is an edge like any other.
//!
//! Every crate under `crates/` and `examples/` is read (`src/bin/` is not).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;

/// A module: its path from the crate root (`["config", "source"]`); `[]` is the root.
type Module = Vec<String>;

/// A crate's module files and the edges between them.
struct Crate {
    name: String,
    /// Each file → the files it refers to, by the rule above.
    edges: BTreeMap<Module, BTreeSet<Module>>,
}

// ---- the checks on the workspace

#[test]
fn no_crate_has_an_import_cycle() {
    let mut cycles = Vec::new();
    let mut crates = 0;
    for dir in workspace_crates() {
        let krate = read_crate(&dir);
        crates += 1;
        for component in cycle_groups(&krate) {
            cycles.push(format!(
                "{}: {}",
                krate.name,
                one_cycle(&krate.edges, &component).join(" -> ")
            ));
        }
    }
    assert!(crates >= 9, "only {crates} crates found");
    assert!(
        cycles.is_empty(),
        "import cycles between modules:\n{}",
        cycles.join("\n")
    );
}

/// The gateway's layers (docs/design.md §5): each module imports only what its row of
/// [`GATEWAY_LAYERS`] allows.
#[test]
fn the_gateway_keeps_its_layers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let krate = read_crate(&root.join("crates/idem-gateway"));
    let breaches = layer_breaches(&krate, &gateway_layers());
    assert!(
        breaches.is_empty(),
        "imports the gateway's layers do not allow (docs/design.md §5):\n{}",
        breaches.join("\n")
    );
}

/// One module of the gateway's layer table: it may import every module of the layers below
/// layer `below` (`0`: none) and the modules `also` names. A module may always import inside
/// itself.
struct Row {
    module: &'static str,
    below: usize,
    also: &'static [&'static str],
}

const fn row(module: &'static str, below: usize, also: &'static [&'static str]) -> Row {
    Row {
        module,
        below,
        also,
    }
}

/// The gateway's layer table (docs/design.md §5), bottom (L0) to top (L6): each layer's
/// top-level modules (a file or a folder). A module missing from the table is a breach (place
/// it first). Re-exports and the crate root (`lib.rs`, which only declares and re-exports) are
/// not checked.
const GATEWAY_LAYERS: [&[Row]; 7] = [
    // L0: the vocabulary, which imports nothing of the crate.
    &[
        row("model", 0, &[]),
        row("metric_definitions", 0, &[]),
        row("tls", 0, &[]),
    ],
    // L1: configuration and storage, each on the part of the vocabulary it needs.
    &[
        row("config", 0, &["model", "tls"]),
        row("store", 0, &["model"]),
    ],
    // L2: the error type (only the values its variants carry) and in-memory coordination.
    &[
        row("error", 0, &["model", "config"]),
        row("audit", 0, &["metric_definitions"]),
        row("lanes", 2, &["error"]),
        row("writer_gate", 2, &["error"]),
        row("health", 2, &["error"]),
        row("traces", 2, &["error"]),
    ],
    // L3: the shared state, which keeps the wiring behind its swap point.
    &[row("wiring", 3, &[]), row("gateway", 3, &["wiring"])],
    // L4: behaviour; ingest and dispatch never import each other.
    &[
        row("ingest", 4, &[]),
        row("dispatch", 4, &[]),
        row("relays", 4, &[]),
        // Backfill decides and stores new deliveries as ingest does.
        row("operations", 4, &["ingest"]),
        row("destinations", 4, &[]),
        // The consumer inventory: the registry's reports with the gateway's counts.
        row("consumers", 4, &[]),
        // Its gauges read the consumer inventory.
        row("monitor", 4, &["consumers"]),
        // What asks for a reload and what it answers; the reload itself is assembly's.
        row("reload_request", 4, &[]),
    ],
    // L5: inputs and surfaces (axum only in http/): L0–L3 and the behaviour each calls.
    &[
        row("broker", 4, &["ingest"]),
        row(
            "http",
            4,
            &[
                "ingest",
                "operations",
                "destinations",
                "consumers",
                "reload_request",
            ],
        ),
    ],
    // L6: assembly imports everything.
    &[
        row("supervise", 7, &[]),
        // Starting a destination's dispatcher, at start and on a reload.
        row("dispatchers", 7, &[]),
        // Applying a reload: it stops and starts dispatchers.
        row("reload", 7, &[]),
        row("server", 7, &[]),
        row("demo", 7, &[]),
    ],
];

/// [`GATEWAY_LAYERS`] as `(module, what it may import)`, the form [`layer_breaches`] reads.
fn gateway_layers() -> Vec<(&'static str, Vec<&'static str>)> {
    let rows = || GATEWAY_LAYERS.iter().flat_map(|layer| layer.iter());
    rows()
        .map(|row| {
            let below = GATEWAY_LAYERS[..row.below]
                .iter()
                .flat_map(|layer| layer.iter());
            let allowed = below.map(|r| r.module).chain(row.also.iter().copied());
            (row.module, allowed.collect())
        })
        .collect()
}

/// Each edge of `krate` between top-level modules that `layers` does not allow, as
/// `from -> to (from's layer allows …)`.
fn layer_breaches<A: AsRef<[&'static str]>>(krate: &Crate, layers: &[(&str, A)]) -> Vec<String> {
    let mut breaches = Vec::new();
    for (from, targets) in &krate.edges {
        let Some(top) = from.first() else {
            continue; // the crate root
        };
        let Some(allowed) = layers
            .iter()
            .find(|(module, _)| module == top)
            .map(|(_, allowed)| allowed.as_ref())
        else {
            breaches.push(format!("{} is in no layer of the table", module_name(from)));
            continue;
        };
        for to in targets {
            let Some(to_top) = to.first() else {
                continue;
            };
            if to_top == top || allowed.contains(&"*") || allowed.contains(&to_top.as_str()) {
                continue;
            }
            breaches.push(format!(
                "{} -> {} ({top} may import {})",
                module_name(from),
                module_name(to),
                if allowed.is_empty() {
                    "nothing".to_owned()
                } else {
                    allowed.join(", ")
                }
            ));
        }
    }
    breaches
}

// ---- the rule on made-up crates

/// Writes `files` (path under `src/`, text) as a crate in a temporary directory and reads it.
fn made_up(files: &[(&str, &str)]) -> Crate {
    let dir = tempfile::tempdir().expect("a temporary directory");
    for (path, text) in files {
        let path = dir.path().join("src").join(path);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("create a directory");
        std::fs::write(path, text).expect("write a file");
    }
    read_crate(dir.path())
}

/// The shapes the workspace once had are cycles: a module and its configuration pointing at each
/// other through a re-export, `super::` between siblings, a path inside a macro call, a bare
/// child path, and an error module that calls a function.
#[test]
fn a_cycle_fails_the_check() {
    // config/raw names ingest; ingest names config::Raw through config's re-export.
    let krate = made_up(&[
        (
            "lib.rs",
            "mod config;\nmod ingest;\npub use config::Config;\n",
        ),
        (
            "config/mod.rs",
            "mod raw;\npub use raw::Raw;\npub struct Config;\n",
        ),
        ("config/raw.rs", "pub struct Raw(crate::ingest::Fields);\n"),
        (
            "ingest/mod.rs",
            "pub struct Fields;\nfn f() { let _ = crate::config::Raw::default; }\n// crate::lib\n",
        ),
    ]);
    assert_eq!(
        cycles_of(&krate),
        [vec!["config/raw", "ingest", "config/raw"]]
    );

    // Between two folders through `super::` and a macro call.
    let krate = made_up(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        ("a/mod.rs", "mod x;\n"),
        (
            "a/x.rs",
            "fn f() { tracing::info!(y = ?super::super::b::y::Y); }\n",
        ),
        ("b/mod.rs", "mod y;\n"),
        (
            "b/y.rs",
            "pub struct Y;\nfn g() { let _ = crate::a::x::f; }\n",
        ),
    ]);
    assert_eq!(cycles_of(&krate), [vec!["a/x", "b/y", "a/x"]]);

    // A bare child path (`counts::ops::CountOps`) counts, as does a name a `use` brought in.
    let krate = made_up(&[
        ("lib.rs", "mod store;\nmod counters;\n"),
        (
            "store/mod.rs",
            "mod counts;\ntrait Db: counts::ops::CountOps {}\n",
        ),
        (
            "store/counts.rs",
            "use crate::counters;\npub mod ops { pub trait CountOps {} }\nfn f() { counters::g(); }\n",
        ),
        (
            "counters.rs",
            "pub fn g() {}\nfn h() { let _ = crate::store::Db::f; }\n",
        ),
    ]);
    assert_eq!(
        cycles_of(&krate),
        [vec!["counters", "store", "store/counts", "counters"]]
    );

    // An error module that calls a function of the module it names is an edge.
    let krate = made_up(&[
        ("lib.rs", "mod error;\nmod time;\n"),
        (
            "error.rs",
            "pub enum Error { Time(String) }\nfn f() -> String { crate::time::format(0) }\n",
        ),
        (
            "time.rs",
            "pub fn format(_: i64) -> String { String::new() }\nfn g() -> crate::error::Error { todo!() }\n",
        ),
    ]);
    assert_eq!(cycles_of(&krate), [vec!["error", "time", "error"]]);
}

/// What the rule allows: a folder's `mod.rs` with its own children, an error module naming the
/// types its variants carry, re-exports, paths to the root and `#[cfg(test)]` items.
#[test]
fn the_allowed_shapes_pass_the_check() {
    let krate = made_up(&[
        (
            "lib.rs",
            "mod config;\nmod error;\nmod ingest;\npub use ingest::Fields;\npub struct Root;\n",
        ),
        // config/mod.rs calls its children, which take shared types from it.
        (
            "config/mod.rs",
            "mod source;\npub struct Shared;\nfn build() { source::build(); }\n",
        ),
        (
            "config/source.rs",
            "use super::Shared;\npub fn build() -> Option<Shared> { None }\nfn e() -> crate::error::Error { todo!() }\n",
        ),
        // The error names a type of config, which returns the error.
        (
            "error.rs",
            "pub enum Error { Config(crate::config::Shared) }\n",
        ),
        // A path to the root, and a test item that would close a cycle.
        (
            "ingest/mod.rs",
            "pub struct Fields;\nfn f() -> crate::Root { crate::Root }\n#[cfg(test)]\nmod tests { use crate::config::Shared; fn g() { let _ = crate::ingest::Fields; } }\n",
        ),
    ]);
    assert_eq!(cycles_of(&krate), Vec::<Vec<String>>::new());
    assert!(krate.edges[&module("config/source")].contains(&module("error")));
}

/// The layer check names an import that goes up or sideways, and a module the table does not
/// place.
#[test]
fn a_layer_breach_fails_the_check() {
    const LAYERS: &[(&str, &[&str])] = &[
        ("model", &[]),
        ("config", &["model"]),
        ("ingest", &["model", "config"]),
        ("dispatch", &["model", "config"]),
        ("server", &["*"]),
    ];
    let krate = made_up(&[
        (
            "lib.rs",
            "mod model;\nmod config;\nmod ingest;\nmod dispatch;\nmod server;\n",
        ),
        ("model/mod.rs", "mod time;\npub use time::Time;\n"),
        ("model/time.rs", "pub struct Time;\n"),
        ("config/mod.rs", "pub struct Config(crate::model::Time);\n"),
        (
            "ingest/mod.rs",
            "use crate::config::Config;\npub fn run(_: Config) { crate::dispatch::wake(); }\n",
        ),
        ("dispatch/mod.rs", "pub fn wake() {}\n"),
        (
            "server.rs",
            "fn start() { crate::ingest::run(todo!()); crate::dispatch::wake(); }\n",
        ),
    ]);
    assert_eq!(
        layer_breaches(&krate, LAYERS),
        ["ingest -> dispatch (ingest may import model, config)"]
    );

    // Going down passes; going up fails; an unplaced module fails.
    let krate = made_up(&[
        ("lib.rs", "mod model;\nmod config;\nmod extra;\n"),
        ("model/mod.rs", "pub fn f() { crate::config::g(); }\n"),
        ("config/mod.rs", "pub fn g() {}\n"),
        ("extra.rs", "pub fn h() {}\n"),
    ]);
    assert_eq!(
        layer_breaches(&krate, LAYERS),
        [
            "extra is in no layer of the table",
            "model -> config (model may import nothing)"
        ]
    );
}

/// Every module of the table is a top-level module name (no path), and every name a row allows
/// has a row of its own: a typo cannot switch a check off.
#[test]
fn the_layer_table_names_only_its_own_modules() {
    let layers = gateway_layers();
    let rows: BTreeSet<&str> = layers.iter().map(|(module, _)| *module).collect();
    for (module, allowed) in &layers {
        assert!(!module.contains('/') && !module.contains("::"), "{module}");
        for name in allowed {
            assert!(
                *name == "*" || rows.contains(name),
                "{module} allows {name}"
            );
        }
    }
}

// ---- reading a crate

/// The crate directories of the workspace: `crates/*` and `examples/*` with a `src/`.
fn workspace_crates() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut dirs = Vec::new();
    for parent in ["crates", "examples"] {
        dirs.extend(
            std::fs::read_dir(root.join(parent))
                .expect("read the workspace")
                .map(|entry| entry.expect("a directory entry").path())
                .filter(|dir| dir.join("src").is_dir()),
        );
    }
    dirs.sort();
    dirs
}

/// `a/b` as a module.
fn module(text: &str) -> Module {
    text.split('/')
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// `a/b`, or `(root)`.
fn module_name(m: &Module) -> String {
    if m.is_empty() {
        "(root)".to_owned()
    } else {
        m.join("/")
    }
}

/// A `use` leaf: its path as written, the name it gives, and whether it is a re-export.
struct Use {
    path: Vec<String>,
    name: String,
    public: bool,
}

/// What one module scope (a file, or an inline `mod x { }` in it) says.
struct Scope {
    /// The scope's module path.
    scope: Module,
    /// The file it is in.
    file: Module,
    /// The child modules it declares (`mod x;`, `mod x { }`), test modules left out.
    children: BTreeSet<String>,
    uses: Vec<Use>,
    /// The paths of two or more segments in its code and macro calls.
    paths: Vec<Vec<String>>,
}

fn read_crate(dir: &Path) -> Crate {
    let src = dir.join("src");
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut scopes = Vec::new();
    for path in source_files(&src) {
        let file = module_of(&src, &path);
        let text = std::fs::read_to_string(&path).expect("read a source file");
        let parsed = syn::parse_file(&text)
            .unwrap_or_else(|e| panic!("{} does not parse: {e}", path.display()));
        scan(&parsed.items, file.clone(), &file, &mut scopes);
    }
    let edges = Resolver::new(&scopes).edges();
    Crate { name, edges }
}

/// The `.rs` files under `src`, `src/bin/` left out.
fn source_files(src: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![src.to_owned()];
    while let Some(next) = stack.pop() {
        for entry in std::fs::read_dir(&next).expect("read a source directory") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                if path != src.join("bin") {
                    stack.push(path);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
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

/// Records the scope `scope` of `items` (in `file`) and the inline modules in it, test items
/// left out.
fn scan(items: &[syn::Item], scope: Module, file: &Module, out: &mut Vec<Scope>) {
    let mut paths = Paths::default();
    let mut children = BTreeSet::new();
    let mut uses = Vec::new();
    for item in items.iter().filter(|item| !is_test(item_attrs(item))) {
        match item {
            syn::Item::Mod(m) => {
                children.insert(m.ident.to_string());
                if let Some((_, inner)) = &m.content {
                    let mut inner_scope = scope.clone();
                    inner_scope.push(m.ident.to_string());
                    scan(inner, inner_scope, file, out);
                }
            }
            syn::Item::Use(u) => {
                let public = !matches!(u.vis, syn::Visibility::Inherited);
                let mut found = Vec::new();
                flatten(&u.tree, Vec::new(), &mut found);
                uses.extend(
                    found
                        .into_iter()
                        .map(|(path, name)| Use { path, name, public }),
                );
            }
            other => paths.visit_item(other),
        }
    }
    uses.extend(paths.uses.into_iter().map(|(path, name)| Use {
        path,
        name,
        public: false,
    }));
    out.push(Scope {
        scope,
        file: file.clone(),
        children,
        uses,
        paths: paths.paths,
    });
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

/// Every path a `use` tree names, with the name it is given (`*` for a glob).
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
        syn::UseTree::Glob(_) => {
            let mut path = prefix;
            path.push("*".to_owned());
            out.push((path, "*".to_owned()));
        }
        syn::UseTree::Group(g) => {
            for tree in &g.items {
                flatten(tree, prefix.clone(), out);
            }
        }
    }
}

/// The paths of two or more segments in code and in macro calls, and the `use`s inside
/// function bodies; test items and inline modules (scopes of their own) left out.
#[derive(Default)]
struct Paths {
    paths: Vec<Vec<String>>,
    uses: Vec<(Vec<String>, String)>,
}

impl<'ast> Visit<'ast> for Paths {
    fn visit_path(&mut self, path: &'ast syn::Path) {
        if path.segments.len() > 1 {
            self.paths
                .push(path.segments.iter().map(|s| s.ident.to_string()).collect());
        }
        syn::visit::visit_path(self, path);
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        flatten(&item.tree, Vec::new(), &mut self.uses);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        syn::visit::visit_macro(self, mac);
        macro_paths(mac.tokens.clone(), &mut self.paths);
    }

    fn visit_item_mod(&mut self, _: &'ast syn::ItemMod) {}

    fn visit_item(&mut self, item: &'ast syn::Item) {
        if !is_test(item_attrs(item)) {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_impl_item_fn(&mut self, item: &'ast syn::ImplItemFn) {
        if !is_test(&item.attrs) {
            syn::visit::visit_impl_item_fn(self, item);
        }
    }
}

/// `a :: b :: c` sequences of identifiers in a macro call's tokens.
fn macro_paths(tokens: TokenStream, out: &mut Vec<Vec<String>>) {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    let mut i = 0;
    while i < tokens.len() {
        match &tokens[i] {
            TokenTree::Group(group) => macro_paths(group.stream(), out),
            TokenTree::Ident(ident) => {
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
                    i = j;
                    continue;
                }
            }
            _ => {}
        }
        i += 1;
    }
}

// ---- resolving paths to the files that define what they name

/// Keywords that start no module path (`Self::new`, `match`); `crate`, `self` and `super` do.
const KEYWORDS: &[&str] = &[
    "as", "break", "const", "continue", "else", "enum", "extern", "false", "fn", "for", "if",
    "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref", "return", "Self",
    "static", "struct", "trait", "true", "type", "unsafe", "use", "where", "while", "async",
    "await", "dyn",
];

/// A path from the crate root, or one that starts with a name a `use` brought in.
enum Absolute {
    Path(Vec<String>),
    Imported(Vec<String>),
}

struct Resolver<'a> {
    scopes: &'a [Scope],
    /// Every scope (file or inline module) → the file it is in.
    file_of: BTreeMap<Module, Module>,
    children: BTreeMap<Module, &'a BTreeSet<String>>,
    /// Scope → name → the absolute path a `use` in it gives the name.
    imported: BTreeMap<Module, BTreeMap<String, Vec<String>>>,
    /// `(scope, name)` → the absolute path a `pub use` in it gives the name.
    reexports: BTreeMap<(Module, String), Vec<String>>,
}

impl<'a> Resolver<'a> {
    fn new(scopes: &'a [Scope]) -> Self {
        let mut resolver = Self {
            scopes,
            file_of: scopes
                .iter()
                .map(|s| (s.scope.clone(), s.file.clone()))
                .collect(),
            children: scopes
                .iter()
                .map(|s| (s.scope.clone(), &s.children))
                .collect(),
            imported: BTreeMap::new(),
            reexports: BTreeMap::new(),
        };
        for scope in scopes {
            for u in &scope.uses {
                let Some(Absolute::Path(mut path)) = resolver.absolute(&scope.scope, &u.path)
                else {
                    continue;
                };
                if path.last().is_some_and(|last| last == "*") || path.is_empty() {
                    continue;
                }
                if path.last().is_some_and(|last| last == "self") {
                    path.pop();
                }
                let names = resolver.imported.entry(scope.scope.clone()).or_default();
                names.insert(u.name.clone(), path.clone());
                if u.public {
                    resolver
                        .reexports
                        .insert((scope.scope.clone(), u.name.clone()), path);
                }
            }
        }
        resolver
    }

    /// Each file → the files it refers to.
    fn edges(&self) -> BTreeMap<Module, BTreeSet<Module>> {
        let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
        for scope in self.scopes {
            let from = &scope.file;
            edges.entry(from.clone()).or_default();
            let private_uses = scope.uses.iter().filter(|u| !u.public).map(|u| &u.path);
            let code = scope.paths.iter().filter(|p| {
                let first = p[0].as_str();
                !KEYWORDS.contains(&first)
            });
            for path in private_uses.chain(code) {
                let is_error = from.last().is_some_and(|last| last == "error");
                let names_type = path
                    .last()
                    .and_then(|last| last.chars().next())
                    .is_some_and(char::is_uppercase);
                if is_error && names_type {
                    continue;
                }
                if let Some(to) = self.defining_file(&scope.scope, path)
                    && to != *from
                    && !to.is_empty()
                {
                    edges.entry(from.clone()).or_default().insert(to);
                }
            }
        }
        edges
    }

    /// `path` as written in `scope`, from the root; `None` for paths into other crates.
    fn absolute(&self, scope: &Module, path: &[String]) -> Option<Absolute> {
        let (first, rest) = path.split_first()?;
        let mut base = scope.clone();
        match first.as_str() {
            "crate" => return Some(Absolute::Path(rest.to_vec())),
            "self" => {}
            "super" => {
                base.pop()?;
                let mut rest = rest;
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop()?;
                    rest = &rest[1..];
                }
                base.extend(rest.iter().cloned());
                return Some(Absolute::Path(base));
            }
            _ if self.children.get(scope).is_some_and(|c| c.contains(first)) => {
                base.extend(path.iter().cloned());
                return Some(Absolute::Path(base));
            }
            _ => return Some(Absolute::Imported(path.to_vec())),
        }
        base.extend(rest.iter().cloned());
        Some(Absolute::Path(base))
    }

    /// The file that defines what `path` (written in `scope`) names, if it is in this crate.
    fn defining_file(&self, scope: &Module, path: &[String]) -> Option<Module> {
        let mut path = match self.absolute(scope, path)? {
            Absolute::Path(path) => path,
            Absolute::Imported(path) => {
                let (name, rest) = path.split_first()?;
                let mut target = self.imported.get(scope)?.get(name)?.clone();
                target.extend(rest.iter().cloned());
                target
            }
        };
        if path
            .last()
            .is_some_and(|last| last == "*" || last == "self")
        {
            path.pop();
        }
        self.resolve(&path, 0)
    }

    /// The longest prefix of `path` that is a module, followed through that module's
    /// re-exports; the file it is in.
    fn resolve(&self, path: &[String], depth: usize) -> Option<Module> {
        let n = (0..=path.len())
            .rev()
            .find(|&n| self.file_of.contains_key(&path[..n]))?;
        let prefix = path[..n].to_vec();
        if let Some(name) = path.get(n)
            && depth < 8
            && let Some(target) = self.reexports.get(&(prefix.clone(), name.clone()))
        {
            let mut target = target.clone();
            target.extend(path[n + 1..].iter().cloned());
            if let Some(found) = self.resolve(&target, depth + 1) {
                return Some(found);
            }
        }
        self.file_of.get(&prefix).cloned()
    }
}

// ---- cycles

/// One cycle through each group of files that refer to each other (a folder's `mod.rs` with its
/// direct children allowed), as module names joined by `/`, from the group's first module back
/// to it.
fn cycles_of(krate: &Crate) -> Vec<Vec<String>> {
    cycle_groups(krate)
        .iter()
        .map(|component| one_cycle(&krate.edges, component))
        .collect()
}

/// The groups of files that refer to each other, each sorted, the allowed ones left out.
fn cycle_groups(krate: &Crate) -> Vec<Vec<Module>> {
    strongly_connected(&krate.edges)
        .into_iter()
        .filter(|component| component.len() > 1 && !inside_one_folder(component))
        .collect()
}

/// Whether a group of files is a folder's `mod.rs` (the shortest module) and its direct
/// children only.
fn inside_one_folder(component: &[Module]) -> bool {
    let Some(parent) = component.iter().min_by_key(|m| m.len()) else {
        return true;
    };
    component
        .iter()
        .all(|m| m == parent || (m.len() == parent.len() + 1 && m[..parent.len()] == parent[..]))
}

/// A cycle through `component` from its first module, found by breadth-first search.
fn one_cycle(edges: &BTreeMap<Module, BTreeSet<Module>>, component: &[Module]) -> Vec<String> {
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
    let mut at = closing.expect("a component of two or more modules has a cycle");
    let mut back = vec![module_name(at)];
    while at != start {
        at = previous[at];
        if at != start {
            back.push(module_name(at));
        }
    }
    back.reverse();
    let mut path = vec![module_name(start)];
    path.extend(back.into_iter().filter(|m| *m != module_name(start)));
    path.push(module_name(start));
    path
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

//! No import circles inside a crate: docs/architecture.md's rule that files, like crates,
//! form a layering. Every library and binary source file of every workspace member is
//! parsed with `syn`; each `use` and each `crate::`/`super::`/`self::` path is resolved to
//! the file that defines the name it takes (following re-exports, so a name a `lib.rs` or
//! `mod.rs` merely hands on ties to where it is defined); the test fails with each circle
//! of files that import each other, and the names that tie them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// One parsed source file: where it sits in its crate's module tree and what it holds.
struct SourceFile {
    /// The module path from the crate root (`[]` for `lib.rs`/`main.rs`).
    module: Vec<String>,
    /// Names defined at the file's top level (items and inline modules).
    defined: BTreeSet<String>,
    /// Modules this file declares with `mod NAME;` (their code lives in other files).
    children: BTreeSet<String>,
    /// `use` imports at the file's top level: the name they bring in → the path it came
    /// from (absolute, from the crate root), for following re-exports.
    imported: BTreeMap<String, Vec<String>>,
    /// Glob imports at the top level (`use a::b::*`): absolute module paths.
    globs: Vec<Vec<String>>,
    /// Every absolute path the file uses (imports and qualified paths in code).
    uses: Vec<Vec<String>>,
    /// Names brought in from the file's own child modules (`pub use child::Name`): an
    /// import only where the file's own code uses the name too, else a hand-on.
    from_children: Vec<(String, Vec<String>)>,
    /// Every identifier the file's code names in a path (`Handler` in a field's type).
    named: BTreeSet<String>,
}

/// All the files of one crate (one library or binary target), by module path.
struct Crate {
    files: BTreeMap<Vec<String>, (PathBuf, SourceFile)>,
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the workspace root")
        .to_path_buf()
}

/// The workspace members' `src/` folders.
fn source_roots() -> Vec<PathBuf> {
    let root = root();
    let text = std::fs::read_to_string(root.join("Cargo.toml")).expect("read Cargo.toml");
    let table: toml::Table = text.parse().expect("Cargo.toml is TOML");
    table["workspace"]["members"]
        .as_array()
        .expect("workspace.members")
        .iter()
        .map(|m| root.join(m.as_str().expect("a path")).join("src"))
        .filter(|src| src.is_dir())
        .collect()
}

/// Every crate root in a `src/` folder: `lib.rs`, `main.rs` and each `bin/*.rs`.
fn crate_roots(src: &Path) -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = ["lib.rs", "main.rs"]
        .iter()
        .map(|f| src.join(f))
        .filter(|p| p.is_file())
        .collect();
    if let Ok(bins) = std::fs::read_dir(src.join("bin")) {
        for entry in bins.flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "rs") {
                roots.push(path);
            }
        }
    }
    roots
}

/// Reads one crate from its root file, following `mod NAME;` declarations.
fn load_crate(root_file: &Path) -> Crate {
    let mut files = BTreeMap::new();
    let mut queue = vec![(root_file.to_path_buf(), Vec::<String>::new())];
    while let Some((path, module)) = queue.pop() {
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        let ast = syn::parse_file(&text)
            .unwrap_or_else(|e| panic!("{} does not parse: {e}", path.display()));
        let file = read_file(&ast, &module);
        // Where this file's child modules live: beside a crate root or `mod.rs`, else in a
        // folder named after the file.
        let is_dir_owner = module.is_empty()
            || path.file_name().is_some_and(|n| n == "mod.rs")
            || path
                .parent()
                .and_then(|p| p.file_name())
                .is_some_and(|n| n == "bin");
        let dir = if is_dir_owner {
            path.parent().expect("a file has a folder").to_path_buf()
        } else {
            path.with_extension("")
        };
        for child in &file.children {
            let flat = dir.join(format!("{child}.rs"));
            let nested = dir.join(child).join("mod.rs");
            let child_path = if flat.is_file() { flat } else { nested };
            if child_path.is_file() {
                let mut child_module = module.clone();
                child_module.push(child.clone());
                queue.push((child_path, child_module));
            }
        }
        files.insert(module, (path, file));
    }
    Crate { files }
}

/// What one file defines, declares and uses.
fn read_file(ast: &syn::File, module: &[String]) -> SourceFile {
    let mut file = SourceFile {
        module: module.to_vec(),
        defined: BTreeSet::new(),
        children: BTreeSet::new(),
        imported: BTreeMap::new(),
        globs: Vec::new(),
        uses: Vec::new(),
        from_children: Vec::new(),
        named: BTreeSet::new(),
    };
    for item in &ast.items {
        if let Some(name) = item_name(item) {
            file.defined.insert(name);
        }
        if let syn::Item::Mod(m) = item
            && m.content.is_none()
        {
            file.children.insert(m.ident.to_string());
        }
    }
    let mut visitor = PathVisitor {
        file: &mut file,
        inline: Vec::new(),
    };
    visitor.visit_file(ast);
    file
}

fn item_name(item: &syn::Item) -> Option<String> {
    let ident = match item {
        syn::Item::Const(i) => &i.ident,
        syn::Item::Enum(i) => &i.ident,
        syn::Item::Fn(i) => &i.sig.ident,
        syn::Item::Mod(i) => &i.ident,
        syn::Item::Static(i) => &i.ident,
        syn::Item::Struct(i) => &i.ident,
        syn::Item::Trait(i) => &i.ident,
        syn::Item::Type(i) => &i.ident,
        syn::Item::Union(i) => &i.ident,
        syn::Item::Macro(i) => i.ident.as_ref()?,
        _ => return None,
    };
    Some(ident.to_string())
}

/// Collects the paths of one file, tracking the inline modules it is inside.
struct PathVisitor<'a> {
    file: &'a mut SourceFile,
    inline: Vec<String>,
}

impl PathVisitor<'_> {
    /// The module the visitor stands in: the file's, plus inline modules.
    fn here(&self) -> Vec<String> {
        let mut here = self.file.module.clone();
        here.extend(self.inline.iter().cloned());
        here
    }

    /// A path's segments made absolute from the crate root, or `None` for a path that
    /// names something outside the crate or a local name.
    fn absolute(&self, segments: &[String]) -> Option<Vec<String>> {
        let first = segments.first()?;
        let mut out = match first.as_str() {
            "crate" => Vec::new(),
            "self" => self.here(),
            "super" => {
                let mut here = self.here();
                let mut rest = segments;
                while rest.first().is_some_and(|s| s == "super") {
                    here.pop();
                    rest = &rest[1..];
                }
                here.extend(rest.iter().cloned());
                return Some(here);
            }
            // A child module declared in this file, named without `self::`.
            name if self.inline.is_empty() && self.file.children.contains(name) => {
                let mut here = self.here();
                here.push(name.to_string());
                here.extend(segments[1..].iter().cloned());
                return Some(here);
            }
            _ => return None,
        };
        out.extend(segments[1..].iter().cloned());
        Some(out)
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree, top: bool) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree, top);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let mut full = prefix.clone();
                let name = n.ident.to_string();
                if name != "self" {
                    full.push(name.clone());
                }
                self.record_use(&full, top.then_some(name));
            }
            syn::UseTree::Rename(r) => {
                let mut full = prefix.clone();
                full.push(r.ident.to_string());
                self.record_use(&full, top.then(|| r.rename.to_string()));
            }
            syn::UseTree::Glob(_) => {
                if let Some(abs) = self.absolute(prefix) {
                    if top {
                        self.file.globs.push(abs.clone());
                    }
                    if !self.names_own_child(prefix) {
                        self.file.uses.push(abs);
                    }
                }
            }
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(prefix, t, top);
                }
            }
        }
    }

    fn record_use(&mut self, full: &[String], bound_as: Option<String>) {
        if let Some(abs) = self.absolute(full) {
            if let Some(name) = &bound_as {
                self.file.imported.insert(name.clone(), abs.clone());
            }
            if !self.names_own_child(full) {
                self.file.uses.push(abs);
            } else if let Some(name) = bound_as {
                self.file.from_children.push((name, abs));
            }
        }
    }

    /// Whether a path starts at a module this file declares (`mod x;` … `x::f()` or
    /// `pub use x::Name`): a parent reaching into its own child, which is how a module
    /// tree is built, not an import between peers. It still counts for resolution, so a
    /// name handed on this way ties its users to the child that defines it.
    fn names_own_child(&self, segments: &[String]) -> bool {
        self.inline.is_empty()
            && segments
                .first()
                .is_some_and(|first| self.file.children.contains(first))
    }
}

impl<'ast> Visit<'ast> for PathVisitor<'_> {
    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        let top = self.inline.is_empty();
        self.use_tree(&mut Vec::new(), &item.tree, top);
    }

    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        // Unit tests inside a file see the file from outside, as tests/ files do: their
        // imports are not the structure.
        if item.content.is_some() && !is_cfg_test(&item.attrs) {
            self.inline.push(item.ident.to_string());
            syn::visit::visit_item_mod(self, item);
            self.inline.pop();
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        self.file.named.extend(segments.iter().cloned());
        if segments.len() > 1
            && !self.names_own_child(&segments)
            && let Some(abs) = self.absolute(&segments)
        {
            self.file.uses.push(abs);
        }
        syn::visit::visit_path(self, path);
    }
}

/// Whether an item carries `#[cfg(test)]`.
fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.parse_args::<syn::Ident>()
                .is_ok_and(|ident| ident == "test")
    })
}

impl Crate {
    /// The file that defines what an absolute path names: the longest module prefix that
    /// is a file, then the name after it followed through that file's re-exports.
    fn resolve(&self, path: &[String], depth: usize) -> Option<Vec<String>> {
        if depth > 16 {
            return None;
        }
        let (module, rest) = (0..=path.len())
            .rev()
            .find(|&n| self.files.contains_key(&path[..n]))
            .map(|n| (path[..n].to_vec(), &path[n..]))?;
        let Some(name) = rest.first() else {
            return Some(module); // the module itself (`use crate::x;`)
        };
        let (_, file) = &self.files[&module];
        if file.defined.contains(name) {
            return Some(module);
        }
        if let Some(source) = file.imported.get(name) {
            let mut next = source.clone();
            next.extend(rest[1..].iter().cloned());
            return self.resolve(&next, depth + 1).or(Some(module));
        }
        for glob in &file.globs {
            let mut next = glob.clone();
            next.extend(rest.iter().cloned());
            if let Some(found) = self.resolve(&next, depth + 1)
                && found != *glob
            {
                return Some(found);
            }
        }
        Some(module)
    }

    /// File → (file it imports → the names taken), self-edges left out.
    fn edges(&self) -> BTreeMap<&Vec<String>, BTreeMap<Vec<String>, BTreeSet<String>>> {
        let mut edges: BTreeMap<&Vec<String>, BTreeMap<Vec<String>, BTreeSet<String>>> =
            BTreeMap::new();
        for (module, (_, file)) in &self.files {
            let out = edges.entry(module).or_default();
            let handed_on_and_used = file
                .from_children
                .iter()
                .filter(|(name, _)| file.named.contains(name))
                .map(|(_, path)| path);
            for used in file.uses.iter().chain(handed_on_and_used) {
                // A glob of a module this file declares is the parent handing its child's
                // names on; a glob of an ancestor is the common `use super::*` of a child.
                let Some(target) = self.resolve(used, 0) else {
                    continue;
                };
                if target != *module {
                    let name = used.last().cloned().unwrap_or_default();
                    out.entry(target).or_default().insert(name);
                }
            }
        }
        edges
    }
}

/// Tarjan's strongly connected components of size > 1.
fn circles(nodes: &[Vec<String>], edges: &BTreeMap<usize, Vec<usize>>) -> Vec<Vec<usize>> {
    struct State<'a> {
        edges: &'a BTreeMap<usize, Vec<usize>>,
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        found: Vec<Vec<usize>>,
    }
    fn connect(s: &mut State<'_>, v: usize) {
        s.index[v] = Some(s.next);
        s.low[v] = s.next;
        s.next += 1;
        s.stack.push(v);
        s.on_stack[v] = true;
        for &w in s.edges.get(&v).map(Vec::as_slice).unwrap_or_default() {
            match s.index[w] {
                None => {
                    connect(s, w);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(iw) if s.on_stack[w] => s.low[v] = s.low[v].min(iw),
                Some(_) => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack[w] = false;
                component.push(w);
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                s.found.push(component);
            }
        }
    }
    let n = nodes.len();
    let mut state = State {
        edges,
        index: vec![None; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        next: 0,
        found: Vec::new(),
    };
    for v in 0..n {
        if state.index[v].is_none() {
            connect(&mut state, v);
        }
    }
    state.found
}

/// Every circle of one crate, described for a failure message.
fn crate_circles(krate: &Crate) -> Vec<String> {
    let nodes: Vec<Vec<String>> = krate.files.keys().cloned().collect();
    let position: BTreeMap<&Vec<String>, usize> =
        nodes.iter().enumerate().map(|(i, m)| (m, i)).collect();
    let named = krate.edges();
    let edges: BTreeMap<usize, Vec<usize>> = named
        .iter()
        .map(|(from, to)| (position[from], to.keys().map(|t| position[t]).collect()))
        .collect();
    let show = |m: &Vec<String>| {
        let (path, _) = &krate.files[m];
        path.strip_prefix(root())
            .unwrap_or(path)
            .display()
            .to_string()
    };
    circles(&nodes, &edges)
        .into_iter()
        .map(|component| {
            let members: BTreeSet<usize> = component.iter().copied().collect();
            let mut lines = vec![format!("a circle of {} files:", members.len())];
            for &from in &members {
                for (to, names) in &named[&nodes[from]] {
                    if members.contains(&position[to]) {
                        let names: Vec<&str> = names.iter().map(String::as_str).collect();
                        lines.push(format!(
                            "  {} -> {}: {}",
                            show(&nodes[from]),
                            show(to),
                            names.join(", ")
                        ));
                    }
                }
            }
            lines.join("\n")
        })
        .collect()
}

#[test]
fn no_crate_has_an_import_circle_between_its_files() {
    let mut found = Vec::new();
    let mut crates = 0;
    for src in source_roots() {
        for root_file in crate_roots(&src) {
            let krate = load_crate(&root_file);
            crates += 1;
            found.extend(crate_circles(&krate));
        }
    }
    assert!(crates > 10, "the check read only {crates} crates");
    assert!(
        found.is_empty(),
        "{} import circle(s) between files (docs/architecture.md: files form layers as \
         crates do; move what both sides need into a file both import):\n{}",
        found.len(),
        found.join("\n")
    );
}

#[test]
fn the_circle_check_finds_a_circle_and_follows_re_exports() {
    // A crate in miniature: `a` imports `b` through the root's re-export, `b` imports
    // `a` by its path, and `c` only imports `a`.
    let dir = std::env::temp_dir().join(format!("provrun-circles-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("lib.rs"), "mod a; mod b; mod c; pub use b::Bee;\n").unwrap();
    std::fs::write(dir.join("a.rs"), "use crate::Bee;\npub struct Ay;\n").unwrap();
    std::fs::write(dir.join("b.rs"), "pub struct Bee(crate::a::Ay);\n").unwrap();
    std::fs::write(dir.join("c.rs"), "use super::a::Ay;\n").unwrap();
    let krate = load_crate(&dir.join("lib.rs"));
    let found = crate_circles(&krate);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("a circle of 2 files"), "{}", found[0]);
    assert!(found[0].contains("a.rs -> "), "{}", found[0]);
    assert!(found[0].contains(": Bee"), "{}", found[0]);
    assert!(!found[0].contains("c.rs"), "{}", found[0]);
    assert!(!found[0].contains("lib.rs ->"), "{}", found[0]);
}

//! The public API of `pisces`, listed from its source and compared with the committed
//! listing `crates/pisces/public-api.txt`: a change to the API (an item added, removed,
//! renamed or re-signed) fails this test until the listing is blessed with it, so every
//! change to the surface shows in review.
//!
//! The listing is what a user of the crate can name: the items `lib.rs` makes reachable
//! (`pub` items of `pub` modules, and `pub use` re-exports followed to the items they
//! name, under the name they are exported as), one line each with its signature: a
//! function's or method's signature, a struct's public fields, an enum's variants, a
//! trait's items, the inherent `pub` methods and the trait impls of each listed type,
//! `#[macro_export]` macros. Items under `#[cfg(...)]` (the `tools` and `mutation`
//! features) are listed with it; `#[cfg(test)]` code is left out. Re-exports of other
//! crates' items are listed by path. It is read from the source with `syn`, so it needs
//! no rustdoc JSON (a nightly tool) and no build of its own.
//!
//! Bless a change: `PISCES_BLESS=1 cargo test -p pisces --test public_api`.

use quote::ToTokens;
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

/// A module of the crate: its items, its file's folder for child modules, and the cfg
/// attributes on its declaration.
struct Module {
    items: Vec<syn::Item>,
    /// Child modules by name (several for one name when their cfgs differ).
    children: Vec<(String, usize)>,
    parent: Option<usize>,
}

struct Crate {
    modules: Vec<Module>,
}

/// Whether `attrs` has `#[cfg(test)]` (or a cfg that contains `test` alone as a
/// requirement, such as `all(test, ..)`).
fn test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg") && {
            let t = a.meta.to_token_stream().to_string();
            t == "cfg (test)" || t.starts_with("cfg (all (test ,")
        }
    })
}

/// The cfg and doc(hidden) attributes of `attrs`, written as a prefix.
fn marks(attrs: &[syn::Attribute]) -> String {
    let mut out = String::new();
    for a in attrs {
        let t = tidy(&a.meta.to_token_stream().to_string());
        if a.path().is_ident("cfg") || t == "doc(hidden)" {
            out.push_str(&format!("#[{t}] "));
        }
    }
    out
}

/// The marks `outer` (of the enclosing modules) followed by those of `attrs` not
/// among them.
fn with_marks(outer: &str, attrs: &[syn::Attribute]) -> String {
    let mut out = outer.to_string();
    for m in marks(attrs).split_inclusive("] ") {
        if !out.contains(m) {
            out.push_str(m);
        }
    }
    out
}

/// The derive list of `attrs`, written as `#[derive(..)] `.
fn derives(attrs: &[syn::Attribute]) -> String {
    attrs
        .iter()
        .filter(|a| a.path().is_ident("derive"))
        .map(|a| format!("#[{}] ", tidy(&a.meta.to_token_stream().to_string())))
        .collect()
}

/// Token text with the spaces `quote` puts around punctuation taken out where Rust
/// code has none.
fn tidy(s: &str) -> String {
    let mut t = s.to_string();
    for (from, to) in [
        (" ,", ","),
        (" ;", ";"),
        (" :: ", "::"),
        (":: ", "::"),
        (" ::", "::"),
        ("< ", "<"),
        (" <", "<"),
        (" >", ">"),
        ("( ", "("),
        (" (", "("),
        (" )", ")"),
        ("[ ", "["),
        (" ]", "]"),
        ("& ", "&"),
        (" ?", "?"),
        ("# [", "#["),
        ("! (", "!("),
        (" . ", "."),
        (" : ", ": "),
    ] {
        while t.contains(from) {
            t = t.replace(from, to);
        }
    }
    // `impl<T>Trait`, `->`, `: ` spacing as written by hand.
    t.replace(">for ", "> for ")
        .replace("->", " -> ")
        .replace("  ", " ")
        .replace("' ", "'")
        .replace("'static", "'static ")
        .replace("'static >", "'static>")
        .replace("'static ,", "'static,")
        .replace("'static )", "'static)")
        .replace("  ", " ")
}

impl Crate {
    fn load(lib: &Path) -> Crate {
        let mut c = Crate {
            modules: Vec::new(),
        };
        c.load_file(lib, lib.parent().unwrap().to_path_buf(), None);
        c
    }

    /// Load the module in `file`, whose child modules' files are in `dir`.
    fn load_file(&mut self, file: &Path, dir: PathBuf, parent: Option<usize>) -> usize {
        let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{file:?}: {e}"));
        let parsed = syn::parse_file(&text).unwrap_or_else(|e| panic!("{file:?}: {e}"));
        self.load_items(parsed.items, dir, parent)
    }

    fn load_items(&mut self, items: Vec<syn::Item>, dir: PathBuf, parent: Option<usize>) -> usize {
        let id = self.modules.len();
        self.modules.push(Module {
            items: Vec::new(),
            children: Vec::new(),
            parent,
        });
        let mut kept = Vec::new();
        for item in items {
            if test_only(item_attrs(&item)) {
                continue;
            }
            if let syn::Item::Mod(m) = &item {
                let name = m.ident.to_string();
                let child = match &m.content {
                    Some((_, inner)) => self.load_items(inner.clone(), dir.join(&name), Some(id)),
                    None => {
                        let flat = dir.join(format!("{name}.rs"));
                        let (file, sub) = if flat.exists() {
                            (flat, dir.join(&name))
                        } else {
                            (dir.join(&name).join("mod.rs"), dir.join(&name))
                        };
                        self.load_file(&file, sub, Some(id))
                    }
                };
                self.modules[id].children.push((name, child));
            }
            kept.push(item);
        }
        self.modules[id].items = kept;
        id
    }

    /// The items `path` names from module `m` (a `use` path: `crate::`, `self::`,
    /// `super::` or relative), with the module each was found in; `None` when the path
    /// leaves the crate (another crate's item).
    fn resolve(&self, m: usize, path: &[String], depth: usize) -> Option<Vec<(usize, syn::Item)>> {
        assert!(depth < 32, "re-export cycle at {path:?}");
        let (mut at, rest) = match path[0].as_str() {
            "crate" => (0, &path[1..]),
            "self" => (m, &path[1..]),
            "super" => (
                self.modules[m].parent.expect("super of the root"),
                &path[1..],
            ),
            first => {
                // A name of this module (item, child module or import), else a crate.
                if self.names(m, first, depth).is_empty() {
                    return None;
                }
                (m, path)
            }
        };
        let Some((last, init)) = rest.split_last() else {
            return Some(Vec::new());
        };
        for seg in init {
            if seg == "super" {
                at = self.modules[at].parent?;
                continue;
            }
            let next = self
                .names(at, seg, depth)
                .into_iter()
                .find_map(|(mm, item)| {
                    if let syn::Item::Mod(md) = item {
                        self.modules[mm]
                            .children
                            .iter()
                            .find(|(n, _)| md.ident == n)
                            .map(|&(_, c)| c)
                    } else {
                        None
                    }
                })?;
            at = next;
        }
        Some(self.names(at, last, depth))
    }

    /// The items named `name` in module `m`: defined there, or imported by a `use`
    /// (followed to the definitions).
    fn names(&self, m: usize, name: &str, depth: usize) -> Vec<(usize, syn::Item)> {
        let mut out = Vec::new();
        for item in &self.modules[m].items {
            if let syn::Item::Use(u) = item {
                for (path, alias) in use_leaves(&u.tree) {
                    if alias == name && alias != "*" {
                        if let Some(found) = self.resolve(m, &path, depth + 1) {
                            out.extend(found);
                        }
                    }
                }
            } else if item_name(item).as_deref() == Some(name) {
                out.push((m, item.clone()));
            }
        }
        out
    }
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
        syn::Item::Union(i) => &i.attrs,
        syn::Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

fn item_name(item: &syn::Item) -> Option<String> {
    Some(match item {
        syn::Item::Const(i) => i.ident.to_string(),
        syn::Item::Enum(i) => i.ident.to_string(),
        syn::Item::Fn(i) => i.sig.ident.to_string(),
        syn::Item::Macro(i) => i.ident.as_ref()?.to_string(),
        syn::Item::Mod(i) => i.ident.to_string(),
        syn::Item::Static(i) => i.ident.to_string(),
        syn::Item::Struct(i) => i.ident.to_string(),
        syn::Item::Trait(i) => i.ident.to_string(),
        syn::Item::Type(i) => i.ident.to_string(),
        syn::Item::Union(i) => i.ident.to_string(),
        _ => return None,
    })
}

fn is_pub(v: &syn::Visibility) -> bool {
    matches!(v, syn::Visibility::Public(_))
}

fn item_is_pub(item: &syn::Item) -> bool {
    match item {
        syn::Item::Const(i) => is_pub(&i.vis),
        syn::Item::Enum(i) => is_pub(&i.vis),
        syn::Item::Fn(i) => is_pub(&i.vis),
        syn::Item::Mod(i) => is_pub(&i.vis),
        syn::Item::Static(i) => is_pub(&i.vis),
        syn::Item::Struct(i) => is_pub(&i.vis),
        syn::Item::Trait(i) => is_pub(&i.vis),
        syn::Item::Type(i) => is_pub(&i.vis),
        syn::Item::Union(i) => is_pub(&i.vis),
        syn::Item::Use(i) => is_pub(&i.vis),
        // `#[macro_export]` macros are listed at the root, apart.
        _ => false,
    }
}

/// Each leaf of a `use` tree: its path and the name it binds (`*` for a glob).
fn use_leaves(tree: &syn::UseTree) -> Vec<(Vec<String>, String)> {
    fn walk(t: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<(Vec<String>, String)>) {
        match t {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                walk(&p.tree, prefix, out);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let name = n.ident.to_string();
                let mut path = prefix.clone();
                if name == "self" {
                    let last = path.last().cloned().unwrap_or_default();
                    out.push((path, last));
                } else {
                    path.push(name.clone());
                    out.push((path, name));
                }
            }
            syn::UseTree::Rename(r) => {
                let mut path = prefix.clone();
                if r.ident != "self" {
                    path.push(r.ident.to_string());
                }
                out.push((path, r.rename.to_string()));
            }
            syn::UseTree::Glob(_) => out.push((prefix.clone(), "*".into())),
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    walk(t, prefix, out);
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(tree, &mut Vec::new(), &mut out);
    out
}

/// The listing being built: its lines, and the listed types by (module, name), with
/// the public path they are listed under.
struct Listing<'c> {
    krate: &'c Crate,
    lines: BTreeSet<String>,
    types: HashMap<(usize, String), Vec<String>>,
}

impl Listing<'_> {
    /// List module `m`, reachable as `path`, under the cfg marks `cfg`.
    fn module(&mut self, m: usize, path: &str, cfg: &str) {
        for item in &self.krate.modules[m].items {
            if !item_is_pub(item) {
                continue;
            }
            let cfg = with_marks(cfg, item_attrs(item));
            match item {
                syn::Item::Mod(md) => {
                    let name = md.ident.to_string();
                    let child = self.krate.modules[m]
                        .children
                        .iter()
                        .find(|(n, _)| *n == name)
                        .map(|&(_, c)| c)
                        .unwrap();
                    let sub = format!("{path}::{name}");
                    self.lines.insert(format!("{cfg}pub mod {sub}"));
                    self.module(child, &sub, &cfg);
                }
                syn::Item::Use(u) => {
                    for (upath, alias) in use_leaves(&u.tree) {
                        self.reexport(m, &upath, &alias, path, &cfg);
                    }
                }
                _ => self.item(m, item, path, &cfg, None),
            }
        }
    }

    /// A `pub use upath as alias` in module `m` (listed as `path::alias`).
    fn reexport(&mut self, m: usize, upath: &[String], alias: &str, path: &str, cfg: &str) {
        let shown = upath.join("::");
        if alias == "*" {
            // A glob: every public item of the module it names.
            let target = self.krate.resolve(m, upath, 0).and_then(|found| {
                found.into_iter().find_map(|(mm, it)| match it {
                    syn::Item::Mod(md) => self.krate.modules[mm]
                        .children
                        .iter()
                        .find(|(n, _)| md.ident == n)
                        .map(|&(_, c)| c),
                    _ => None,
                })
            });
            match target {
                Some(t) => self.module(t, path, cfg),
                None => {
                    self.lines
                        .insert(format!("{cfg}pub use {path}::* = {shown}::*"));
                }
            }
            return;
        }
        match self.krate.resolve(m, upath, 0) {
            None => {
                // Another crate's item, listed by its path.
                self.lines
                    .insert(format!("{cfg}pub use {path}::{alias} = {shown}"));
            }
            Some(found) if found.is_empty() => {
                self.lines.insert(format!(
                    "{cfg}pub use {path}::{alias} = {shown} (unresolved)"
                ));
            }
            Some(found) => {
                for (mm, item) in found {
                    let cfg = with_marks(cfg, item_attrs(&item));
                    if let syn::Item::Mod(md) = &item {
                        let child = self.krate.modules[mm]
                            .children
                            .iter()
                            .find(|(n, _)| md.ident == n)
                            .map(|&(_, c)| c)
                            .unwrap();
                        let sub = format!("{path}::{alias}");
                        self.lines.insert(format!("{cfg}pub mod {sub}"));
                        self.module(child, &sub, &cfg);
                    } else {
                        self.item(mm, &item, path, &cfg, Some(alias));
                    }
                }
            }
        }
    }

    /// One item defined in module `m`, listed as `path::name` (`alias`: the name it is
    /// re-exported under).
    fn item(&mut self, m: usize, item: &syn::Item, path: &str, cfg: &str, alias: Option<&str>) {
        let name = alias
            .map(str::to_string)
            .or_else(|| item_name(item))
            .unwrap_or_default();
        let full = format!("{path}::{name}");
        let t = |x: &dyn ToTokens| tidy(&x.to_token_stream().to_string());
        match item {
            syn::Item::Fn(f) => {
                let mut sig = f.sig.clone();
                sig.ident = syn::Ident::new(&name, sig.ident.span());
                self.lines.insert(format!("{cfg}pub {} [{full}]", t(&sig)));
            }
            syn::Item::Const(c) => {
                self.lines
                    .insert(format!("{cfg}pub const {full}: {}", t(&c.ty)));
            }
            syn::Item::Static(s) => {
                self.lines
                    .insert(format!("{cfg}pub static {full}: {}", t(&s.ty)));
            }
            syn::Item::Type(ty) => {
                self.lines.insert(format!(
                    "{cfg}pub type {full}{} = {}",
                    t(&ty.generics),
                    t(&ty.ty)
                ));
            }
            syn::Item::Struct(s) => {
                let private = s.fields.iter().any(|f| !is_pub(&f.vis));
                self.lines.insert(format!(
                    "{cfg}{}pub struct {full}{}{}{}",
                    derives(&s.attrs),
                    t(&s.generics),
                    t(&s.generics.where_clause),
                    if private { " (private fields)" } else { "" }
                ));
                for (i, f) in s.fields.iter().enumerate().filter(|(_, f)| is_pub(&f.vis)) {
                    let field = f
                        .ident
                        .as_ref()
                        .map_or_else(|| i.to_string(), |id| id.to_string());
                    self.lines
                        .insert(format!("{cfg}pub field {full}.{field}: {}", t(&f.ty)));
                }
                self.types
                    .entry((m, s.ident.to_string()))
                    .or_default()
                    .push(full);
            }
            syn::Item::Union(u) => {
                self.lines
                    .insert(format!("{cfg}pub union {full}{}", t(&u.generics)));
                self.types
                    .entry((m, u.ident.to_string()))
                    .or_default()
                    .push(full);
            }
            syn::Item::Enum(e) => {
                self.lines.insert(format!(
                    "{cfg}{}pub enum {full}{}{}",
                    derives(&e.attrs),
                    t(&e.generics),
                    t(&e.generics.where_clause)
                ));
                for v in &e.variants {
                    let mut v = v.clone();
                    v.attrs.clear();
                    for f in v.fields.iter_mut() {
                        f.attrs.clear();
                    }
                    self.lines
                        .insert(format!("{cfg}pub variant {full}::{}", t(&v)));
                }
                self.types
                    .entry((m, e.ident.to_string()))
                    .or_default()
                    .push(full);
            }
            syn::Item::Trait(tr) => {
                self.lines.insert(format!(
                    "{cfg}pub {}trait {full}{}{}{}",
                    if tr.unsafety.is_some() { "unsafe " } else { "" },
                    t(&tr.generics),
                    if tr.supertraits.is_empty() {
                        String::new()
                    } else {
                        format!(": {}", t(&tr.supertraits))
                    },
                    t(&tr.generics.where_clause)
                ));
                for ti in &tr.items {
                    let line = match ti {
                        syn::TraitItem::Fn(f) => format!(
                            "{}{}",
                            t(&f.sig),
                            if f.default.is_some() {
                                " (provided)"
                            } else {
                                ""
                            }
                        ),
                        syn::TraitItem::Type(ty) => {
                            let mut ty = ty.clone();
                            ty.attrs.clear();
                            t(&ty)
                        }
                        syn::TraitItem::Const(c) => format!("const {}: {}", c.ident, t(&c.ty)),
                        _ => continue,
                    };
                    if test_only(trait_item_attrs(ti)) {
                        continue;
                    }
                    self.lines
                        .insert(format!("{cfg}pub trait item {full}: {line}"));
                }
                self.types
                    .entry((m, tr.ident.to_string()))
                    .or_default()
                    .push(full);
            }
            syn::Item::Mod(_) | syn::Item::Use(_) => unreachable!("handled by the caller"),
            other => {
                self.lines.insert(format!("{cfg}pub {}", t(other)));
            }
        }
    }

    /// The inherent `pub` methods and the trait impls of the listed types, wherever in
    /// the crate their impl blocks are.
    fn impls(&mut self) {
        let krate = self.krate;
        for (m, module) in krate.modules.iter().enumerate() {
            for item in &module.items {
                if let syn::Item::Macro(mac) = item {
                    self.macro_impls(m, mac);
                    continue;
                }
                let syn::Item::Impl(imp) = item else { continue };
                let syn::Type::Path(tp) = &*imp.self_ty else {
                    continue;
                };
                let segs: Vec<String> = tp
                    .path
                    .segments
                    .iter()
                    .map(|s| s.ident.to_string())
                    .collect();
                let defs: Vec<(usize, String)> = match krate.resolve(m, &segs, 0) {
                    Some(found) => found
                        .into_iter()
                        .filter_map(|(dm, it)| Some((dm, item_name(&it)?)))
                        .collect(),
                    None => continue,
                };
                let cfg = marks(&imp.attrs);
                let t = |x: &dyn ToTokens| tidy(&x.to_token_stream().to_string());
                for def in defs {
                    let Some(paths) = self.types.get(&def).cloned() else {
                        continue;
                    };
                    for full in paths {
                        match &imp.trait_ {
                            Some((bang, tr, _)) => {
                                self.lines.insert(format!(
                                    "{cfg}impl{} {}{} for {full}{}",
                                    t(&imp.generics),
                                    if bang.is_some() { "!" } else { "" },
                                    t(tr),
                                    t(&imp.generics.where_clause)
                                ));
                            }
                            None => {
                                for ii in &imp.items {
                                    match ii {
                                        syn::ImplItem::Fn(f) if is_pub(&f.vis) => {
                                            if test_only(&f.attrs) {
                                                continue;
                                            }
                                            let fcfg = with_marks(&cfg, &f.attrs);
                                            self.lines.insert(format!(
                                                "{fcfg}pub {} [{full}::{}]{}",
                                                t(&f.sig),
                                                f.sig.ident,
                                                t(&imp.generics.where_clause)
                                            ));
                                        }
                                        syn::ImplItem::Const(c) if is_pub(&c.vis) => {
                                            self.lines.insert(format!(
                                                "{cfg}pub const {full}::{}: {}",
                                                c.ident,
                                                t(&c.ty)
                                            ));
                                        }
                                        _ => {}
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

impl Listing<'_> {
    /// A macro invoked among the items of module `m` (not a `macro_rules!`) that names a
    /// listed type of that module: it may implement traits for it, so the invocation is
    /// listed with the type.
    fn macro_impls(&mut self, m: usize, mac: &syn::ItemMacro) {
        if mac.ident.is_some() || test_only(&mac.attrs) {
            return;
        }
        let tokens = tidy(&mac.mac.tokens.to_string());
        let named: Vec<String> = mac
            .mac
            .tokens
            .clone()
            .into_iter()
            .filter_map(|t| match t {
                proc_macro2::TokenTree::Ident(id) => Some(id.to_string()),
                _ => None,
            })
            .collect();
        for name in named {
            if let Some(paths) = self.types.get(&(m, name)).cloned() {
                for full in paths {
                    self.lines.insert(format!(
                        "{}impls of {}!({tokens}) for {full}",
                        marks(&mac.attrs),
                        tidy(&mac.mac.path.to_token_stream().to_string())
                    ));
                }
            }
        }
    }
}

fn trait_item_attrs(ti: &syn::TraitItem) -> &[syn::Attribute] {
    match ti {
        syn::TraitItem::Fn(f) => &f.attrs,
        syn::TraitItem::Type(t) => &t.attrs,
        syn::TraitItem::Const(c) => &c.attrs,
        _ => &[],
    }
}

/// The listing of the crate whose root is `lib`.
fn public_api(lib: &Path) -> String {
    let krate = Crate::load(lib);
    let mut l = Listing {
        krate: &krate,
        lines: BTreeSet::new(),
        types: HashMap::new(),
    };
    l.module(0, "pisces", "");
    // `#[macro_export]` macros are at the crate root wherever they are defined.
    for module in &krate.modules {
        for item in &module.items {
            if let syn::Item::Macro(mac) = item {
                if mac.attrs.iter().any(|a| a.path().is_ident("macro_export")) {
                    if let Some(id) = &mac.ident {
                        l.lines
                            .insert(format!("{}pub macro pisces::{id}!", marks(&mac.attrs)));
                    }
                }
            }
        }
    }
    l.impls();
    let mut out = String::new();
    for line in &l.lines {
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[test]
fn the_public_api_is_the_committed_listing() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let now = public_api(&dir.join("src/lib.rs"));
    let file = dir.join("public-api.txt");
    if std::env::var_os("PISCES_BLESS").is_some() {
        std::fs::write(&file, &now).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&file).unwrap_or_default();
    if now == committed {
        return;
    }
    let old: BTreeSet<&str> = committed.lines().collect();
    let new: BTreeSet<&str> = now.lines().collect();
    let mut diff = String::new();
    for l in old.difference(&new) {
        diff.push_str(&format!("- {l}\n"));
    }
    for l in new.difference(&old) {
        diff.push_str(&format!("+ {l}\n"));
    }
    panic!(
        "the public API of `pisces` differs from crates/pisces/public-api.txt \
         (- listed there, + in the source now):\n{diff}\n\
         If the change is meant, bless it: PISCES_BLESS=1 cargo test -p pisces --test public_api \
         (and commit crates/pisces/public-api.txt)."
    );
}

/// The lister itself, on a small crate: re-exports under their names, methods of a
/// re-exported type, a private module's items only through re-exports, pub(crate)
/// items left out.
#[test]
fn the_lister_follows_reexports_and_leaves_private_items_out() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::write(
        src.join("lib.rs"),
        "mod inner;\npub mod open;\npub use inner::{Thing as Renamed, helper};\n\
         pub use std::fmt::Debug;\n#[cfg(feature = \"x\")]\npub fn gated() {}\n",
    )
    .unwrap();
    std::fs::write(
        src.join("inner.rs"),
        "pub struct Thing { pub a: u8, b: u8 }\nimpl Thing { pub fn get(&self) -> u8 { self.a } \
         pub(crate) fn hidden(&self) {} }\nimpl Clone for Thing { fn clone(&self) -> Self { todo!() } }\n\
         pub fn helper(x: &str) -> usize { x.len() }\npub fn unexported() {}\n",
    )
    .unwrap();
    std::fs::create_dir(src.join("open")).unwrap();
    std::fs::write(
        src.join("open/mod.rs"),
        "pub enum Kind { A, B(u32) }\npub(crate) struct Internal;\n",
    )
    .unwrap();
    let got = public_api(&src.join("lib.rs"));
    let want = "\
#[cfg(feature = \"x\")] pub fn gated() [pisces::gated]
impl Clone for pisces::Renamed
pub enum pisces::open::Kind
pub field pisces::Renamed.a: u8
pub fn get(&self) -> u8 [pisces::Renamed::get]
pub fn helper(x: &str) -> usize [pisces::helper]
pub mod pisces::open
pub struct pisces::Renamed (private fields)
pub use pisces::Debug = std::fmt::Debug
pub variant pisces::open::Kind::A
pub variant pisces::open::Kind::B(u32)
";
    assert_eq!(got, want);
}

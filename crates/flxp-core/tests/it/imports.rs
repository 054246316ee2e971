//! The file-level import graph of a crate, read from its sources, and the two ways it can go
//! wrong: a cycle (files that import each other, directly or around a loop) and an import up a
//! layer (a lower module reaching into a higher one).
//!
//! An edge runs from a file to the file that *defines* what it imports: `use crate::a::X` where
//! `a/mod.rs` only re-exports `X` from `a/x.rs` is an edge to `a/x.rs`, as the compiler resolves
//! it. Both `use` declarations and paths written inline (`crate::a::f()`, `super::g()`) count.
//! Test-only code (`#[cfg(test)]` items and the files they declare) is left out: tests may reach
//! anywhere. Shared by the layering tests of flxp-core and of the flxp crate.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A crate's files (relative to `src/`, e.g. `placement/pipeline.rs`) and who imports whom.
#[derive(Debug, Default)]
pub struct Graph {
    /// Every non-test file, with the files it imports (itself excluded).
    pub edges: BTreeMap<String, BTreeSet<String>>,
}

/// One source file as the resolver sees it.
#[derive(Debug, Default)]
struct File {
    /// Items defined at the top level (types, functions, constants, traits, macros).
    defines: BTreeSet<String>,
    /// Names brought into scope by `use` (alias → absolute path below `crate`).
    imports: BTreeMap<String, Vec<String>>,
    /// `use path::*` (absolute module paths).
    globs: Vec<Vec<String>>,
    /// Every absolute path the file refers to (from `use` and written inline).
    refs: Vec<Vec<String>>,
    /// Child modules declared with `mod x;` outside test-only code.
    children: BTreeSet<String>,
    /// Child modules declared under `#[cfg(test)]`.
    test_children: BTreeSet<String>,
}

/// Reads every `.rs` file under `src` and builds the graph.
pub fn graph(src: &Path) -> Graph {
    let mut modules: BTreeMap<Vec<String>, String> = BTreeMap::new();
    let mut files: BTreeMap<String, File> = BTreeMap::new();
    let mut paths = Vec::new();
    collect(src, &mut paths);
    paths.sort();
    // First pass: module paths, so relative paths can be made absolute.
    for path in &paths {
        let rel = relative(src, path);
        modules.insert(module_of(&rel), rel);
    }
    let children_of = |module: &[String]| -> BTreeSet<String> {
        modules
            .keys()
            .filter(|m| m.len() == module.len() + 1 && m.starts_with(module))
            .map(|m| m[module.len()].clone())
            .collect()
    };
    for path in &paths {
        let rel = relative(src, path);
        let text = std::fs::read_to_string(path).unwrap();
        let module = module_of(&rel);
        let file = parse(&strip(&text), &module, &children_of(&module));
        files.insert(rel, file);
    }
    // Files only test code declares (and everything below them) are not part of the graph.
    let mut test_only: BTreeSet<Vec<String>> = BTreeSet::new();
    for (rel, file) in &files {
        let module = module_of(rel);
        for child in &file.test_children {
            let mut m = module.clone();
            m.push(child.clone());
            test_only.insert(m);
        }
    }
    let is_test = |m: &[String]| test_only.iter().any(|t| m.starts_with(t));
    let resolver = Resolver {
        modules: &modules,
        files: &files,
    };
    let mut graph = Graph::default();
    for (rel, file) in &files {
        if is_test(&module_of(rel)) {
            continue;
        }
        let targets = graph.edges.entry(rel.clone()).or_default();
        // The crate root only declares modules and re-exports them.
        if matches!(rel.as_str(), "lib.rs" | "main.rs") {
            continue;
        }
        for r in &file.refs {
            if let Some((target, _)) = resolver.resolve(r, 0) {
                if target != *rel && !is_test(&module_of(&target)) {
                    targets.insert(target);
                }
            }
        }
    }
    graph
}

impl Graph {
    /// The groups of files that import each other around a loop (strongly connected components
    /// of more than one file), each sorted, with one loop through the group spelled out.
    pub fn cycles(&self) -> Vec<Vec<String>> {
        self.components()
            .into_iter()
            .filter(|g| g.len() > 1)
            .collect()
    }

    /// One loop through a group of [`Graph::cycles`], for a message: `a.rs -> b.rs -> a.rs`.
    pub fn describe(&self, group: &[String]) -> String {
        let set: BTreeSet<&String> = group.iter().collect();
        self.loop_within(&set).join(" -> ")
    }

    /// Imports from a file into a module on a higher layer. `layers` lists the top-level
    /// modules (or root files, without `.rs`) from the bottom up; files in the same entry are
    /// on the same layer. Panics on a top-level module `layers` does not place, so a new one
    /// has to be placed on purpose.
    pub fn upward(&self, layers: &[&[&str]]) -> Vec<String> {
        let layer = |file: &str| -> usize {
            let top = top_level(file);
            layers
                .iter()
                .position(|l| l.contains(&top.as_str()))
                .unwrap_or_else(|| panic!("top-level module `{top}` ({file}) is on no layer"))
        };
        let mut out = Vec::new();
        for (from, targets) in &self.edges {
            for to in targets {
                if layer(to) > layer(from) {
                    out.push(format!("{from} -> {to}"));
                }
            }
        }
        out
    }

    /// Fails with every cycle and upward import not on the lists of known ones, and every known
    /// one that is gone (so the lists only shrink). A known cycle is given as path prefixes
    /// (`balance/`): any cycle among files under them is that one. A known upward import is
    /// `from -> to`.
    pub fn check(&self, layers: &[&[&str]], known_cycles: &[&[&str]], known_upward: &[&str]) {
        let mut problems = Vec::new();
        let cycles = self.cycles();
        for group in &cycles {
            let under = |k: &&[&str]| group.iter().all(|f| k.iter().any(|p| f.starts_with(p)));
            let known = known_cycles.iter().any(under);
            if !known {
                problems.push(format!("import cycle: {}", self.describe(group)));
            }
        }
        for k in known_cycles {
            let under = |g: &Vec<String>| g.iter().all(|f| k.iter().any(|p| f.starts_with(p)));
            if !cycles.iter().any(under) {
                problems.push(format!("no cycle left under {k:?}: drop it from the list"));
            }
        }
        let upward = self.upward(layers);
        for u in &upward {
            if !known_upward.contains(&u.as_str()) {
                problems.push(format!("import up a layer: {u}"));
            }
        }
        for k in known_upward {
            if !upward.iter().any(|u| u == k) {
                problems.push(format!(
                    "known upward import {k} is gone: drop it from the list"
                ));
            }
        }
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }

    /// Tarjan's strongly connected components.
    fn components(&self) -> Vec<Vec<String>> {
        struct State<'a> {
            graph: &'a Graph,
            index: BTreeMap<&'a str, usize>,
            low: BTreeMap<&'a str, usize>,
            stack: Vec<&'a str>,
            on_stack: BTreeSet<&'a str>,
            out: Vec<Vec<String>>,
        }
        fn visit<'a>(s: &mut State<'a>, v: &'a str) {
            let n = s.index.len();
            s.index.insert(v, n);
            s.low.insert(v, n);
            s.stack.push(v);
            s.on_stack.insert(v);
            let graph = s.graph;
            for w in graph.edges.get(v).into_iter().flatten() {
                let w = w.as_str();
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
                let mut group = Vec::new();
                while let Some(w) = s.stack.pop() {
                    s.on_stack.remove(w);
                    group.push(w.to_string());
                    if w == v {
                        break;
                    }
                }
                group.sort();
                s.out.push(group);
            }
        }
        let mut s = State {
            graph: self,
            index: BTreeMap::new(),
            low: BTreeMap::new(),
            stack: Vec::new(),
            on_stack: BTreeSet::new(),
            out: Vec::new(),
        };
        for v in self.edges.keys() {
            if !s.index.contains_key(v.as_str()) {
                visit(&mut s, v);
            }
        }
        s.out.sort();
        s.out
    }

    /// A shortest loop from the group's first file back to itself, for the message.
    fn loop_within(&self, group: &BTreeSet<&String>) -> Vec<String> {
        let Some(start) = group.iter().next() else {
            return Vec::new();
        };
        let mut prev: BTreeMap<&String, &String> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([*start]);
        while let Some(v) = queue.pop_front() {
            for w in self.edges.get(v).into_iter().flatten() {
                if !group.contains(w) {
                    continue;
                }
                if w == *start {
                    let mut path = vec![v.clone()];
                    let mut at = v;
                    while let Some(p) = prev.get(at) {
                        path.push((*p).clone());
                        at = p;
                    }
                    path.reverse();
                    path.push(w.clone());
                    return path;
                }
                if !prev.contains_key(w) && w != *start {
                    prev.insert(w, v);
                    queue.push_back(w);
                }
            }
        }
        Vec::new()
    }
}

/// The top-level module a file belongs to: `placement/pipeline.rs` → `placement`,
/// `units.rs` → `units`.
fn top_level(file: &str) -> String {
    let first = file.split('/').next().unwrap_or(file);
    first.trim_end_matches(".rs").to_string()
}

struct Resolver<'a> {
    modules: &'a BTreeMap<Vec<String>, String>,
    files: &'a BTreeMap<String, File>,
}

impl Resolver<'_> {
    /// The file that defines what `path` names, and whether the name was found there (rather
    /// than falling back to the longest module prefix).
    fn resolve(&self, path: &[String], depth: usize) -> Option<(String, bool)> {
        if depth > 16 {
            return None;
        }
        let (len, file_name) = (0..=path.len())
            .rev()
            .find_map(|n| self.modules.get(&path[..n]).map(|f| (n, f)))?;
        let rest = &path[len..];
        let Some(name) = rest.first() else {
            return Some((file_name.clone(), true));
        };
        let file = &self.files[file_name];
        if file.defines.contains(name) {
            return Some((file_name.clone(), true));
        }
        if let Some(target) = file.imports.get(name) {
            let mut full = target.clone();
            full.extend_from_slice(&rest[1..]);
            if let Some(found) = self.resolve(&full, depth + 1) {
                return Some(found);
            }
        }
        for glob in &file.globs {
            let mut full = glob.clone();
            full.extend_from_slice(rest);
            if let Some((f, true)) = self.resolve(&full, depth + 1) {
                return Some((f, true));
            }
        }
        Some((file_name.clone(), false))
    }
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn relative(src: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(src).unwrap();
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

/// `a/b.rs` and `a/b/mod.rs` → `[a, b]`; `lib.rs` and `main.rs` → `[]`.
fn module_of(rel: &str) -> Vec<String> {
    let mut parts: Vec<String> = rel.split('/').map(str::to_string).collect();
    let last = parts.pop().unwrap_or_default();
    let stem = last.trim_end_matches(".rs");
    let root = parts.is_empty() && matches!(stem, "lib" | "main");
    if stem != "mod" && !root {
        parts.push(stem.to_string());
    }
    parts
}

/// The source with comments removed and string and character literals emptied, so braces and
/// words inside them do not count.
fn strip(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < c.len() {
        match c[i] {
            '/' if c.get(i + 1) == Some(&'/') => {
                while i < c.len() && c[i] != '\n' {
                    i += 1;
                }
            }
            '/' if c.get(i + 1) == Some(&'*') => {
                let mut depth = 0;
                while i < c.len() {
                    if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                        depth += 1;
                        i += 2;
                    } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        i += 1;
                    }
                }
            }
            'r' if (c.get(i + 1) == Some(&'"') || c.get(i + 1) == Some(&'#'))
                && (i == 0 || !is_ident(c[i - 1])) =>
            {
                let mut j = i + 1;
                let mut hashes = 0;
                while c.get(j) == Some(&'#') {
                    hashes += 1;
                    j += 1;
                }
                if c.get(j) != Some(&'"') {
                    out.push(c[i]);
                    i += 1;
                    continue;
                }
                j += 1;
                loop {
                    if j >= c.len() {
                        break;
                    }
                    if c[j] == '"' && (1..=hashes).all(|h| c.get(j + h) == Some(&'#')) {
                        j += 1 + hashes;
                        break;
                    }
                    j += 1;
                }
                out.push_str("\"\"");
                i = j;
            }
            '"' => {
                i += 1;
                while i < c.len() && c[i] != '"' {
                    if c[i] == '\\' {
                        i += 1;
                    }
                    i += 1;
                }
                i += 1;
                out.push_str("\"\"");
            }
            '\'' => {
                // A character literal ('x', '\n', '\u{..}') or a lifetime ('a).
                if c.get(i + 1) == Some(&'\\') {
                    let mut j = i + 2;
                    while j < c.len() && c[j] != '\'' {
                        j += 1;
                    }
                    i = j + 1;
                    out.push_str("' '");
                } else if c.get(i + 2) == Some(&'\'') {
                    i += 3;
                    out.push_str("' '");
                } else {
                    out.push('\'');
                    i += 1;
                }
            }
            ch => {
                out.push(ch);
                i += 1;
            }
        }
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

fn tokens(text: &str) -> Vec<String> {
    let c: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        if c[i].is_whitespace() {
            i += 1;
        } else if is_ident(c[i]) {
            let start = i;
            while i < c.len() && is_ident(c[i]) {
                i += 1;
            }
            out.push(c[start..i].iter().collect());
        } else if c[i] == ':' && c.get(i + 1) == Some(&':') {
            out.push("::".to_string());
            i += 2;
        } else {
            out.push(c[i].to_string());
            i += 1;
        }
    }
    out
}

/// Reads one file's definitions, imports and references.
fn parse(text: &str, module: &[String], children: &BTreeSet<String>) -> File {
    let t = tokens(text);
    let mut file = File::default();
    let mut depth = 0usize;
    let mut i = 0;
    // Inline modules (`mod x { ... }`) open here: (brace depth inside, name).
    let mut inline: Vec<(usize, String)> = Vec::new();
    let here = |inline: &[(usize, String)]| -> Vec<String> {
        let mut m = module.to_vec();
        m.extend(inline.iter().map(|(_, n)| n.clone()));
        m
    };
    while i < t.len() {
        match t[i].as_str() {
            "#" if t.get(i + 1).map(String::as_str) == Some("[") => {
                let end = matching(&t, i + 1, "[", "]");
                let attr = &t[i + 2..end];
                i = end + 1;
                if attr.first().map(String::as_str) == Some("cfg")
                    && attr.iter().any(|a| a == "test")
                    && !attr.iter().any(|a| a == "not")
                {
                    // Skip the test-only item: up to its `;` or the end of its block.
                    while i < t.len() && t[i] == "#" {
                        i = matching(&t, i + 1, "[", "]") + 1;
                    }
                    let start = i;
                    while i < t.len() && t[i] != ";" && t[i] != "{" {
                        i += 1;
                    }
                    if t.get(i).map(String::as_str) == Some("{") {
                        i = matching(&t, i, "{", "}");
                    }
                    if let Some(m) = t[start..i].iter().position(|s| s == "mod") {
                        if let Some(name) = t.get(start + m + 1) {
                            file.test_children.insert(name.clone());
                        }
                    }
                    i += 1;
                }
            }
            "{" => {
                depth += 1;
                i += 1;
            }
            "}" => {
                if inline.last().is_some_and(|(d, _)| *d == depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
                i += 1;
            }
            "use" => {
                let end = (i..t.len()).find(|&j| t[j] == ";").unwrap_or(t.len());
                let mut trees = Vec::new();
                use_tree(&t[i + 1..end], Vec::new(), &mut trees);
                for (path, alias) in trees {
                    let glob = path.last().map(String::as_str) == Some("*");
                    let path: Vec<String> = if glob {
                        path[..path.len() - 1].to_vec()
                    } else {
                        path
                    };
                    let here = here(&inline);
                    let Some(abs) = absolute(&here, children, &path) else {
                        continue;
                    };
                    if glob {
                        file.globs.push(abs.clone());
                    } else if let Some(alias) = alias {
                        file.imports.insert(alias, abs.clone());
                    }
                    file.refs.push(abs);
                }
                i = end + 1;
            }
            "mod" => {
                match (t.get(i + 1), t.get(i + 2).map(String::as_str)) {
                    (Some(name), Some(";")) if depth == 0 => {
                        file.children.insert(name.clone());
                    }
                    (Some(name), Some("{")) => inline.push((depth + 1, name.clone())),
                    _ => {}
                }
                i += 1;
            }
            "struct" | "enum" | "fn" | "trait" | "type" | "const" | "static" | "union"
                if depth == 0 =>
            {
                if let Some(name) = t.get(i + 1) {
                    file.defines.insert(name.clone());
                }
                i += 1;
            }
            "macro_rules" => {
                if let Some(name) = t.get(i + 2) {
                    file.defines.insert(name.clone());
                }
                i += 1;
            }
            "crate" | "super" | "self"
                if t.get(i + 1).map(String::as_str) == Some("::")
                    && (i == 0 || t[i - 1] != "::") =>
            {
                let mut path = vec![t[i].clone()];
                let mut j = i + 1;
                while t.get(j).map(String::as_str) == Some("::")
                    && t.get(j + 1).is_some_and(|s| s.chars().all(is_ident))
                {
                    path.push(t[j + 1].clone());
                    j += 2;
                }
                if let Some(abs) = absolute(&here(&inline), children, &path) {
                    file.refs.push(abs);
                }
                i = j;
            }
            _ => i += 1,
        }
    }
    file
}

/// Makes a path written in `module` absolute (below `crate`), or None for another crate's.
fn absolute(
    module: &[String],
    children: &BTreeSet<String>,
    path: &[String],
) -> Option<Vec<String>> {
    let first = path.first()?;
    match first.as_str() {
        "crate" => Some(path[1..].to_vec()),
        "self" => Some([module, &path[1..]].concat()),
        "super" => {
            let ups = path.iter().take_while(|s| *s == "super").count();
            let base = module.get(..module.len().checked_sub(ups)?)?;
            Some([base, &path[ups..]].concat())
        }
        s if children.contains(s) => Some([module, path].concat()),
        _ => None,
    }
}

/// The index of the token closing the bracket opened at `open`.
fn matching(t: &[String], open: usize, left: &str, right: &str) -> usize {
    let mut depth = 0;
    for (j, tok) in t.iter().enumerate().skip(open) {
        if tok == left {
            depth += 1;
        } else if tok == right {
            depth -= 1;
            if depth == 0 {
                return j;
            }
        }
    }
    t.len()
}

/// Expands a use tree (`a::{b, c::{d as e, self}, *}`) into (path, name it binds).
fn use_tree(t: &[String], prefix: Vec<String>, out: &mut Vec<(Vec<String>, Option<String>)>) {
    let t: Vec<&String> = t.iter().collect();
    let mut i = 0;
    // Drop visibility (`pub`, `pub(crate)`) before the path.
    if t.first().map(|s| s.as_str()) == Some("pub") {
        i = 1;
        if t.get(1).map(|s| s.as_str()) == Some("(") {
            while i < t.len() && t[i] != ")" {
                i += 1;
            }
            i += 1;
        }
    }
    let mut path = prefix;
    if t.get(i).map(|s| s.as_str()) == Some("::") {
        i += 1;
    }
    while i < t.len() {
        let tok = t[i].as_str();
        match tok {
            "{" => {
                let close = i + matching(
                    &t[i..].iter().map(|s| (*s).clone()).collect::<Vec<_>>(),
                    0,
                    "{",
                    "}",
                );
                // Split the group at top-level commas.
                let inner: Vec<String> = t[i + 1..close].iter().map(|s| (*s).clone()).collect();
                let mut level = 0;
                let mut start = 0;
                for (j, s) in inner.iter().enumerate() {
                    match s.as_str() {
                        "{" => level += 1,
                        "}" => level -= 1,
                        "," if level == 0 => {
                            use_tree(&inner[start..j], path.clone(), out);
                            start = j + 1;
                        }
                        _ => {}
                    }
                }
                if start < inner.len() {
                    use_tree(&inner[start..], path.clone(), out);
                }
                return;
            }
            "::" => i += 1,
            "as" => {
                let alias = t.get(i + 1).map(|s| (*s).clone()).filter(|a| a != "_");
                out.push((path, alias));
                return;
            }
            "self" if !path.is_empty() => {
                let alias = path.last().cloned();
                out.push((path, alias));
                return;
            }
            _ => {
                path.push(tok.to_string());
                i += 1;
            }
        }
    }
    if !path.is_empty() {
        let alias = path.last().filter(|s| *s != "*").cloned();
        out.push((path, alias));
    }
}

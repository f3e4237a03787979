//! Files depend on each other without circles: each non-test source file is read for
//! the paths it names (`crate::`, `super::`, `self::` and a child module's own paths,
//! groups included), each path is taken to the file that defines it (through a parent's
//! `pub use child::Name`), and the graph the files make must have no circle beyond the
//! few still to be broken, named below.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module's path in its crate (`["dra", "state"]`; empty for the crate root).
type Module = Vec<String>;

/// Circles not broken yet, each as the sorted files (module paths) it joins. The test
/// fails when one of them is gone too, so that the list only shrinks.
const KNOWN: &[(&str, &[&str])] = &[
    // The DRA objects, their pools, selectors and state, and Filter's remembered answers.
    ("algorithms", &["dra::extended", "dra::memo", "dra::objects", "dra::pools", "dra::selectors", "dra::state"]),
    // The gang cycle inside the engine.
    ("scheduler", &["engine", "engine::gang_cycle", "engine::topology"]),
];

/// Every non-test `.rs` file under `src`, by module path.
fn files(src: &Path) -> BTreeMap<Module, PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "tests") {
                    walk(&path, out);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let mut all = Vec::new();
    walk(src, &mut all);
    let mut out = BTreeMap::new();
    for path in all {
        let stem = path.file_stem().unwrap().to_string_lossy().to_string();
        if stem == "tests" || stem.ends_with("_tests") {
            continue;
        }
        let rel = path.strip_prefix(src).unwrap().with_extension("");
        let mut module: Module = rel.components().map(|c| c.as_os_str().to_string_lossy().to_string()).collect();
        if matches!(module.last().map(String::as_str), Some("mod" | "lib" | "main")) {
            module.pop();
        }
        out.insert(module, path);
    }
    out
}

/// A file's text without its inline test module.
fn source(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    text.split("#[cfg(test)]\nmod tests").next().unwrap_or_default().to_string()
}

/// The full paths of a use tree that starts at `text` (`a::b::{C, d::E}` gives
/// `a::b::C` and `a::b::d::E`), read up to its end.
fn use_tree(text: &str) -> Vec<Vec<String>> {
    let mut prefix = Vec::new();
    let mut rest = text.trim_start();
    loop {
        let end = rest.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(rest.len());
        if end > 0 {
            prefix.push(rest[..end].to_string());
            rest = &rest[end..];
        }
        if let Some(r) = rest.strip_prefix("::") {
            rest = r;
            if let Some(group) = rest.strip_prefix('{') {
                return group_items(group)
                    .into_iter()
                    .flat_map(use_tree)
                    .map(|tail| prefix.iter().cloned().chain(tail).collect())
                    .collect();
            }
            if end == 0 && !rest.starts_with(|c: char| c.is_alphanumeric() || c == '_') {
                return vec![prefix];
            }
        } else {
            return vec![prefix];
        }
    }
}

/// The items of a `{…}` group whose opening brace is already consumed.
fn group_items(group: &str) -> Vec<&str> {
    let (mut depth, mut start, mut out) = (0usize, 0usize, Vec::new());
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                out.push(&group[start..i]);
                break;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&group[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.into_iter().filter(|s| !s.trim().is_empty()).collect()
}

/// The file graph of a crate's `src`: each file to the files it names.
fn graph(src: &Path) -> BTreeMap<Module, BTreeSet<Module>> {
    let files = files(src);
    let texts: BTreeMap<&Module, String> = files.iter().map(|(m, p)| (m, source(p))).collect();
    // A module's `pub use child::Name`: the name to the child file that defines it.
    let mut exported: BTreeMap<&Module, BTreeMap<String, Module>> = BTreeMap::new();
    for (m, text) in &texts {
        for stmt in text.split("pub use ").skip(1) {
            let stmt = stmt.split(';').next().unwrap_or_default();
            for path in use_tree(stmt) {
                let child: Module = m.iter().cloned().chain(path.first().cloned()).collect();
                if path.len() >= 2 && files.contains_key(&child) {
                    exported.entry(m).or_default().insert(path[path.len() - 1].clone(), child);
                }
            }
        }
    }
    let resolve = |base: &Module, path: &[String]| -> Module {
        let mut target = base.clone();
        let mut segs = path.iter().filter(|s| *s != "self").peekable();
        while let Some(s) = segs.peek() {
            let next: Module = target.iter().cloned().chain([s.to_string()]).collect();
            if !files.contains_key(&next) {
                break;
            }
            target = next;
            segs.next();
        }
        match segs.next().and_then(|name| exported.get(&target).and_then(|e| e.get(name))) {
            Some(child) => child.clone(),
            None => target,
        }
    };
    let mut g = BTreeMap::new();
    for m in files.keys() {
        let text = &texts[m];
        // Declarations and re-exports name no dependency of the file's own code.
        let code: String = text
            .split_inclusive('\n')
            .filter(|l| {
                let l = l.trim_start();
                !(l.starts_with("pub use ") || (l.contains("mod ") && l.trim_end().ends_with(';')))
            })
            .collect();
        let mut paths: Vec<(Module, Vec<String>)> = Vec::new();
        for root in ["crate::", "super::", "self::"] {
            for (at, _) in code.match_indices(root) {
                let before = code[..at].chars().next_back();
                if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                    continue;
                }
                // `super` of `a/b.rs` and of `a/b/mod.rs` alike is `a`.
                let mut base: Module = match root {
                    "crate::" => Vec::new(),
                    "self::" => m.clone(),
                    _ => m[..m.len().saturating_sub(1)].to_vec(),
                };
                let mut rest = &code[at + root.len()..];
                while let Some(r) = rest.strip_prefix("super::") {
                    base.pop();
                    rest = r;
                }
                let rest = rest.strip_prefix('{').map_or(rest.to_string(), |g| format!("x::{{{g}"));
                for p in use_tree(&rest) {
                    let p = if rest.starts_with("x::{") { p[1..].to_vec() } else { p };
                    paths.push((base.clone(), p));
                }
            }
        }
        // A child module named directly in a `use`.
        for stmt in code.split("use ").skip(1) {
            let stmt = stmt.split(';').next().unwrap_or_default();
            for p in use_tree(stmt) {
                let child: Module = m.iter().cloned().chain(p.first().cloned()).collect();
                if p.len() >= 2 && files.contains_key(&child) {
                    paths.push((m.clone(), p));
                }
            }
        }
        let targets: BTreeSet<Module> =
            paths.iter().map(|(base, p)| resolve(base, p)).filter(|t| t != m && files.contains_key(t)).collect();
        g.insert(m.clone(), targets);
    }
    g
}

/// The graph's circles: its strongly connected parts of more than one file, each sorted.
fn circles(g: &BTreeMap<Module, BTreeSet<Module>>) -> BTreeSet<Vec<String>> {
    let reach = |from: &Module| -> BTreeSet<Module> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(m) = todo.pop() {
            for n in g.get(&m).into_iter().flatten() {
                if seen.insert(n.clone()) {
                    todo.push(n.clone());
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&Module, BTreeSet<Module>> = g.keys().map(|m| (m, reach(m))).collect();
    let mut out = BTreeSet::new();
    for (m, r) in &reached {
        if !r.contains(*m) {
            continue;
        }
        let mut part: Vec<String> = r
            .iter()
            .filter(|n| reached[n].contains(*m))
            .map(|n| if n.is_empty() { "crate".into() } else { n.join("::") })
            .collect();
        part.sort();
        out.insert(part);
    }
    out
}

#[test]
fn no_file_imports_another_in_a_circle_beyond_the_known_ones() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for krate in ["algorithms", "scheduler", "extender", "testing"] {
        let found = circles(&graph(&root.join(krate).join("src")));
        let known: BTreeSet<Vec<String>> = KNOWN
            .iter()
            .filter(|(k, _)| *k == krate)
            .map(|(_, files)| files.iter().map(|f| f.to_string()).collect())
            .collect();
        let new: Vec<_> = found.difference(&known).collect();
        assert!(new.is_empty(), "{krate}: files import each other in a circle: {new:?}");
        let gone: Vec<_> = known.difference(&found).collect();
        assert!(gone.is_empty(), "{krate}: a known circle is broken now; take it off the list: {gone:?}");
    }
}

#[test]
fn the_reader_follows_paths_to_the_files_that_define_them_and_finds_circles() {
    let dir = std::env::temp_dir().join(format!("layering-files-{}", std::process::id()));
    let write = |rel: &str, text: &str| {
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write("lib.rs", "mod a;\nmod b;\nmod c;\n");
    write("a/mod.rs", "mod inner;\npub use inner::Thing;\nuse crate::b::{B, deep::D};\n");
    write("a/inner.rs", "pub struct Thing;\n");
    write("b/mod.rs", "pub mod deep;\npub struct B;\n");
    write("b/deep.rs", "pub struct D;\nfn f() { super::super::c::g(); }\n");
    write("c.rs", "pub fn g() {}\n#[cfg(test)]\nmod tests { use crate::a::Thing; }\n");
    let g = graph(&dir);
    let names = |m: &[&str]| g[&m.iter().map(|s| s.to_string()).collect::<Module>()].clone();
    let module = |s: &str| s.split("::").map(str::to_string).collect::<Module>();
    assert_eq!(names(&["a"]), [module("b"), module("b::deep")].into());
    assert_eq!(names(&["b", "deep"]), [module("c")].into());
    assert!(names(&["c"]).is_empty(), "a test module names nothing");
    assert!(circles(&g).is_empty());
    // c names a's Thing, which a re-exports from a::inner: no circle; naming b::deep is one.
    write("c.rs", "use crate::a::Thing;\n");
    assert!(circles(&graph(&dir)).is_empty());
    write("c.rs", "use crate::b::deep::D;\n");
    let found = circles(&graph(&dir));
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(found, [vec!["b::deep".to_string(), "c".to_string()]].into());
}

//! The crates' top-level modules depend on each other without circles: each module's
//! non-test sources are read for `crate::<module>` paths (grouped `use crate::{…}`
//! included), and the graph they make must have no cycle.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The first segment of each path that follows `crate::`, through `{…}` groups.
fn crate_modules(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // Top-level items of the group: split at commas outside nested braces.
            let (mut depth, mut start) = (0usize, 0usize);
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        out.extend(first_ident(&group[start..i]));
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        out.extend(first_ident(&group[start..i]));
                        start = i + 1;
                    }
                    _ => {}
                }
            }
        } else {
            out.extend(first_ident(rest));
        }
    }
    out
}

fn first_ident(s: &str) -> Option<String> {
    let s = s.trim_start();
    let end = s.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(s.len());
    (end > 0).then(|| s[..end].to_string())
}

/// Top-level module to the modules it uses, from a crate's `src`.
fn graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    sources(src, &mut files);
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in files {
        let rel = file.strip_prefix(src).unwrap();
        let name = rel.file_name().unwrap().to_string_lossy().to_string();
        if name == "tests.rs" || name.ends_with("_tests.rs") || name == "lib.rs" || name == "main.rs" {
            continue;
        }
        let top = rel.components().next().unwrap().as_os_str().to_string_lossy().trim_end_matches(".rs").to_string();
        let text = std::fs::read_to_string(&file).unwrap();
        let text = text.split("#[cfg(test)]\nmod tests").next().unwrap_or_default();
        let uses = crate_modules(text).into_iter().filter(|m| *m != top);
        g.entry(top.clone()).or_default().extend(uses);
    }
    g
}

/// A cycle of the graph, if it has one.
fn find_cycle(g: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        g: &BTreeMap<String, BTreeSet<String>>,
        node: &str,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == node) {
            let mut cycle = path[i..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in g.get(node).into_iter().flatten().filter(|n| g.contains_key(*n)) {
            if let Some(c) = visit(g, next, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    g.keys().find_map(|k| visit(g, k, &mut Vec::new(), &mut done))
}

#[test]
fn no_crate_has_an_import_circle_between_its_modules() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for krate in ["algorithms", "scheduler", "extender", "testing"] {
        let g = graph(&root.join(krate).join("src"));
        assert!(g.len() > 1 || krate == "testing", "{krate}: no modules read");
        if let Some(cycle) = find_cycle(&g) {
            panic!("{krate}: modules import each other in a circle: {}", cycle.join(" -> "));
        }
    }
}

#[test]
fn the_reader_sees_grouped_and_nested_imports_and_finds_circles() {
    let text = "use crate::{a::X, b::{C, D}, c};\nfn f() { crate::d::g(); }";
    let found: Vec<String> = crate_modules(text).into_iter().collect();
    assert_eq!(found, ["a", "b", "c", "d"]);
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    g.insert("a".into(), ["b".to_string()].into());
    g.insert("b".into(), ["c".to_string()].into());
    g.insert("c".into(), BTreeSet::new());
    assert_eq!(find_cycle(&g), None);
    g.get_mut("c").unwrap().insert("a".into());
    assert_eq!(find_cycle(&g).unwrap(), ["a", "b", "c", "a"]);
}

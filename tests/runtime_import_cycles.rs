//! No two files of one module import each other, directly or through a chain (issue 16):
//! the consumer's files, the driver's and the operator's. The imports are read from the
//! source text (`crate::<module path>::NAME`, `super::NAME` and `super::{NAME, ...}` where NAME
//! is a sibling file), outside comments and `#[cfg(test)]` modules.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The sibling files a file of `dir` names. `module` is the directory's crate path
/// (`crate::consumer`).
fn imports_of(text: &str, module: &str, siblings: &BTreeSet<String>) -> BTreeSet<String> {
    // Everything from the first test module on is the file's own tests.
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => text,
    };
    let code: String = text
        .lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n");
    let mut found = BTreeSet::new();
    for prefix in [format!("{module}::"), "super::".to_string()] {
        let mut rest = code.as_str();
        while let Some(i) = rest.find(&prefix) {
            rest = &rest[i + prefix.len()..];
            if let Some(group) = rest.strip_prefix('{') {
                // `super::{a, b::{c}, d}`: the names at the group's top level.
                let mut depth = 1usize;
                let mut word = String::new();
                // The first word of each top-level path is the name it starts from.
                let mut first = true;
                for ch in group.chars() {
                    if ch.is_alphanumeric() || ch == '_' {
                        word.push(ch);
                        continue;
                    }
                    if !word.is_empty() {
                        if depth == 1 && first && siblings.contains(&word) {
                            found.insert(word.clone());
                        }
                        if depth == 1 {
                            first = false;
                        }
                        word.clear();
                    }
                    match ch {
                        '{' => depth += 1,
                        '}' => depth -= 1,
                        ',' if depth == 1 => first = true,
                        _ => {}
                    }
                    if depth == 0 {
                        break;
                    }
                }
            } else {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if siblings.contains(&name) {
                    found.insert(name);
                }
            }
        }
    }
    found
}

/// The import graph of the files in `dir` (mod.rs excluded: it declares them).
fn graph(dir: &Path, module: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(dir).expect("source directory") {
        let path = entry.expect("entry").path();
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        if path.extension().and_then(|e| e.to_str()) != Some("rs") || stem == "mod" {
            continue;
        }
        files.insert(
            stem.to_string(),
            std::fs::read_to_string(&path).expect("read"),
        );
    }
    let names: BTreeSet<String> = files.keys().cloned().collect();
    files
        .iter()
        .map(|(name, text)| {
            let mut deps = imports_of(text, module, &names);
            deps.remove(name);
            (name.clone(), deps)
        })
        .collect()
}

/// Every cycle found, each as `a -> b -> a`.
fn cycles(g: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    fn walk(
        g: &BTreeMap<String, BTreeSet<String>>,
        at: &str,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
        out: &mut Vec<String>,
    ) {
        if let Some(i) = path.iter().position(|p| p == at) {
            let mut c = path[i..].to_vec();
            c.push(at.to_string());
            out.push(c.join(" -> "));
            return;
        }
        if done.contains(at) {
            return;
        }
        path.push(at.to_string());
        for next in g.get(at).into_iter().flatten() {
            walk(g, next, path, done, out);
        }
        path.pop();
        done.insert(at.to_string());
    }
    let mut out = Vec::new();
    let mut done = BTreeSet::new();
    for start in g.keys() {
        walk(g, start, &mut Vec::new(), &mut done, &mut out);
    }
    out
}

#[test]
fn no_two_files_of_a_module_import_each_other() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut found = Vec::new();
    for (dir, module) in [
        ("consumer", "crate::consumer"),
        ("runtime/driver", "crate::runtime::driver"),
        ("runtime/operator", "crate::runtime::operator"),
    ] {
        let g = graph(&root.join(dir), module);
        assert!(g.len() > 3, "{dir}: too few files read: {g:?}");
        for c in cycles(&g) {
            found.push(format!("{dir}: {c}"));
        }
    }
    assert!(found.is_empty(), "import cycles:\n{}", found.join("\n"));
}

#[test]
fn the_reader_finds_direct_grouped_and_chained_imports() {
    let names: BTreeSet<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
    let text = "use super::a::X;\nuse super::{Inner, b::{self, Y}};\n// use super::c;\n";
    let got = imports_of(text, "crate::m", &names);
    assert_eq!(got, ["a", "b"].iter().map(|s| s.to_string()).collect());
    let mut g = BTreeMap::new();
    g.insert("a".to_string(), ["b".to_string()].into());
    g.insert("b".to_string(), ["c".to_string()].into());
    g.insert("c".to_string(), ["a".to_string()].into());
    assert_eq!(cycles(&g), vec!["a -> b -> c -> a".to_string()]);
    g.insert("c".to_string(), BTreeSet::new());
    assert!(cycles(&g).is_empty());
}

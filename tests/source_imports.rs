//! The crate's files import each other one way: this reads every file under `src/`, collects
//! the files each one names (its `use` lines, and the `crate::`/`super::`/`self::` paths and
//! paths through an imported module written in its code), and fails on any cycle of imports
//! between files, printing each cycle (docs/architecture.md, "One-way imports").
//!
//! A path names the deepest file of the module tree it walks through: `super::data::Key` in
//! `src/console/app.rs` names `src/console/data.rs`; `crate::runtime::store::Store` names
//! `src/runtime/store/mod.rs` (or `store.rs`). A `mod` line is structure, not an import, and
//! so is a module reaching into its own children by their bare names (`keys::on_key` or
//! `pub use keys::X` in the `mod.rs` that declares `mod keys;`): a module's face is made of its
//! children. A child naming its parent (`super::Log`) or any path from `crate::` is an import.
//! Comments, string literals and `#[cfg(test)]` items (a file's tests may reach anywhere) are
//! not read.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A file's module path (`["console", "app"]`) and its source.
struct SourceFile {
    module: Vec<String>,
    rel: String,
    text: String,
}

fn collect(dir: &Path, root: &Path, out: &mut Vec<SourceFile>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            collect(&p, root, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            let rel = p.strip_prefix(root).expect("under src").to_path_buf();
            let mut module: Vec<String> = rel
                .iter()
                .map(|c| c.to_string_lossy().trim_end_matches(".rs").to_string())
                .collect();
            if matches!(
                module.last().map(String::as_str),
                Some("mod" | "lib" | "main")
            ) {
                module.pop();
            }
            out.push(SourceFile {
                module,
                rel: format!("src/{}", rel.display()),
                text: std::fs::read_to_string(&p).expect("source is UTF-8"),
            });
        }
    }
}

/// The source without comments, string and char literals (their text could look like paths).
fn code_only(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c == b'r' && matches!(b.get(i + 1), Some(b'#' | b'"')) && !ident_before(b, i) {
            // A raw string: r"..." or r#"..."#.
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&b'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&b'"') {
                out.push(c as char);
                i += 1;
                continue;
            }
            j += 1;
            let close: Vec<u8> = std::iter::once(b'"')
                .chain(std::iter::repeat_n(b'#', hashes))
                .collect();
            while j < b.len() && !b[j..].starts_with(&close) {
                j += 1;
            }
            i = j + close.len();
            out.push_str("\"\"");
        } else if c == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == b'\'' {
            // A char literal ('x', '\n', '\u{..}') or a lifetime ('a).
            let end = if b.get(i + 1) == Some(&b'\\') {
                b.get(i + 3..)
                    .and_then(|t| t.iter().position(|&x| x == b'\''))
                    .map(|p| i + 4 + p)
            } else {
                let ch = src[i + 1..].chars().next().map_or(1, char::len_utf8);
                (b.get(i + 1 + ch) == Some(&b'\'')).then_some(i + 2 + ch)
            };
            match end {
                Some(e) => {
                    out.push_str("' '");
                    i = e;
                }
                None => {
                    out.push('\'');
                    i += 1;
                }
            }
        } else {
            let ch = src[i..].chars().next().expect("in bounds");
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

fn ident_before(b: &[u8], i: usize) -> bool {
    i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')
}

/// The code without `#[cfg(test)]` items (the attribute and the braced item after it).
fn without_test_items(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(p) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..p]);
        let after = &rest[p..];
        let Some(open) = after.find(['{', ';']) else {
            return out;
        };
        if after.as_bytes()[open] == b';' {
            rest = &after[open + 1..];
            continue;
        }
        let mut depth = 0usize;
        let mut end = after.len();
        for (j, ch) in after[open..].char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + j + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// Expands a use tree (`a::{b, c::{d, e as f}}`, `a::*`) into its paths and their local names.
fn expand_use(tree: &str, prefix: &[String], out: &mut Vec<(Vec<String>, Option<String>)>) {
    let tree = tree.trim();
    if tree.is_empty() {
        return;
    }
    if let Some(inner) = tree.strip_prefix('{').and_then(|t| t.strip_suffix('}')) {
        for part in split_top(inner) {
            expand_use(part, prefix, out);
        }
        return;
    }
    if let Some(pos) = tree.find("::") {
        let (head, tail) = (&tree[..pos], &tree[pos + 2..]);
        if !head.contains('{') {
            let mut p = prefix.to_vec();
            p.push(head.trim().to_string());
            expand_use(tail, &p, out);
            return;
        }
    }
    let mut p = prefix.to_vec();
    let (name, alias) = match tree.split_once(" as ") {
        Some((n, a)) => (n.trim(), Some(a.trim().to_string())),
        None => (tree, None),
    };
    if name == "*" {
        out.push((p, None));
        return;
    }
    if name != "self" {
        p.push(name.to_string());
    }
    let local = alias.or_else(|| p.last().cloned());
    out.push((p, local));
}

/// Splits at top-level commas.
fn split_top(s: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

/// A path as written (`super::data::Key`) made absolute from the module `here`; `None` for a
/// path outside the crate (`std::`, a dependency).
fn absolute(path: &[String], here: &[String]) -> Option<Vec<String>> {
    let mut segs = path.iter();
    let mut abs: Vec<String> = match path.first().map(String::as_str) {
        Some("crate") => {
            segs.next();
            Vec::new()
        }
        Some("self") => {
            segs.next();
            here.to_vec()
        }
        Some("super") => {
            let n = path.iter().take_while(|s| *s == "super").count();
            if n > here.len() {
                return None;
            }
            for _ in 0..n {
                segs.next();
            }
            here[..here.len() - n].to_vec()
        }
        _ => return None,
    };
    abs.extend(segs.cloned());
    Some(abs)
}

/// Every path the code writes, made absolute, and what each imported name stands for.
fn paths_of(code: &str, here: &[String]) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    let mut aliases: BTreeMap<String, Vec<String>> = BTreeMap::new();
    // `use` items (possibly over several lines).
    let mut rest = code;
    while let Some(p) = find_use(rest) {
        let after = &rest[p..];
        let end = after.find(';').unwrap_or(after.len());
        let body: String = after[..end]
            .trim_start_matches("pub(crate) ")
            .trim_start_matches("pub(super) ")
            .trim_start_matches("pub ")
            .trim_start_matches("use ")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let mut items = Vec::new();
        expand_use(
            &body.replace(":: ", "::").replace(" ::", "::"),
            &[],
            &mut items,
        );
        for (path, local) in items {
            if let Some(abs) = absolute(&path, here) {
                if let Some(l) = local {
                    aliases.insert(l, abs.clone());
                }
                found.push(abs);
            }
        }
        rest = &after[end.min(after.len())..];
    }
    // Paths written in code: `crate::a::b`, `super::x`, `self::y`, `alias::z`.
    let bytes = code.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if (bytes[i].is_ascii_alphabetic() || bytes[i] == b'_') && !ident_before(bytes, i) {
            let start = i;
            while i < bytes.len()
                && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_' || bytes[i] == b':')
            {
                i += 1;
            }
            let word = code[start..i].trim_end_matches(':');
            if word.contains("::") {
                let segs: Vec<String> = word.split("::").map(str::to_string).collect();
                if let Some(abs) = absolute(&segs, here) {
                    found.push(abs);
                } else if let Some(base) = aliases.get(&segs[0]) {
                    let mut abs = base.clone();
                    abs.extend(segs[1..].iter().cloned());
                    found.push(abs);
                }
            }
        } else {
            i += 1;
        }
    }
    found
}

/// The next `use` item's start (at a line start, after an optional visibility).
fn find_use(s: &str) -> Option<usize> {
    let mut off = 0;
    for line in s.split_inclusive('\n') {
        let t = line.trim_start();
        let lead = line.len() - t.len();
        for pre in ["use ", "pub use ", "pub(crate) use ", "pub(super) use "] {
            if t.starts_with(pre) {
                return Some(off + lead);
            }
        }
        off += line.len();
    }
    None
}

/// The file a module path lands in: its deepest prefix that is a file.
fn file_of<'a>(abs: &[String], files: &'a BTreeMap<Vec<String>, String>) -> Option<&'a String> {
    (0..=abs.len()).rev().find_map(|n| files.get(&abs[..n]))
}

/// Imports between files: file → files it names (itself left out).
fn graph(sources: &[SourceFile]) -> BTreeMap<String, BTreeSet<String>> {
    let files: BTreeMap<Vec<String>, String> = sources
        .iter()
        .filter(|s| !s.rel.ends_with("main.rs"))
        .map(|s| (s.module.clone(), s.rel.clone()))
        .collect();
    let mut g = BTreeMap::new();
    for s in sources {
        let code = without_test_items(&code_only(&s.text));
        let mut to = BTreeSet::new();
        for abs in paths_of(&code, &s.module) {
            if let Some(f) = file_of(&abs, &files)
                && *f != s.rel
            {
                // A file naming one of its own ancestors' modules only to reach a child
                // (`super::data::Key` from `console/app.rs` lands in data.rs, not mod.rs):
                // `file_of` already picked the deepest file.
                to.insert(f.clone());
            }
        }
        g.insert(s.rel.clone(), to);
    }
    g
}

/// The strongly connected groups of more than one file (Tarjan), each as one cycle through it.
fn cycles(g: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct T<'a> {
        g: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        groups: Vec<Vec<&'a str>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        let n = t.index.len();
        t.index.insert(v, n);
        t.low.insert(v, n);
        t.stack.push(v);
        t.on.insert(v);
        for w in t.g.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if t.on.contains(w) {
                let iw = t.index[w];
                let lv = t.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut group = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(w);
                group.push(w);
                if w == v {
                    break;
                }
            }
            if group.len() > 1 {
                group.sort();
                t.groups.push(group);
            }
        }
    }
    let mut t = T {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        groups: Vec::new(),
    };
    for v in g.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.groups.sort();
    t.groups.iter().map(|group| one_cycle(g, group)).collect()
}

/// Each cycle with the files of its circle (the strongly connected group), for the report.
fn report(g: &BTreeMap<String, BTreeSet<String>>, found: &[Vec<String>]) -> Vec<String> {
    found
        .iter()
        .map(|c| {
            let start = &c[0];
            let members: Vec<&str> = g
                .keys()
                .filter(|f| reaches(g, start, f) && reaches(g, f, start))
                .map(String::as_str)
                .collect();
            format!(
                "{}\n    (files in this circle: {})",
                c.join(" → "),
                members.join(", ")
            )
        })
        .collect()
}

fn reaches(g: &BTreeMap<String, BTreeSet<String>>, from: &str, to: &str) -> bool {
    let mut seen = BTreeSet::new();
    let mut todo = vec![from];
    while let Some(v) = todo.pop() {
        if v == to {
            return true;
        }
        if seen.insert(v) {
            todo.extend(g.get(v).into_iter().flatten().map(String::as_str));
        }
    }
    false
}

/// A shortest cycle from the group's first file back to itself, inside the group.
fn one_cycle(g: &BTreeMap<String, BTreeSet<String>>, group: &[&str]) -> Vec<String> {
    let inside: BTreeSet<&str> = group.iter().copied().collect();
    let start = group[0];
    let mut prev: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(v) = queue.pop_front() {
        for w in g.get(v).into_iter().flatten() {
            let w = w.as_str();
            if w == start {
                let mut path = vec![v.to_string()];
                let mut cur = v;
                while cur != start {
                    cur = prev[cur];
                    path.push(cur.to_string());
                }
                path.reverse();
                path.push(start.to_string());
                return path;
            }
            if inside.contains(w) && !prev.contains_key(w) && w != start {
                prev.insert(w, v);
                queue.push_back(w);
            }
        }
    }
    group.iter().map(|s| s.to_string()).collect()
}

fn src_graph() -> BTreeMap<String, BTreeSet<String>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut sources = Vec::new();
    collect(&root, &root, &mut sources);
    graph(&sources)
}

#[test]
fn no_file_under_src_imports_in_a_circle() {
    let g = src_graph();
    let found = cycles(&g);
    let report = report(&g, &found);
    assert!(
        found.is_empty(),
        "{} import cycle(s) between files under src/ (each file names the next):\n{}",
        found.len(),
        report.join("\n")
    );
}

/// The reader itself: it sees `use` trees, `super::` paths in code and paths through an
/// imported module, and does not see comments, strings or test modules.
#[test]
fn the_reader_finds_the_paths_a_file_writes() {
    let src = r#"
use super::{data::*, keymap::Action as A};
use crate::runtime::{self, store::Store};
// use super::ignored;
fn f() { let s = "super::nope"; super::render::draw(); screens::q(); }
use super::screens;
#[cfg(test)]
mod tests { use super::hidden::X; }
"#;
    let here: Vec<String> = vec!["console".into(), "app".into()];
    let code = without_test_items(&code_only(src));
    let got: BTreeSet<Vec<String>> = paths_of(&code, &here).into_iter().collect();
    let p = |s: &str| s.split("::").map(str::to_string).collect::<Vec<_>>();
    for want in [
        "console::data",
        "console::keymap::Action",
        "runtime",
        "runtime::store::Store",
        "console::render::draw",
        "console::screens",
        "console::screens::q",
    ] {
        assert!(got.contains(&p(want)), "missing {want} in {got:?}");
    }
    for not in ["console::ignored", "console::nope", "console::hidden::X"] {
        assert!(
            !got.contains(&p(not)),
            "read {not} from a comment, string or test"
        );
    }
    // A two-file circle is found and printed in order.
    let mut g = BTreeMap::new();
    g.insert("a".to_string(), BTreeSet::from(["b".to_string()]));
    g.insert(
        "b".to_string(),
        BTreeSet::from(["a".to_string(), "c".to_string()]),
    );
    g.insert("c".to_string(), BTreeSet::new());
    assert_eq!(cycles(&g), vec![vec!["a", "b", "a"]]);
}

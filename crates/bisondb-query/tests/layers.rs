//! The layers of `bisondb-query`, and the check that keeps them: every
//! top-level module sits in one layer, and may use only modules of the layers
//! below it, so the module graph has no cycles. The test reads the crate's
//! sources and follows every `crate::` and `super::` path of non-test code
//! (a re-export counts as a use); test modules (`#[cfg(test)]`) may reach
//! anywhere. Within each module, its submodules must not form a cycle either.
//!
//! A new top-level module must be added to [`LAYERS`]; a dependency that
//! points up or sideways fails with the file that makes it. When it does,
//! move the shared piece down (as `stats` and `key` were), or let the lower
//! module take what it needs as a parameter or a trait.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Bottom to top: name of the layer, its modules.
const LAYERS: &[(&str, &[&str])] = &[
    // No use of the rest of the crate: decimal128 arithmetic, the BSONColumn
    // codec, the JavaScript bridge.
    ("foundation", &["decimal", "bsoncolumn", "js"]),
    // Values: type names, rendering, truthiness, numeric promotion, sizes.
    ("values", &["value"]),
    // Collations, dotted paths, percentiles.
    ("collation and paths", &["collation", "path", "stats"]),
    // BSON order, and the canonical key of a value for grouping and sets.
    ("comparison", &["compare", "key"]),
    // Text search and geometry: what `$text`, `$near` and the indexes share.
    ("text and geometry", &["text", "geo"]),
    ("expressions", &["expr"]),
    ("matcher", &["matcher"]),
    // Uses of a filter and of expressions: sorting, find projections, the
    // keys a document gives an index (with the matcher's bounds).
    (
        "sort, projection and index keys",
        &["sort", "projection", "index_keys"],
    ),
    ("stages and accumulators", &["agg"]),
    ("update", &["update"]),
    ("change streams", &["change_stream"]),
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|(_, mods)| mods.contains(&module))
}

/// A source file with its module path (`["expr", "date"]` for
/// `src/expr/date.rs`; empty for `lib.rs`).
struct Source {
    file: PathBuf,
    module: Vec<String>,
    text: String,
}

fn collect(dir: &Path, src: &Path, out: &mut Vec<Source>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            collect(&p, src, out);
            continue;
        }
        if p.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let rel = p.strip_prefix(src).unwrap_or(&p).with_extension("");
        let mut module: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if matches!(module.last().map(String::as_str), Some("mod" | "lib")) {
            module.pop();
        }
        let text =
            std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("reading {}: {e}", p.display()));
        out.push(Source {
            file: p,
            module,
            text,
        });
    }
}

/// The source without comments and string literals (so a path named in a
/// doc comment or a message is no dependency).
fn strip(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
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
                out.push(' ');
            }
            b'r' if matches!(b.get(i + 1), Some(b'"' | b'#'))
                && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')) =>
            {
                // Raw string r"..." / r#"..."#.
                let mut j = i + 1;
                let mut hashes = 0;
                while b.get(j) == Some(&b'#') {
                    hashes += 1;
                    j += 1;
                }
                if b.get(j) != Some(&b'"') {
                    out.push('r');
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
            }
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    if b[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
                i += 1;
                out.push_str("\"\"");
            }
            b'\'' => {
                // A char literal ('x', '\n', '"'), or a lifetime ('a).
                let end = if b.get(i + 1) == Some(&b'\\') {
                    b[i + 3..]
                        .iter()
                        .position(|&c| c == b'\'')
                        .map(|p| i + 3 + p)
                } else if b.get(i + 2) == Some(&b'\'') {
                    Some(i + 2)
                } else {
                    None
                };
                match end {
                    Some(e) => {
                        out.push_str("' '");
                        i = e + 1;
                    }
                    None => {
                        out.push('\'');
                        i += 1;
                    }
                }
            }
            c => {
                out.push(c as char);
                i += 1;
            }
        }
    }
    out
}

/// Removes the items under `#[cfg(test)]`, and returns the names of the
/// test-only file modules they declare (`#[cfg(test)] mod tests;`).
fn drop_test_items(code: &str) -> (String, Vec<String>) {
    let mut out = String::with_capacity(code.len());
    let mut test_mods = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let item = &rest[at + "#[cfg(test)]".len()..];
        let trimmed = item.trim_start();
        let brace = trimmed.find('{');
        let semi = trimmed.find(';');
        let end = match (brace, semi) {
            (_, Some(s)) if brace.is_none_or(|b| s < b) => {
                if let Some(name) = trimmed[..s].trim().strip_prefix("mod ") {
                    test_mods.push(name.trim().to_string());
                }
                s + 1
            }
            (Some(b), _) => {
                let mut depth = 0;
                let mut end = trimmed.len();
                for (k, c) in trimmed[b..].char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = b + k + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                end
            }
            (None, _) => trimmed.len(),
        };
        rest = &trimmed[end..];
    }
    out.push_str(rest);
    (out, test_mods)
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The paths a use-tree names, each as its segments (`a::{b, c::d}` gives
/// `[a, b]` and `[a, c, d]`).
fn use_tree(tree: &str, prefix: &[String], out: &mut Vec<Vec<String>>) {
    let tree = tree.trim();
    if let Some(open) = tree.find('{') {
        let mut base = prefix.to_vec();
        base.extend(segments(&tree[..open]));
        let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        let mut depth = 0;
        let mut start = 0;
        for (k, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    use_tree(&inner[start..k], &base, out);
                    start = k + 1;
                }
                _ => {}
            }
        }
        use_tree(&inner[start..], &base, out);
    } else {
        let mut p = prefix.to_vec();
        p.extend(segments(tree.split(" as ").next().unwrap_or(tree)));
        if !p.is_empty() {
            out.push(p);
        }
    }
}

fn segments(s: &str) -> Vec<String> {
    s.split("::")
        .map(str::trim)
        .filter(|x| !x.is_empty() && *x != "self" && *x != "*")
        .map(str::to_string)
        .collect()
}

/// Every path a file names through `crate::` or `super::`, resolved to
/// segments from the crate root.
fn references(module: &[String], code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for (start, _) in code
        .match_indices("crate::")
        .chain(code.match_indices("super::"))
    {
        let before = code[..start].chars().next_back();
        if before.is_some_and(|c| is_ident(c) || c == '$' || c == ':') {
            continue; // part of a longer path (`a::super::`) or `$crate::`
        }
        // The longest path from here: idents, `::`, and a braced use-tree.
        let tail = &code[start..];
        let mut end = 0;
        let mut depth = 0;
        for (k, c) in tail.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth > 0 => depth -= 1,
                _ if depth > 0 => {}
                c if is_ident(c) || c == ':' => {}
                _ => {
                    end = k;
                    break;
                }
            }
            end = k + c.len_utf8();
        }
        let path = &tail[..end];
        let (base, path) = if let Some(p) = path.strip_prefix("crate::") {
            (Vec::new(), p)
        } else {
            let mut up = 0;
            let mut p = path;
            while let Some(q) = p.strip_prefix("super::") {
                up += 1;
                p = q;
            }
            (module[..module.len().saturating_sub(up)].to_vec(), p)
        };
        use_tree(path, &base, &mut out);
    }
    out
}

/// Module -> modules it uses, each with a file that makes the use.
type Graph = BTreeMap<String, BTreeMap<String, PathBuf>>;

/// The graph of the top-level modules, and that of the submodules within
/// each (`agg::stages` -> `agg::spill`; a submodule's use of its parent is
/// no edge there, the parent being the module they make up).
fn graph() -> (Graph, Graph) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut sources = Vec::new();
    collect(&src, &src, &mut sources);
    let mut test_only: BTreeSet<Vec<String>> = BTreeSet::new();
    let mut cleaned = Vec::new();
    for s in &sources {
        let (code, test_mods) = drop_test_items(&strip(&s.text));
        for m in test_mods {
            let mut p = s.module.clone();
            p.push(m);
            test_only.insert(p);
        }
        cleaned.push(code);
    }
    let tops: BTreeSet<String> = sources
        .iter()
        .filter_map(|s| s.module.first().cloned())
        .collect();
    let subs: BTreeSet<String> = sources
        .iter()
        .filter(|s| s.module.len() >= 2)
        .map(|s| s.module[..2].join("::"))
        .collect();
    let mut g: Graph = BTreeMap::new();
    let mut inner: Graph = BTreeMap::new();
    for (s, code) in sources.iter().zip(&cleaned) {
        if (1..=s.module.len()).any(|n| test_only.contains(&s.module[..n])) {
            continue;
        }
        let Some(from) = s.module.first() else {
            continue; // lib.rs only declares the modules
        };
        g.entry(from.clone()).or_default();
        for r in references(&s.module, code) {
            if let (Some(sub), Some(to)) = (s.module.get(..2), r.get(..2)) {
                let (sub, to) = (sub.join("::"), to.join("::"));
                if sub != to && subs.contains(&to) && r[0] == s.module[0] {
                    inner
                        .entry(sub)
                        .or_default()
                        .entry(to)
                        .or_insert_with(|| s.file.clone());
                }
            }
            // Only modules: an item of the crate root, or a path an inline
            // module's `super::` reaches past, is no edge.
            if let Some(to) = r.first().filter(|t| tops.contains(*t)) {
                if to != from {
                    g.entry(from.clone())
                        .or_default()
                        .entry(to.clone())
                        .or_insert_with(|| s.file.clone());
                }
            }
        }
    }
    (g, inner)
}

/// A cycle through the graph, if there is one.
fn find_cycle(g: &Graph) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        g: &Graph,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(n.to_string(), 1);
        stack.push(n.to_string());
        for m in g.get(n).into_iter().flat_map(|e| e.keys()) {
            match state.get(m.as_str()) {
                Some(1) => {
                    let at = stack.iter().position(|x| x == m).unwrap_or(0);
                    let mut c = stack[at..].to_vec();
                    c.push(m.clone());
                    return Some(c);
                }
                Some(_) => {}
                None => {
                    if let Some(c) = visit(m, g, state, stack) {
                        return Some(c);
                    }
                }
            }
        }
        stack.pop();
        state.insert(n.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in g.keys() {
        if !state.contains_key(n) {
            if let Some(c) = visit(n, g, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

#[test]
fn modules_depend_only_on_lower_layers() {
    let (g, _) = graph();
    let mut errors = Vec::new();
    for (from, uses) in &g {
        let Some(lf) = layer_of(from) else {
            errors.push(format!(
                "module `{from}` is in no layer: add it to LAYERS in {}",
                file!()
            ));
            continue;
        };
        for (to, file) in uses {
            match layer_of(to) {
                Some(lt) if lt < lf => {}
                Some(lt) => errors.push(format!(
                    "`{from}` (layer {:?}) uses `{to}` (layer {:?}), which is not below it: {}",
                    LAYERS[lf].0,
                    LAYERS[lt].0,
                    file.display()
                )),
                None => errors.push(format!(
                    "`{from}` uses `{to}`, which is in no layer: {}",
                    file.display()
                )),
            }
        }
    }
    for (_, mods) in LAYERS {
        for m in *mods {
            if !g.contains_key(*m) {
                errors.push(format!(
                    "LAYERS names `{m}`, which is no module of the crate"
                ));
            }
        }
    }
    if let Some(c) = find_cycle(&g) {
        errors.push(format!("module cycle: {}", c.join(" -> ")));
    }
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

/// The check sees what it must: a use of an upper layer fails it.
#[test]
fn the_check_finds_uses() {
    let m = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let code = strip(
        "use crate::{value::{type_name, Num}, compare::compare_bson as c};\n\
         // crate::agg::Pipeline in a comment\n\
         let s = \"crate::update\";\n\
         fn f() { super::super::matcher::Matcher::parse(x); crate::expr::eval(); }\n\
         #[cfg(test)]\nmod tests { use crate::agg::Pipeline; }\n\
         #[cfg(test)]\nmod fuzz_tests;\n",
    );
    let (code, test_mods) = drop_test_items(&code);
    assert_eq!(test_mods, vec!["fuzz_tests".to_string()]);
    let refs = references(&m(&["expr", "date"]), &code);
    let tops: BTreeSet<&str> = refs
        .iter()
        .filter_map(|r| r.first())
        .map(String::as_str)
        .collect();
    assert_eq!(
        tops,
        BTreeSet::from(["value", "compare", "matcher", "expr"]),
        "{refs:?}"
    );
    assert!(refs.contains(&m(&["value", "Num"])));
    assert!(refs.contains(&m(&["compare", "compare_bson"])));
    // The layers are those of the graph: lower layers never use upper ones.
    assert!(layer_of("value") < layer_of("expr"));
    assert!(layer_of("expr") < layer_of("matcher"));
    assert!(layer_of("matcher") < layer_of("agg"));
    assert!(layer_of("agg") < layer_of("update"));
}

/// Within a module, its submodules use one another one way too (the
/// expression families, the stages and the spilling they share, ...).
#[test]
fn submodules_have_no_cycles() {
    let (_, inner) = graph();
    if let Some(c) = find_cycle(&inner) {
        panic!("submodule cycle: {}", c.join(" -> "));
    }
}

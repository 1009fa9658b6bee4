//! The core's layers look only down (DESIGN §2): a module never imports from
//! a layer above its own, and no modules import each other in a circle. Read
//! from the source text (`crate::` and `super::` paths outside comments and
//! `#[cfg(test)]` modules), so a new upward import fails here, naming it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Each layer, from the bottom, and the folders of `core/src` that hold it (the tree shows
/// the layers: `foundations/`, `transport/`, `api/`, `runtime/`, `client/`, `recipes/`,
/// `aio/`). Within a layer modules may use each other, as long as no circle forms.
const LAYERS: &[(&str, &[&str])] = &[
    ("foundations", &["foundations"]),
    ("transport", &["transport"]),
    ("api", &["api"]),
    ("runtime", &["runtime"]),
    // The client's shared state and its handle. (The façade methods of the
    // recipes still live beside them as `impl Client` blocks, above it.)
    ("client", &["client"]),
    ("recipes", &["recipes"]),
    // Futures over the recipes and the client (`baton::aio`).
    ("async", &["aio"]),
    // Exposition of the client's metrics (`baton::prometheus`, feature `prometheus`).
    ("exposition", &["prometheus"]),
    ("crate", &["crate"]),
];

fn layer_of(module: &str) -> Option<usize> {
    let top = module.split("::").next().unwrap_or(module);
    LAYERS.iter().position(|(_, mods)| mods.contains(&top))
}

fn module_name(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    if parts == ["lib"] {
        return "crate".into();
    }
    parts.join("::")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The source without line comments and without `#[cfg(test)]` modules
/// (each cut out by matching its braces).
fn code_of(text: &str) -> String {
    let mut text: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut from = 0;
    while let Some(i) = text[from..].find("#[cfg(test)]") {
        let at = from + i;
        let after = text[at + "#[cfg(test)]".len()..].trim_start();
        let is_mod = ["mod ", "pub mod ", "pub(crate) mod "]
            .iter()
            .any(|m| after.starts_with(m));
        let open = text[at..].find('{').map(|o| at + o);
        match open {
            Some(open) if is_mod => {
                let mut depth = 0usize;
                let mut end = text.len();
                for (k, c) in text[open..].char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = open + k + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                text.replace_range(at..end, "");
                from = at;
            }
            _ => from = at + 1,
        }
    }
    text
}

/// The longest known module that `path` (`a::b::c`) starts with.
fn resolve(path: &str, known: &BTreeSet<String>) -> Option<String> {
    let parts: Vec<&str> = path.split("::").collect();
    (1..=parts.len())
        .rev()
        .map(|n| parts[..n].join("::"))
        .find(|cand| known.contains(cand))
}

/// Identifier paths following `prefix` (`crate::`, `super::`), braces expanded.
fn paths_after(code: &str, prefix: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find(prefix) {
        let before = rest[..i].chars().last();
        rest = &rest[i + prefix.len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        if let Some(inner) = rest.strip_prefix('{') {
            let end = inner.find('}').unwrap_or(inner.len());
            for part in inner[..end].split(',') {
                let p: String = part
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                    .collect();
                if !p.is_empty() {
                    out.push(p);
                }
            }
            continue;
        }
        let p: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
            .collect();
        out.push(p.trim_end_matches(':').to_string());
    }
    out
}

fn edges() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let known: BTreeSet<String> = files.iter().map(|f| module_name(&src, f)).collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in &files {
        let me = module_name(&src, f);
        let code = code_of(&std::fs::read_to_string(f).unwrap());
        let parent = match me.rsplit_once("::") {
            Some((p, _)) => p.to_string(),
            None => "crate".to_string(),
        };
        let mut targets: Vec<String> = paths_after(&code, "crate::")
            .into_iter()
            .filter_map(|p| resolve(&p, &known))
            .collect();
        for p in paths_after(&code, "super::") {
            let full = if parent == "crate" {
                p
            } else {
                format!("{parent}::{p}")
            };
            targets.extend(resolve(&full, &known).or_else(|| Some(parent.clone())));
        }
        for t in targets {
            if t != me {
                edges.entry(me.clone()).or_default().insert(t);
            }
        }
    }
    edges
}

#[test]
fn every_module_has_a_layer() {
    let missing: Vec<String> = edges()
        .into_keys()
        .filter(|m| layer_of(m).is_none())
        .collect();
    assert!(
        missing.is_empty(),
        "modules with no layer in tests/layers.rs: {missing:?}"
    );
}

#[test]
fn no_module_imports_from_a_layer_above_its_own() {
    let mut upward = Vec::new();
    for (from, tos) in edges() {
        let Some(lf) = layer_of(&from) else { continue };
        for to in tos {
            if let Some(lt) = layer_of(&to) {
                if lt > lf {
                    upward.push(format!(
                        "{from} ({}) -> {to} ({})",
                        LAYERS[lf].0, LAYERS[lt].0
                    ));
                }
            }
        }
    }
    assert!(upward.is_empty(), "imports from a layer above: {upward:#?}");
}

#[test]
fn no_modules_import_each_other_in_a_circle() {
    let edges = edges();
    // Depth-first search for a back edge; reports one circle.
    fn visit(
        m: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(m.to_string(), 1);
        path.push(m.to_string());
        for t in edges.get(m).into_iter().flatten() {
            match state.get(t.as_str()).copied().unwrap_or(0) {
                1 => {
                    let start = path.iter().position(|p| p == t).unwrap();
                    let mut circle = path[start..].to_vec();
                    circle.push(t.clone());
                    return Some(circle);
                }
                0 => {
                    if let Some(c) = visit(t, edges, state, path) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        path.pop();
        state.insert(m.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for m in edges.keys() {
        if state.get(m.as_str()).copied().unwrap_or(0) == 0 {
            if let Some(c) = visit(m, &edges, &mut state, &mut Vec::new()) {
                panic!("an import circle: {}", c.join(" -> "));
            }
        }
    }
}

/// The reader itself: an upward import and a circle planted in text are seen.
#[test]
fn the_reader_sees_planted_imports() {
    let code = code_of("use crate::{client::Client, lock};\n#[cfg(test)]\npub(crate) mod fp { use super::*; fn g() { crate::x(); } }\nfn f() { super::x::y(); crate::kv::Kv::new(); }\n// crate::watch\n#[cfg(test)]\nmod tests { use crate::semaphore; }");
    let got = paths_after(&code, "crate::");
    assert_eq!(got, vec!["client::Client", "lock", "kv::Kv::new"]);
    assert_eq!(paths_after(&code, "super::"), vec!["x::y"]);
}

/// No source file of the core is over 800 lines: a longer one is split along a seam
/// (`client/close.rs` came out of `client.rs` this way).
#[test]
fn no_source_file_is_over_800_lines() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let long: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let n = std::fs::read_to_string(f).unwrap().lines().count();
            (n > 800).then(|| format!("{} ({n} lines)", f.display()))
        })
        .collect();
    assert!(long.is_empty(), "split these files along a seam: {long:?}");
}

//! The dev server's modules in layers, each importing only from layers below it (Consul's
//! layout: the state store at the bottom, then what the HTTP layer shares, the endpoint helpers,
//! the endpoint families, the router and the fault controls, the server handle on top). Fails
//! on an import (`crate::<module>`) from a layer above or beside, and on a module nobody
//! placed in a layer; so no import circle can come back.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Every top-level module of `devserver/src` and its layer. A module may use only modules in
/// lower layers (submodules of one module share its layer and may use each other).
const LAYERS: &[(&str, u32)] = &[
    // Base: no crate imports but each other's, in this order.
    ("godur", 0),
    ("journal", 0),
    ("leaderless", 0),
    ("acl_rules", 0),
    ("tls", 0),
    ("certs", 0),
    ("version", 1),
    ("config", 2),
    // The state store, by table.
    ("state", 3),
    // What the listener, connections, timers and handle share.
    ("watch", 4),
    ("serf", 4),
    ("shared", 5),
    // Requests and replies, blocking queries.
    ("query", 6),
    // The endpoint folder itself only declares its modules.
    ("endpoints", 7),
    // Endpoint helpers.
    ("endpoints::ctx", 7),
    ("endpoints::decode", 7),
    ("endpoints::filter", 7),
    ("endpoints::access", 8),
    ("endpoints::catalog_json", 8),
    // Endpoint pieces other endpoints use.
    ("endpoints::config_entries", 9),
    ("endpoints::connect", 9),
    ("endpoints::acl_templates", 9),
    ("endpoints::agent_misc", 9),
    ("endpoints::agent_service", 9),
    ("endpoints::txn_catalog", 9),
    ("endpoints::unimplemented", 9),
    ("endpoints::kv", 10),
    ("endpoints::catalog", 10),
    // Endpoint families.
    ("endpoints::session", 11),
    ("endpoints::health", 11),
    ("endpoints::event", 11),
    ("endpoints::acl", 11),
    ("endpoints::agent", 11),
    ("endpoints::operator", 11),
    ("endpoints::prepared_query", 11),
    ("endpoints::txn", 12),
    // The router and the server-wide fault controls.
    ("control", 13),
    ("http", 14),
    // The handle, the per-client fault proxy, the command line, the crate root.
    ("server", 15),
    ("proxy", 15),
    ("cli", 16),
    ("lib", 17),
    ("main", 18),
];

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
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

/// The top-level module a file belongs to (`state/kv.rs` → `state`).
fn top_module(rel: &Path) -> String {
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy();
    first.trim_end_matches(".rs").to_string()
}

/// The top-level modules a source names as `crate::<module>` (test modules and comments cut).
fn imports(src: &str) -> Vec<String> {
    let code = match src.find("#[cfg(test)]") {
        Some(i) => &src[..i],
        None => src,
    };
    let mut out = Vec::new();
    for line in code.lines() {
        let line = line.trim_start();
        if line.starts_with("//") {
            continue;
        }
        let mut rest = line;
        while let Some(i) = rest.find("crate::") {
            rest = &rest[i + "crate::".len()..];
            // `crate::{a::x, b}` names several.
            let names: Vec<&str> = if let Some(group) = rest.strip_prefix('{') {
                let end = group.find('}').unwrap_or(group.len());
                group[..end]
                    .split(',')
                    .map(|p| p.trim().split("::").next().unwrap_or(""))
                    .collect()
            } else {
                vec![rest.split("::").next().unwrap_or("")]
            };
            // `crate::endpoints::kv::...` names the family module.
            let nested = rest.strip_prefix("endpoints::").map(|r| {
                let m: String = r
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                format!("endpoints::{m}")
            });
            if let Some(n) = nested {
                out.push(n);
                continue;
            }
            for n in names {
                let n: String = n
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                // A lowercase first segment is a module; `crate::Config` and the like are the
                // root's re-exports of base-layer types.
                if n.starts_with(|c: char| c.is_ascii_lowercase()) {
                    out.push(n);
                }
            }
        }
    }
    out
}

#[test]
fn every_import_looks_down_a_layer() {
    let layers: BTreeMap<&str, u32> = LAYERS.iter().copied().collect();
    let mut files = Vec::new();
    rust_files(&src_dir(), &mut files);
    assert!(files.len() > 30, "found {} files", files.len());
    let modules: std::collections::BTreeSet<String> = files
        .iter()
        .map(|f| top_module(f.strip_prefix(src_dir()).unwrap()))
        .collect();
    let mut problems = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(src_dir()).unwrap();
        let from = top_module(rel);
        let Some(&from_layer) = layers.get(from.as_str()) else {
            problems.push(format!("{}: module `{from}` is in no layer", rel.display()));
            continue;
        };
        for to in imports(&std::fs::read_to_string(f).unwrap()) {
            // `crate::parse_go_duration` and the like: the root's re-exports, not modules.
            if to == from || !modules.contains(&to) {
                continue;
            }
            match layers.get(to.as_str()) {
                None => problems.push(format!(
                    "{}: imports `crate::{to}`, which is in no layer",
                    rel.display()
                )),
                Some(&l) if l >= from_layer && !(from == "lib" || from == "main") => {
                    problems.push(format!(
                        "{}: `{from}` (layer {from_layer}) imports `{to}` (layer {l}), not below it",
                        rel.display()
                    ))
                }
                Some(_) => {}
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The check itself: an import from a layer above is caught.
#[test]
fn an_upward_import_is_caught() {
    let got = imports(
        "use crate::http::Ctx;\nuse crate::{state::State, query::Reply};\n// crate::server\n",
    );
    assert_eq!(got, vec!["http", "state", "query"]);
    let layers: BTreeMap<&str, u32> = LAYERS.iter().copied().collect();
    assert!(layers["http"] > layers["state"]);
}

/// No source file outside the tests is over 800 lines.
#[test]
fn no_source_file_is_over_800_lines() {
    let mut files = Vec::new();
    rust_files(&src_dir(), &mut files);
    let long: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let n = std::fs::read_to_string(f).unwrap().lines().count();
            (n > 800).then(|| format!("{} ({n} lines)", f.display()))
        })
        .collect();
    assert!(long.is_empty(), "{long:?}");
}

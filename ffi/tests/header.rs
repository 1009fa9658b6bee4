//! The committed `include/baton.h` must be what the pinned cbindgen generates
//! (`BATON_BLESS=1 cargo test -p baton-ffi --test header` rewrites it), and its
//! version macros must match Cargo's version.

#![allow(unsafe_code)] // calls the C ABI

use std::path::{Path, PathBuf};

fn header_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../include/baton.h")
}

fn generate() -> String {
    let dir = env!("CARGO_MANIFEST_DIR");
    let config = cbindgen::Config::from_file(Path::new(dir).join("cbindgen.toml"))
        .expect("ffi/cbindgen.toml parses");
    let bindings = cbindgen::Builder::new()
        .with_crate(dir)
        .with_config(config)
        .generate()
        .expect("cbindgen generates the header");
    let mut out = Vec::new();
    bindings.write(&mut out);
    String::from_utf8(out).expect("the header is UTF-8")
}

#[test]
fn committed_header_is_up_to_date() {
    let generated = generate();
    let path = header_path();
    if std::env::var_os("BATON_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(&path, &generated).expect("write include/baton.h");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "include/baton.h differs from what cbindgen generates from ffi/src; \
         run `BATON_BLESS=1 cargo test -p baton-ffi --test header` and commit the result"
    );
}

fn macro_value<'a>(header: &'a str, name: &str) -> &'a str {
    let prefix = format!("#define {name} ");
    header
        .lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .unwrap_or_else(|| panic!("{name} is not defined in include/baton.h"))
        .trim()
}

#[test]
fn version_macros_match_cargo() {
    let header = std::fs::read_to_string(header_path()).expect("read include/baton.h");
    let version = env!("CARGO_PKG_VERSION");
    let parts: Vec<&str> = version.split(['.', '-', '+']).collect();
    assert_eq!(macro_value(&header, "BATON_VERSION_MAJOR"), parts[0]);
    assert_eq!(macro_value(&header, "BATON_VERSION_MINOR"), parts[1]);
    assert_eq!(macro_value(&header, "BATON_VERSION_PATCH"), parts[2]);
    assert_eq!(
        macro_value(&header, "BATON_VERSION_STRING"),
        format!("\"{version}\"")
    );
    // SAFETY: baton_version returns a static NUL-terminated string.
    let lib = unsafe { std::ffi::CStr::from_ptr(baton_ffi::baton_version()) };
    assert_eq!(lib.to_str().unwrap(), version);
}

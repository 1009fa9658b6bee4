//! Gives the shared library its soname, `libbaton.so.<ABI>`: the ABI is the version's major
//! number from 1.0 on, and `0.<minor>` before it (as Cargo reads 0.x versions, a minor release
//! may break the ABI). The Makefile installs `libbaton.so.<version>` with the links
//! `libbaton.so.<ABI>` (what programs load) and `libbaton.so` (what `-lbaton` finds).

fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let major = std::env::var("CARGO_PKG_VERSION_MAJOR").unwrap_or_default();
    let minor = std::env::var("CARGO_PKG_VERSION_MINOR").unwrap_or_default();
    let abi = if major == "0" {
        format!("0.{minor}")
    } else {
        major
    };
    if os == "linux" || os == "android" || os.ends_with("bsd") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libbaton.so.{abi}");
    }
    println!("cargo:rerun-if-changed=build.rs");
}

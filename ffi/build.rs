//! Gives the shared library the soname `libbaton.so`, the name it is installed under.

fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os == "linux" || os == "android" || os.ends_with("bsd") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libbaton.so");
    }
    println!("cargo:rerun-if-changed=build.rs");
}

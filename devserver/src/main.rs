//! `baton-devserver`: run the Consul-compatible dev server as a process.
//!
//! Prints `BATON_DEVSERVER_ADDR=<host:port>` as its first line to stdout when ready, so test
//! fixtures in any language can start it with `--port 0` and read the address (then the HTTPS
//! and unix-socket addresses, when asked for, a line each); everything else goes to stderr. Exits cleanly on SIGINT or SIGTERM. The command line itself is
//! [`baton_devserver::cli::run`] (`--help` lists it).

fn main() -> std::process::ExitCode {
    let mut args = std::env::args();
    let argv0 = args.next();
    std::process::ExitCode::from(baton_devserver::cli::run(argv0.as_deref(), args.collect()))
}

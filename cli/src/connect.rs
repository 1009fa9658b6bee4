//! The consul CLI's HTTP flags (`-http-addr`, `-token`, ...) on top of the
//! `CONSUL_*` environment variables, which `baton::ClientBuilder::from_env` reads.

use std::path::PathBuf;

use baton::{Client, ClientBuilder, TlsSettings};

use crate::args::{Flag, Kind, Parsed};

/// The HTTP flags every subcommand accepts (the consul CLI's client flags).
pub const HTTP_FLAGS: &[Flag] = &[
    Flag {
        name: "http-addr",
        kind: Kind::Value,
        value_name: "ADDR",
        help: "Consul's HTTP address: host:port or http(s)://host:port[/path] (unix:// sockets\nare not supported yet). Default: CONSUL_HTTP_ADDR, else 127.0.0.1:8500.",
    },
    Flag {
        name: "token",
        kind: Kind::Value,
        value_name: "TOKEN",
        help: "ACL token (default: CONSUL_HTTP_TOKEN). Sent as a header, never logged.",
    },
    Flag {
        name: "token-file",
        kind: Kind::Value,
        value_name: "PATH",
        help: "File holding the ACL token (default: CONSUL_HTTP_TOKEN_FILE).",
    },
    Flag {
        name: "ca-file",
        kind: Kind::Value,
        value_name: "PATH",
        help: "PEM CA certificates for TLS (default: CONSUL_CACERT).",
    },
    Flag {
        name: "ca-path",
        kind: Kind::Value,
        value_name: "DIR",
        help: "Directory of PEM CA certificates (default: CONSUL_CAPATH).",
    },
    Flag {
        name: "client-cert",
        kind: Kind::Value,
        value_name: "PATH",
        help: "Client certificate for TLS (default: CONSUL_CLIENT_CERT).",
    },
    Flag {
        name: "client-key",
        kind: Kind::Value,
        value_name: "PATH",
        help: "Client key for TLS (default: CONSUL_CLIENT_KEY).",
    },
    Flag {
        name: "tls-server-name",
        kind: Kind::Value,
        value_name: "NAME",
        help: "Server name to verify (default: CONSUL_TLS_SERVER_NAME).",
    },
    Flag {
        name: "datacenter",
        kind: Kind::Value,
        value_name: "DC",
        help: "Datacenter to query (default: the agent's).",
    },
    Flag {
        name: "stale",
        kind: Kind::Bool,
        value_name: "",
        help: "Accepted for compatibility with the consul CLI; reads that decide\nwho holds a lock are always consistent.",
    },
];

/// A flags list: `own` followed by the HTTP flags.
pub fn with_http(own: &[Flag]) -> Vec<Flag> {
    own.iter().chain(HTTP_FLAGS.iter()).copied().collect()
}

/// Builds the client from the environment and the HTTP flags.
pub fn client(p: &Parsed) -> Result<Client, String> {
    let mut b: ClientBuilder = ClientBuilder::from_env();
    for w in b.warnings() {
        eprintln!("baton: warning: {w}");
    }
    if let Some(a) = p.get("http-addr") {
        b = b.address(a);
    }
    if let Some(t) = p.get("token") {
        b = b.token(t);
    }
    if let Some(f) = p.get("token-file") {
        b = b.token_file(f);
    }
    if let Some(dc) = p.get("datacenter") {
        b = b.datacenter(dc);
    }
    let tls_flags = [
        "ca-file",
        "ca-path",
        "client-cert",
        "client-key",
        "tls-server-name",
    ];
    if tls_flags.iter().any(|f| p.get(f).is_some()) {
        // The builder takes TLS settings as a whole: start from the environment's.
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let path = |flag: &str, var: &str| p.get(flag).map(String::from).or_else(|| env(var));
        let tls = TlsSettings {
            ca_file: path("ca-file", baton::ENV_CACERT).map(PathBuf::from),
            ca_path: path("ca-path", baton::ENV_CAPATH).map(PathBuf::from),
            cert_file: path("client-cert", baton::ENV_CLIENT_CERT).map(PathBuf::from),
            key_file: path("client-key", baton::ENV_CLIENT_KEY).map(PathBuf::from),
            server_name: path("tls-server-name", baton::ENV_TLS_SERVER_NAME)
                .map(|s| s.split(':').next().unwrap_or_default().to_string()),
            insecure_skip_verify: env(baton::ENV_HTTP_SSL_VERIFY)
                .and_then(|v| baton::parse_go_bool(&v))
                .is_some_and(|verify| !verify),
        };
        b = b.tls(tls);
    }
    b.build()
        .map_err(|e| format!("Error connecting to Consul agent: {e}"))
}

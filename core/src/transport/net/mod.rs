//! Connections to the agent, below HTTP: where they go ([`Dial`]: TCP or a unix socket), the
//! socket ([`Stream`]), and the non-blocking I/O on it, through TLS for HTTPS ([`LoopConn`],
//! its rustls configuration made once per client by [`rustls_config`]). Nothing here knows
//! HTTP; the engine in `http` renders and frames requests on these connections.

mod io;
mod stream;
mod tls;

pub(crate) use io::{handshake, LoopConn};
pub(crate) use stream::{connect_tcp, Dial, Stream};
pub(crate) use tls::rustls_config;

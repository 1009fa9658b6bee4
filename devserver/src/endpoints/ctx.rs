//! What an endpoint handler gets ([`Ctx`]): the shared server, the request's query, headers
//! and declared length, and the checks every endpoint family makes with them.

use std::sync::Arc;

use crate::query::{Query, Reply};
use crate::shared::Shared;

/// What an endpoint handler gets.
pub(crate) struct Ctx {
    pub shared: Arc<Shared>,
    pub query: Query,
    pub headers: hyper::HeaderMap,
    pub content_length: Option<u64>,
}

impl Ctx {
    /// Whether bodies are pretty-printed for this request.
    pub fn pretty(&self) -> bool {
        self.shared.cfg.pretty_json() || self.query.has("pretty")
    }

    /// The RPC forwarding checks: a foreign `dc` has no path; without a leader nothing that
    /// needs one is answered.
    pub fn rpc_check(&self, dc: &str) -> Result<(), Reply> {
        if !dc.is_empty() && dc != self.shared.cfg.datacenter {
            return Err(Reply::text(500, "No path to datacenter"));
        }
        if !self.shared.has_leader() {
            return Err(Reply::text(500, self.shared.leaderless.text()));
        }
        Ok(())
    }

    /// Whether `?dc=` names a datacenter other than this one (no path to it).
    pub fn foreign_dc(&self) -> bool {
        let dc = self.query.get("dc");
        !dc.is_empty() && dc != self.shared.cfg.datacenter
    }

    /// The configured management token, when ACLs are on with one.
    pub fn acl(&self) -> Option<&str> {
        self.shared.cfg.acl_token.as_deref()
    }

    /// Whether ACLs are on (with or without a configured management token).
    pub fn acls_enabled(&self) -> bool {
        self.shared.cfg.acls_enabled()
    }
}

//! `/v1/agent/connect/ca/roots` and `/v1/connect/ca/roots`: the Connect CA root a test
//! harness waits for.

use serde_json::json;

use crate::http::Ctx;
use crate::query::Reply;

/// The CA roots.
pub(crate) fn ca_roots(ctx: &Ctx) -> Reply {
    Reply::json(
        200,
        &json!({"ActiveRootID": "", "TrustDomain": "", "Roots": []}),
        ctx.pretty(),
    )
}

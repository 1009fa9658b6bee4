//! The rest of `/v1/agent/`.

use hyper::Method;

use crate::http::Ctx;
use crate::query::Reply;

/// Routes the remaining agent endpoints.
pub(crate) fn handle(
    _ctx: &Ctx,
    _method: &Method,
    _pattern: &str,
    _rest: &str,
    _body: &[u8],
) -> Result<Reply, Reply> {
    Err(Reply::text(
        404,
        "Invalid URL path: not a recognized HTTP API endpoint\n",
    ))
}

/// `/v1/status/peers`: the raft peers, this one server.
pub(crate) fn status_peers(ctx: &Ctx) -> Reply {
    if ctx.foreign_dc() {
        return Reply::text(500, "No path to datacenter");
    }
    Reply::json(200, &serde_json::json!(["127.0.0.1:8300"]), ctx.pretty())
}

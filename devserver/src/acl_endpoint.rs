//! ACL checks for the endpoint families.

use crate::http::Ctx;
use crate::query::Reply;

/// Requires `perm` on `resource` for the request's token.
pub(crate) fn require(
    ctx: &Ctx,
    token: Option<&str>,
    perm: &str,
    resource: &str,
) -> Result<(), Reply> {
    crate::acl::require(ctx.acl(), token, perm, resource)
}

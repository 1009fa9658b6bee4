//! ACL enforcement with one management token: Consul's error texts for a missing (anonymous)
//! token and an unknown one, and the filtering that list endpoints do instead of denying.

use crate::query::Reply;

/// How a request's token resolves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    /// ACLs are off, or the management token: everything is allowed.
    All,
    /// No token: the anonymous token, which the default-deny policy allows nothing.
    Anonymous,
}

/// Resolves the token. An unknown token is an error in itself (`ACL not found`, 403).
pub(crate) fn resolve(configured: Option<&str>, token: Option<&str>) -> Result<Access, Reply> {
    match (configured, token) {
        (None, _) => Ok(Access::All),
        (Some(c), Some(t)) if c == t => Ok(Access::All),
        (Some(_), Some(_)) => Err(Reply::text(403, "ACL not found")),
        (Some(_), None) => Ok(Access::Anonymous),
    }
}

/// Requires `perm` (e.g. `key:write`) on `resource`; Consul's 403 text when denied.
pub(crate) fn require(
    configured: Option<&str>,
    token: Option<&str>,
    perm: &str,
    resource: &str,
) -> Result<(), Reply> {
    match resolve(configured, token)? {
        Access::All => Ok(()),
        Access::Anonymous => Err(denied(perm, resource)),
    }
}

/// The text Consul gives when the anonymous token lacks a permission.
pub(crate) fn denied(perm: &str, resource: &str) -> Reply {
    Reply::text(403, denied_text(perm, resource))
}

/// `Permission denied: ...` for the anonymous token.
pub(crate) fn denied_text(perm: &str, resource: &str) -> String {
    let on = if resource.is_empty() {
        String::new()
    } else {
        format!(" on {}", crate::godur::go_quote(resource))
    };
    format!(
        "Permission denied: anonymous token lacks permission '{perm}'{on}. The anonymous token is used implicitly when a request does not specify a token."
    )
}

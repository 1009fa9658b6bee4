//! What to do about an ACL denial: the permission, the resource and the rule that grants it.

/// Who Consul says was denied.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Denier {
    /// No token was sent: `anonymous token lacks permission ...`.
    Anonymous,
    /// `token with AccessorID '...' lacks permission ...`.
    Token,
    /// Consul's text does not say (a bare `Permission denied`, as older releases and
    /// transactions answer).
    Unknown,
}

/// `s` in double quotes, as Go's `%q` shows ASCII text.
pub(crate) fn go_quote(s: &str) -> String {
    format!("{s:?}")
}

/// Go's `%q` undone for the simple case (no escapes); `None` otherwise.
pub(crate) fn go_unquote(s: &str) -> Option<&str> {
    let inner = s.strip_prefix('"')?.strip_suffix('"')?;
    (!inner.contains(['\\', '"'])).then_some(inner)
}

/// The rule that grants `perm` (`kind:access`) on `resource`, in Consul's policy language.
pub(crate) fn rule_for(perm: &str, resource: &str) -> String {
    let (kind, access) = perm.split_once(':').unwrap_or((perm, "write"));
    match kind {
        "key" | "session" | "node" | "service" | "agent" | "event" | "query" => format!(
            "`{kind}_prefix {} {{ policy = \"{access}\" }}`",
            go_quote(resource)
        ),
        _ => format!("`{kind} = \"{access}\"`"),
    }
}

/// What to do about lacking `perm` on `resource`.
pub(crate) fn denial_hint(who: Denier, perm: &str, resource: &str) -> String {
    let on = match perm.split_once(':').map(|p| p.0) {
        Some("session") if !resource.is_empty() => format!(" on the node {}", go_quote(resource)),
        _ if !resource.is_empty() => format!(" on {}", go_quote(resource)),
        _ => String::new(),
    };
    let rule = rule_for(perm, resource);
    match who {
        Denier::Anonymous => format!(
            "no ACL token was sent, and the anonymous token lacks {perm}{on}: set \
             CONSUL_HTTP_TOKEN (or CONSUL_HTTP_TOKEN_FILE) to a token whose policy has {rule}"
        ),
        Denier::Token => format!(
            "the ACL token lacks {perm}{on}: add {rule} to one of its policies, or set \
             CONSUL_HTTP_TOKEN to a token that has it"
        ),
        Denier::Unknown => format!(
            "the ACL token lacks {perm}{on} (the anonymous token when CONSUL_HTTP_TOKEN is not \
             set): give it a policy with {rule}"
        ),
    }
}

/// What to do about a 403 (or a 500 carrying an ACL text), from Consul's `text` and the
/// `endpoint` (`METHOD /path`): which permission is missing on what, and the variable to set.
/// Never names a token's secret (Consul's texts name the AccessorID only).
pub(crate) fn acl_hint(endpoint: &str, text: &str) -> Option<String> {
    if text.contains("ACL not found") {
        return Some(
            "Consul does not know this ACL token (deleted, expired, or from another cluster): \
             check CONSUL_HTTP_TOKEN / CONSUL_HTTP_TOKEN_FILE"
                .to_string(),
        );
    }
    if !text.contains("Permission denied") {
        return None;
    }
    let who = if text.contains("anonymous token lacks") {
        Denier::Anonymous
    } else if text.contains("token with AccessorID") {
        Denier::Token
    } else {
        Denier::Unknown
    };
    // `... lacks permission 'key:write' on "jobs/x"` (Consul 1.12 and later).
    if let Some(rest) = text.split("lacks permission '").nth(1) {
        let (perm, tail) = rest.split_once('\'')?;
        let resource = tail
            .strip_prefix(" on ")
            .map(|r| r.split(". The anonymous token").next().unwrap_or(r).trim())
            .unwrap_or("");
        let resource = go_unquote(resource).unwrap_or(resource);
        return Some(denial_hint(who, perm, resource));
    }
    // A bare `Permission denied`: what the endpoint needs.
    let (method, path) = endpoint.split_once(' ')?;
    if let Some(key) = path.strip_prefix("/v1/kv/") {
        let perm = if method == "GET" {
            "key:read"
        } else {
            "key:write"
        };
        return Some(denial_hint(who, perm, key));
    }
    if path.starts_with("/v1/session/create")
        || path.starts_with("/v1/session/renew/")
        || path.starts_with("/v1/session/destroy/")
    {
        return Some(denial_hint(who, "session:write", ""));
    }
    None
}

//! ACL enforcement: how a request's token resolves (the `--acl-token` management token, a token
//! created through `/v1/acl/token`, the anonymous token, or an unknown one), the rules it
//! carries, Consul's 403 texts, and the filtering list endpoints do instead of denying.

use std::sync::Arc;

use serde_json::Value;

use crate::acl_rules::{self, Rules};
use crate::endpoints::ctx::Ctx;
use crate::query::Reply;
use crate::state::State;

/// `structs.ACLPolicyGlobalManagementID`.
pub(crate) const GLOBAL_MANAGEMENT_ID: &str = "00000000-0000-0000-0000-000000000001";

/// How a request's token resolves.
#[derive(Clone, Debug)]
pub(crate) enum Access {
    /// ACLs are off, or a management token: everything is allowed.
    All,
    /// No token (or `anonymous`): the anonymous token, which the default-deny policy allows
    /// nothing.
    Anonymous,
    /// The anonymous token under the default-allow policy: everything but the ACL system.
    AnonymousAllowed,
    /// A token with policies: allowed what its merged rules grant.
    Token {
        /// Its AccessorID, named in denials.
        accessor: String,
        rules: Arc<Rules>,
    },
}

impl Access {
    /// Whether `perm` (`kind:access`) is granted on `resource`.
    pub fn allows(&self, perm: &str, resource: &str) -> bool {
        match self {
            Access::All => true,
            Access::Anonymous => false,
            Access::AnonymousAllowed => !perm.starts_with("acl:"),
            Access::Token { rules, .. } => rules.allows(perm, resource),
        }
    }

    /// `perm` on `resource`, or Consul's 403 text naming who lacks it.
    pub fn require(&self, perm: &str, resource: &str) -> Result<(), Reply> {
        if self.allows(perm, resource) {
            return Ok(());
        }
        match self {
            Access::Token { accessor, .. } => Err(Reply::text(
                403,
                format!(
                    "Permission denied: token with AccessorID '{accessor}' lacks permission '{perm}'{}",
                    on(resource)
                ),
            )),
            _ => Err(denied(perm, resource)),
        }
    }
}

fn on(resource: &str) -> String {
    if resource.is_empty() {
        String::new()
    } else {
        format!(" on {}", crate::godur::go_quote(resource))
    }
}

fn links(v: &serde_json::Map<String, Value>, field: &str) -> Vec<String> {
    v.get(field)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|l| l["ID"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The merged rules of a token (or role) object: its policies, roles, service and node
/// identities and templated policies. `None` when it links `global-management`.
fn rules_of(st: &State, obj: &serde_json::Map<String, Value>, rules: &mut Rules) -> bool {
    let acl = st.acl();
    for id in links(obj, "Policies") {
        if id == GLOBAL_MANAGEMENT_ID {
            return true;
        }
        if let Some(text) = acl.policies.get(&id).and_then(|p| p["Rules"].as_str()) {
            rules.add(text);
        }
    }
    for id in links(obj, "Roles") {
        if let Some(role) = acl.roles.get(&id) {
            if rules_of(st, role, rules) {
                return true;
            }
        }
    }
    let list = |field: &str| {
        obj.get(field)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    for s in list("ServiceIdentities") {
        if let Some(name) = s["ServiceName"].as_str() {
            rules.add(&acl_rules::service_identity(name));
        }
    }
    for n in list("NodeIdentities") {
        if let Some(name) = n["NodeName"].as_str() {
            rules.add(&acl_rules::node_identity(name));
        }
    }
    for t in list("TemplatedPolicies") {
        let name = t["TemplateVariables"]["name"].as_str().unwrap_or_default();
        match t["TemplateName"].as_str() {
            Some("builtin/service") => rules.add(&acl_rules::service_identity(name)),
            Some("builtin/node") => rules.add(&acl_rules::node_identity(name)),
            Some("builtin/dns") => rules.add(
                "node_prefix \"\" { policy = \"read\" }\nservice_prefix \"\" { policy = \"read\" }\nquery_prefix \"\" { policy = \"read\" }",
            ),
            _ => {}
        }
    }
    false
}

/// Resolves the request's token. An unknown token is an error in itself (`ACL not found`, 403).
pub(crate) fn resolve(ctx: &Ctx, token: Option<&str>) -> Result<Access, Reply> {
    if !ctx.acls_enabled() {
        return Ok(Access::All);
    }
    let token = match token {
        None | Some("") | Some("anonymous") if ctx.shared.cfg.acl_default_allow => {
            return Ok(Access::AnonymousAllowed)
        }
        None | Some("") | Some("anonymous") => return Ok(Access::Anonymous),
        Some(t) => t,
    };
    if ctx.acl() == Some(token) {
        return Ok(Access::All);
    }
    // The tokens of `Config::acl_tokens`, each with its own policy; AccessorIDs by position.
    if let Some(i) = ctx
        .shared
        .cfg
        .acl_tokens
        .iter()
        .position(|(s, _)| s == token)
    {
        let mut rules = Rules::default();
        rules.add(&ctx.shared.cfg.acl_tokens[i].1);
        return Ok(Access::Token {
            accessor: configured_accessor(i),
            rules: Arc::new(rules),
        });
    }
    ctx.shared.read(|st| {
        let found = st
            .acl()
            .tokens
            .values()
            .find(|t| t.get("SecretID").and_then(Value::as_str) == Some(token));
        let Some(t) = found else {
            // `ResolveIdentityFromToken`: before the bootstrap, Consul says what is missing.
            if ctx.acl().is_none() && st.acl().bootstrap_index == 0 {
                return Err(Reply::text(
                    403,
                    "ACL system must be bootstrapped before making any requests that require authorization: ACL not found",
                ));
            }
            return Err(Reply::text(403, "ACL not found"));
        };
        let mut rules = Rules::default();
        if rules_of(st, t, &mut rules) {
            return Ok(Access::All);
        }
        Ok(Access::Token {
            accessor: t
                .get("AccessorID")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            rules: Arc::new(rules),
        })
    })
}

/// The AccessorID of the `i`th token of `Config::acl_tokens`.
pub(crate) fn configured_accessor(i: usize) -> String {
    format!("00000000-0000-4000-8000-{:012x}", i + 1)
}

/// Requires `perm` (e.g. `key:write`) on `resource` for the request's token; Consul's 403
/// texts when denied.
pub(crate) fn require(
    ctx: &Ctx,
    token: Option<&str>,
    perm: &str,
    resource: &str,
) -> Result<(), Reply> {
    resolve(ctx, token)?.require(perm, resource)
}

/// The text Consul gives when the anonymous token lacks a permission.
pub(crate) fn denied(perm: &str, resource: &str) -> Reply {
    Reply::text(403, denied_text(perm, resource))
}

/// `Permission denied: ...` for the anonymous token.
pub(crate) fn denied_text(perm: &str, resource: &str) -> String {
    format!(
        "Permission denied: anonymous token lacks permission '{perm}'{}. The anonymous token is used implicitly when a request does not specify a token.",
        on(resource)
    )
}

//! `/v1/acl/*` (`agent/acl_endpoint.go`, `agent/consul/acl_endpoint.go`): tokens, policies,
//! roles, auth methods, binding rules and templated policies, and how a request's token is
//! resolved for the agent, catalog and health endpoints.
//!
//! With ACLs on (`--acl-token`), the store holds what `initial_management` bootstraps: the
//! `global-management` policy, the initial management token and the anonymous token. With ACLs
//! on and no management token (`Config::acl_enabled`), the first `PUT /v1/acl/bootstrap`
//! makes one. A token linked to `global-management` may do anything,
//! and any other token is allowed what its policies' rules grant (`acl_rules.rs`).

use std::time::{Duration, SystemTime};

use hyper::Method;
use serde_json::{json, Map, Value};

use crate::endpoints::ctx::Ctx;
use crate::endpoints::decode::{self, fld};
use crate::godur::parse_go_duration;
use crate::query::Reply;
use crate::state::{new_uuid, AclTable, State};

use crate::endpoints::access::{require, GLOBAL_MANAGEMENT_ID};
use crate::endpoints::decode::is_uuid;
use crate::godur::rfc3339;
/// The anonymous token's AccessorID (`acl.AnonymousTokenID`).
pub(crate) const ANONYMOUS_ID: &str = "00000000-0000-0000-0000-000000000002";

/// The ID of `builtin/global-read-only` (`structs.ACLPolicyGlobalReadOnlyID`), the second
/// builtin policy (see [`crate::ConsulVersion::builtin_global_read_only_policy`]).
pub(crate) const GLOBAL_READ_ONLY_ID: &str = "00000000-0000-0000-0000-000000000002";

/// `structs.ACLPolicyGlobalReadOnlyRules`, indented as the global-management rules here are.
const GLOBAL_READ_ONLY_RULES: &str = "\nacl = \"read\"\nagent_prefix \"\" {\n  policy = \"read\"\n}\nevent_prefix \"\" {\n  policy = \"read\"\n}\nkey_prefix \"\" {\n  policy = \"read\"\n}\nkeyring = \"read\"\nnode_prefix \"\" {\n  policy = \"read\"\n}\noperator = \"read\"\nmesh = \"read\"\npeering = \"read\"\nquery_prefix \"\" {\n  policy = \"read\"\n}\nservice_prefix \"\" {\n  policy = \"read\"\n  intentions = \"read\"\n}\nsession_prefix \"\" {\n  policy = \"read\"\n}";

fn disabled() -> Reply {
    Reply::text(401, "ACL support disabled")
}

fn not_found() -> Reply {
    Reply::text(403, "ACL not found")
}

/// Puts the built-in policies and the anonymous token in place the first time the ACL store is
/// used, and the initial management token when one is configured (`management`).
/// `builtin/global-read-only` only where `version` has it.
pub(crate) fn ensure_bootstrapped(
    st: &mut State,
    management: Option<&str>,
    version: crate::ConsulVersion,
) {
    if st.acl().bootstrapped {
        return;
    }
    let idx = st.acl_write_index();
    let now = rfc3339(SystemTime::now());
    let acl = st.acl_mut();
    acl.bootstrapped = true;
    let policy = json!({
        "ID": GLOBAL_MANAGEMENT_ID,
        "Name": "global-management",
        "Description": "Builtin Policy that grants unlimited access",
        "Rules": "\nacl = \"write\"\nagent_prefix \"\" {\n  policy = \"write\"\n}\nevent_prefix \"\" {\n  policy = \"write\"\n}\nkey_prefix \"\" {\n  policy = \"write\"\n}\nkeyring = \"write\"\nnode_prefix \"\" {\n  policy = \"write\"\n}\noperator = \"write\"\nmesh = \"write\"\npeering = \"write\"\nquery_prefix \"\" {\n  policy = \"write\"\n}\nservice_prefix \"\" {\n  policy = \"write\"\n  intentions = \"write\"\n}\nsession_prefix \"\" {\n  policy = \"write\"\n}",
        "Hash": "W1bQuDAlAlxEb4ZWwnVHplnt3I5oPKOZJQITh79Xlog=",
        "CreateIndex": idx,
        "ModifyIndex": idx
    });
    acl.policies
        .insert(GLOBAL_MANAGEMENT_ID.into(), obj(policy));
    if version.builtin_global_read_only_policy() {
        let read_only = json!({
            "ID": GLOBAL_READ_ONLY_ID,
            "Name": "builtin/global-read-only",
            "Description": "Builtin Policy that grants unlimited read-only access to all components",
            "Rules": GLOBAL_READ_ONLY_RULES,
            "Hash": "",
            "CreateIndex": idx,
            "ModifyIndex": idx
        });
        acl.policies
            .insert(GLOBAL_READ_ONLY_ID.into(), obj(read_only));
    }
    let anon = json!({
        "AccessorID": ANONYMOUS_ID,
        "SecretID": "anonymous",
        "Description": "Anonymous Token",
        "Local": false,
        "CreateTime": now,
        "Hash": "",
        "CreateIndex": idx,
        "ModifyIndex": idx
    });
    acl.tokens.insert(ANONYMOUS_ID.into(), obj(anon));
    if let Some(secret) = management {
        acl.bootstrap_index = idx;
        let mgmt = management_token(secret, "Initial Management Token", &now, idx);
        let id = mgmt["AccessorID"].as_str().unwrap_or_default().to_string();
        acl.tokens.insert(id, mgmt);
    }
}

/// A token linked to `global-management`.
fn management_token(secret: &str, description: &str, now: &str, idx: u64) -> Map<String, Value> {
    obj(json!({
        "AccessorID": new_uuid(),
        "SecretID": secret,
        "Description": description,
        "Policies": [{"ID": GLOBAL_MANAGEMENT_ID, "Name": "global-management"}],
        "Local": false,
        "CreateTime": now,
        "Hash": "",
        "CreateIndex": idx,
        "ModifyIndex": idx
    }))
}

/// `PUT /v1/acl/bootstrap` (`ACL.BootstrapTokens`): the management token, once; after that
/// (or with an initial management token configured) 403 naming the bootstrap's index.
fn bootstrap(ctx: &Ctx) -> Result<Reply, Reply> {
    let made = ctx.shared.write(|st| {
        let done = st.acl().bootstrap_index;
        if done > 0 {
            return Err(done);
        }
        let idx = st.acl_write_index();
        let now = rfc3339(SystemTime::now());
        let token = management_token(
            &new_uuid(),
            "Bootstrap Token (Global Management)",
            &now,
            idx,
        );
        let acl = st.acl_mut();
        acl.bootstrap_index = idx;
        let id = token["AccessorID"].as_str().unwrap_or_default().to_string();
        acl.tokens.insert(id, token.clone());
        Ok(token)
    });
    match made {
        Ok(token) => ok_json(ctx, Value::Object(token)),
        Err(index) => Err(Reply::text(
            403,
            format!("Permission denied: ACL bootstrap no longer allowed (reset index: {index})"),
        )),
    }
}

fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// Routes the `/v1/acl/` family.
pub(crate) async fn handle(
    ctx: &Ctx,
    method: &Method,
    pattern: &str,
    rest: &str,
    body: &[u8],
) -> Reply {
    if !ctx.acls_enabled() {
        return disabled();
    }
    let management = ctx.acl().map(str::to_string);
    // ACL RPCs are routed by `?dc=` like every other read and write.
    if ctx.foreign_dc() {
        return Reply::text(500, "No path to datacenter");
    }
    ctx.shared
        .write(|st| ensure_bootstrapped(st, management.as_deref(), ctx.shared.cfg.consul_version));
    let token = crate::query::request_token(&ctx.query, &ctx.headers);
    let t = token.as_deref();
    let r = match pattern {
        "/v1/acl/bootstrap" => bootstrap(ctx),
        "/v1/acl/login" => Err(not_found()),
        // `ACL.ReplicationStatus`: a primary datacenter's server replicates nothing.
        "/v1/acl/replication" => ok_json(
            ctx,
            json!({
                "Enabled": false, "Running": false, "SourceDatacenter": "",
                "ReplicationType": "", "ReplicatedIndex": 0, "ReplicatedRoleIndex": 0,
                "ReplicatedTokenIndex": 0, "LastSuccess": "0001-01-01T00:00:00Z",
                "LastError": "0001-01-01T00:00:00Z", "LastErrorMessage": ""
            }),
        ),
        "/v1/acl/logout" => logout(ctx, t),
        "/v1/acl/tokens" => list(ctx, t, Kind::Token),
        "/v1/acl/token" => write(ctx, t, Kind::Token, "", body, true),
        "/v1/acl/token/" => token_item(ctx, t, method, rest, body),
        "/v1/acl/policies" => list(ctx, t, Kind::Policy),
        "/v1/acl/policy" => write(ctx, t, Kind::Policy, "", body, true),
        "/v1/acl/policy/" => item(ctx, t, method, Kind::Policy, rest, body),
        "/v1/acl/roles" => list(ctx, t, Kind::Role),
        "/v1/acl/role" => write(ctx, t, Kind::Role, "", body, true),
        "/v1/acl/role/" => item(ctx, t, method, Kind::Role, rest, body),
        "/v1/acl/auth-methods" => list(ctx, t, Kind::AuthMethod),
        "/v1/acl/auth-method" => write(ctx, t, Kind::AuthMethod, "", body, true),
        "/v1/acl/auth-method/" => item(ctx, t, method, Kind::AuthMethod, rest, body),
        "/v1/acl/binding-rules" => list(ctx, t, Kind::BindingRule),
        "/v1/acl/binding-rule" => write(ctx, t, Kind::BindingRule, "", body, true),
        "/v1/acl/binding-rule/" => item(ctx, t, method, Kind::BindingRule, rest, body),
        _ => crate::endpoints::acl_templates::handle(ctx, pattern, rest, body),
    };
    r.unwrap_or_else(|e| e)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Token,
    Policy,
    Role,
    AuthMethod,
    BindingRule,
}

impl Kind {
    fn table(self, st: &State) -> &AclTable {
        let a = st.acl();
        match self {
            Kind::Token => &a.tokens,
            Kind::Policy => &a.policies,
            Kind::Role => &a.roles,
            Kind::AuthMethod => &a.auth_methods,
            Kind::BindingRule => &a.binding_rules,
        }
    }

    fn table_mut(self, st: &mut State) -> &mut AclTable {
        let a = st.acl_mut();
        match self {
            Kind::Token => &mut a.tokens,
            Kind::Policy => &mut a.policies,
            Kind::Role => &mut a.roles,
            Kind::AuthMethod => &mut a.auth_methods,
            Kind::BindingRule => &mut a.binding_rules,
        }
    }

    fn noun(self) -> &'static str {
        match self {
            Kind::Token => "token",
            Kind::Policy => "policy",
            Kind::Role => "role",
            Kind::AuthMethod => "auth method",
            Kind::BindingRule => "binding rule",
        }
    }

    fn id_field(self) -> &'static str {
        match self {
            Kind::Token => "AccessorID",
            Kind::AuthMethod => "Name",
            _ => "ID",
        }
    }
}

fn ok_json(ctx: &Ctx, v: Value) -> Result<Reply, Reply> {
    let idx = ctx.shared.read(|st| st.acl().index);
    Ok(Reply::json(200, &v, ctx.pretty()).with_meta(idx))
}

fn list(ctx: &Ctx, t: Option<&str>, kind: Kind) -> Result<Reply, Reply> {
    require(ctx, t, "acl:read", "")?;
    let q = &ctx.query;
    let (policy, role, method) = (q.get("policy"), q.get("role"), q.get("authmethod"));
    let service = q.get("servicename");
    // `ACLTokenList` in the state store takes one index at a time.
    let filters = [policy, role, method, service];
    if matches!(kind, Kind::Token) && filters.iter().filter(|f| !f.is_empty()).count() > 1 {
        return Err(Reply::text(
            500,
            "can only filter by one of policy, role, serviceName, or methodName at a time",
        ));
    }
    let links = |o: &Map<String, Value>, field: &str, id: &str| {
        o.get(field)
            .and_then(Value::as_array)
            .is_some_and(|l| l.iter().any(|x| x["ID"] == id))
    };
    let items: Vec<Value> = ctx.shared.read(|st| {
        kind.table(st)
            .values()
            .filter(|o| policy.is_empty() || links(o, "Policies", policy))
            .filter(|o| role.is_empty() || links(o, "Roles", role))
            .filter(|o| {
                method.is_empty() || o.get("AuthMethod").and_then(Value::as_str) == Some(method)
            })
            .filter(|o| {
                service.is_empty()
                    || o.get("ServiceIdentities")
                        .and_then(Value::as_array)
                        .is_some_and(|l| l.iter().any(|x| x["ServiceName"] == service))
            })
            .map(|o| Value::Object(o.clone()))
            .collect()
    });
    ok_json(ctx, Value::Array(items))
}

fn logout(ctx: &Ctx, t: Option<&str>) -> Result<Reply, Reply> {
    // `ACLLogout`: no token is 401; `ACL.Logout`: an unknown one is not found, one that no
    // login made may not be logged out.
    let Some(secret) = t.filter(|s| !s.is_empty()) else {
        return Err(Reply::text(401, "Supplied token does not exist"));
    };
    let found = ctx.shared.read(|st| {
        st.acl()
            .tokens
            .values()
            .find(|o| o.get("SecretID").and_then(Value::as_str) == Some(secret))
            .map(|o| o.get("AuthMethod").is_some())
    });
    match found {
        None => return Err(not_found()),
        Some(false) => return Err(Reply::text(403, "Permission denied")),
        Some(true) => {}
    }
    ctx.shared.write(|st| {
        st.acl_write_index();
        st.acl_mut()
            .tokens
            .retain(|_, o| o.get("SecretID").and_then(Value::as_str) != Some(secret));
    });
    Ok(Reply::json(200, &json!(true), ctx.pretty()))
}

fn token_item(
    ctx: &Ctx,
    t: Option<&str>,
    method: &Method,
    rest: &str,
    body: &[u8],
) -> Result<Reply, Reply> {
    if rest == "self" && *method == Method::GET {
        let secret = t.unwrap_or("anonymous");
        let found = ctx.shared.read(|st| {
            st.acl()
                .tokens
                .values()
                .find(|o| o.get("SecretID").and_then(Value::as_str) == Some(secret))
                .cloned()
        });
        return match found {
            Some(o) => ok_json(ctx, Value::Object(o)),
            None => Err(not_found()),
        };
    }
    if let Some(id) = rest.strip_suffix("/clone") {
        if *method == Method::PUT {
            return clone_token(ctx, t, id, body);
        }
    }
    item(ctx, t, method, Kind::Token, rest, body)
}

fn lookup_error(kind: Kind, id: &str) -> Option<Reply> {
    (kind != Kind::AuthMethod && !is_uuid(id)).then(|| {
        Reply::text(
            500,
            format!(
                "failed acl {} lookup: index error: UUID must be 36 characters",
                kind.noun()
            ),
        )
    })
}

/// What `ACL.TokenDelete` and `ACL.PolicyDelete` refuse (RPC errors, 500).
fn refuse_delete(ctx: &Ctx, t: Option<&str>, kind: Kind, id: &str) -> Result<(), Reply> {
    let refused = |text: &str| Err(Reply::text(500, text.to_string()));
    match kind {
        Kind::Token if !is_uuid(id) => refused("Accessor ID is missing or an invalid UUID"),
        Kind::Token if id == ANONYMOUS_ID => {
            refused("Delete operation not permitted on the anonymous token")
        }
        Kind::Token => {
            let own = ctx.shared.read(|st| {
                st.acl()
                    .tokens
                    .get(id)
                    .and_then(|o| o.get("SecretID").cloned())
            });
            match (own, t) {
                (Some(Value::String(secret)), Some(t)) if secret == t => {
                    refused("Deletion of the request's authorization token is not permitted")
                }
                _ => Ok(()),
            }
        }
        Kind::Policy if id == GLOBAL_MANAGEMENT_ID => {
            refused("Delete operation not permitted on the builtin global-management policy")
        }
        Kind::Policy if id == GLOBAL_READ_ONLY_ID => {
            let present = ctx
                .shared
                .read(|st| st.acl().policies.contains_key(GLOBAL_READ_ONLY_ID));
            if present {
                refused(
                    "Delete operation not permitted on the builtin builtin/global-read-only policy",
                )
            } else {
                Ok(())
            }
        }
        _ => Ok(()),
    }
}

/// The error of an update of an object that is not there (`ACL.PolicySet`, `ACL.RoleSet`
/// check the name and the ID's form first).
fn missing_text(kind: Kind, id: &str, body: &Map<String, Value>) -> String {
    let (what, noun) = match kind {
        Kind::Policy => ("Policy", "policy"),
        Kind::Role => ("Role", "role"),
        _ => return format!("Cannot find {} {id:?}", kind.noun()),
    };
    if decode::string(body, "Name").is_empty() {
        format!("Invalid {what}: no Name is set")
    } else if !is_uuid(id) {
        format!("{what} ID invalid UUID")
    } else {
        format!("cannot find {noun} {id}")
    }
}

fn item(
    ctx: &Ctx,
    t: Option<&str>,
    method: &Method,
    kind: Kind,
    rest: &str,
    body: &[u8],
) -> Result<Reply, Reply> {
    if rest.is_empty() && *method != Method::PUT {
        // `ACL*CRUD`: what each names the missing part.
        let what = match kind {
            Kind::Token => "token AccessorID",
            Kind::AuthMethod => "auth method name",
            Kind::Policy => "policy ID",
            Kind::Role => "role ID",
            Kind::BindingRule => "binding rule ID",
        };
        return Err(Reply::text(400, format!("Missing {what}")));
    }
    if *method == Method::PUT {
        return write(ctx, t, kind, rest, body, false);
    }
    let by_name = rest.strip_prefix("name/");
    if *method == Method::DELETE {
        require(ctx, t, "acl:write", "")?;
        refuse_delete(ctx, t, kind, rest)?;
        // `ACL.*Delete`: deleting what is not there does nothing and succeeds.
        ctx.shared.write(|st| {
            if kind.table_mut(st).remove(rest).is_some() {
                st.acl_write_index();
            }
        });
        return Ok(Reply::json(200, &json!(true), ctx.pretty()));
    }
    require(ctx, t, "acl:read", "")?;
    if by_name.is_none() {
        if let Some(e) = lookup_error(kind, rest) {
            return Err(e);
        }
    }
    let found = ctx.shared.read(|st| match by_name {
        Some(name) => kind
            .table(st)
            .values()
            .find(|o| o.get("Name").and_then(Value::as_str) == Some(name))
            .cloned(),
        None => kind.table(st).get(rest).cloned(),
    });
    match (found, kind) {
        (Some(o), _) => ok_json(ctx, Value::Object(o)),
        (None, Kind::Token) => Err(not_found()),
        (None, _) => Err(Reply::text(404, "")),
    }
}

/// Resolves `[{"ID"}]`/`[{"Name"}]` links to policies or roles to both fields.
fn links(st: &State, kind: Kind, raw: Option<&Value>) -> Result<Option<Value>, String> {
    let Some(Value::Array(items)) = raw else {
        return Ok(None);
    };
    let mut out = Vec::new();
    for l in items.iter().filter_map(Value::as_object) {
        let id = decode::string(l, "ID");
        let name = decode::string(l, "Name");
        let found = kind.table(st).values().find(|o| {
            (!id.is_empty() && o.get("ID").and_then(Value::as_str) == Some(&id))
                || (id.is_empty() && o.get("Name").and_then(Value::as_str) == Some(&name))
        });
        match found {
            // A link named twice (by ID and by name) is kept once.
            Some(o) if out.iter().any(|l: &Value| l["ID"] == o["ID"]) => {}
            Some(o) => out.push(json!({"ID": o["ID"], "Name": o["Name"]})),
            None if !id.is_empty() => {
                return Err(format!("No such ACL {} with ID {id:?}", kind.noun()))
            }
            None => return Err(format!("No such ACL {} with name {name:?}", kind.noun())),
        }
    }
    Ok((!out.is_empty()).then_some(Value::Array(out)))
}

/// The identity and template fields tokens and roles share.
fn identities(
    st: &State,
    body: &Map<String, Value>,
    out: &mut Map<String, Value>,
) -> Result<(), String> {
    for (field, kind) in [("Policies", Kind::Policy), ("Roles", Kind::Role)] {
        out.remove(field);
        if let Some(v) = links(st, kind, fld(body, field))? {
            out.insert(field.into(), v);
        }
    }
    for field in ["ServiceIdentities", "NodeIdentities"] {
        out.remove(field);
        if let Some(Value::Array(a)) = fld(body, field) {
            if !a.is_empty() {
                out.insert(field.into(), decode::camel(&Value::Array(a.clone())));
            }
        }
    }
    out.remove("TemplatedPolicies");
    if let Some(Value::Array(a)) = fld(body, "TemplatedPolicies") {
        let tp: Vec<Value> = a
            .iter()
            .filter_map(Value::as_object)
            .map(|p| {
                let vars: Map<String, Value> = decode::map(p, "TemplateVariables")
                    .into_iter()
                    .map(|(k, v)| (k.to_ascii_lowercase(), v))
                    .collect();
                json!({"TemplateName": decode::string(p, "TemplateName"), "TemplateVariables": vars})
            })
            .collect();
        if !tp.is_empty() {
            out.insert("TemplatedPolicies".into(), Value::Array(tp));
        }
    }
    Ok(())
}

/// Create (`create`) or update (`id` from the URL) of any ACL object.
fn write(
    ctx: &Ctx,
    t: Option<&str>,
    kind: Kind,
    url_id: &str,
    body: &[u8],
    create: bool,
) -> Result<Reply, Reply> {
    let noun = kind.noun();
    let body = decode::object(body, "structs.ACLToken").map_err(|_| {
        Reply::text(
            400,
            format!("{} decoding failed: invalid JSON", capital(noun)),
        )
    })?;
    require(ctx, t, "acl:write", "")?;
    let r = ctx.shared.write(|st| -> Result<Value, Reply> {
        let id_field = kind.id_field();
        let mut id = decode::string(&body, id_field);
        if !create && id.is_empty() {
            id = url_id.to_string();
        }
        if !create && kind != Kind::AuthMethod && id != url_id {
            return Err(Reply::text(
                400,
                format!("{} ID in URL and payload do not match", capital(noun)),
            ));
        }
        let existing = kind.table(st).get(&id).cloned();
        if !create && existing.is_none() {
            return Err(Reply::text(500, missing_text(kind, &id, &body)));
        }
        if create && kind == Kind::Token && existing.is_some() {
            return Err(Reply::text(
                500,
                "Invalid Token: AccessorID is already in use",
            ));
        }
        let mut out = existing.unwrap_or_default();
        let fresh = out.is_empty();
        if fresh && id.is_empty() {
            id = new_uuid();
        }
        if kind == Kind::Token && !id.is_empty() && !is_uuid(&id) {
            return Err(Reply::text(
                500,
                "Invalid Token: AccessorID is not a valid UUID",
            ));
        }
        out.insert(id_field.into(), json!(id));
        fill(st, kind, &body, &mut out, fresh).map_err(|e| Reply::text(500, e))?;
        let idx = st.acl_write_index();
        if fresh {
            out.insert("CreateIndex".into(), json!(idx));
        }
        out.insert("ModifyIndex".into(), json!(idx));
        kind.table_mut(st).insert(id, out.clone());
        Ok(Value::Object(out))
    })?;
    ok_json(ctx, r)
}

fn capital(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
        .unwrap_or_default()
}

/// Fills an ACL object's fields from a request body.
fn fill(
    st: &State,
    kind: Kind,
    body: &Map<String, Value>,
    out: &mut Map<String, Value>,
    fresh: bool,
) -> Result<(), String> {
    let s = |f: &str| decode::string(body, f);
    match kind {
        Kind::Token => {
            if fresh {
                let secret = s("SecretID");
                out.insert(
                    "SecretID".into(),
                    json!(if secret.is_empty() {
                        new_uuid()
                    } else {
                        secret
                    }),
                );
            }
            out.insert("Description".into(), json!(s("Description")));
            identities(st, body, out)?;
            if fresh {
                out.insert("Local".into(), json!(decode::boolean(body, "Local")));
                let now = SystemTime::now();
                let ttl = s("ExpirationTTL");
                if !ttl.is_empty() {
                    let ns = parse_go_duration(&ttl).map_err(|e| format!("Invalid Token: {e}"))?;
                    let at = now + Duration::from_nanos(ns.max(0) as u64);
                    out.insert("ExpirationTime".into(), json!(rfc3339(at)));
                } else if !s("ExpirationTime").is_empty() {
                    out.insert("ExpirationTime".into(), json!(s("ExpirationTime")));
                }
                out.insert("CreateTime".into(), json!(rfc3339(now)));
            }
            out.insert("Hash".into(), json!(""));
        }
        Kind::Policy => {
            let name = s("Name");
            if name.is_empty() {
                return Err("Invalid Policy: no Name is set".into());
            }
            let clash = st.acl().policies.values().any(|p| {
                p.get("Name").and_then(Value::as_str) == Some(&name) && p.get("ID") != out.get("ID")
            });
            // `ACL.PolicySet` words a create's and a rename's clash differently.
            if clash && fresh {
                return Err(format!(
                    "Invalid Policy: A Policy with Name {name:?} already exists"
                ));
            }
            if clash {
                return Err(format!(
                    "Invalid Policy: A policy with name {name:?} already exists"
                ));
            }
            let rules = match fld(body, "Rules") {
                Some(Value::String(r)) => r.clone(),
                Some(v) if !v.is_null() => v.to_string(),
                _ => String::new(),
            };
            out.insert("Name".into(), json!(name));
            out.insert("Description".into(), json!(s("Description")));
            out.insert("Rules".into(), json!(rules));
            // The whole policy is replaced: no `Datacenters` (or null) clears them.
            out.remove("Datacenters");
            if let Some(dcs) = fld(body, "Datacenters").filter(|v| v.is_array()) {
                out.insert("Datacenters".into(), dcs.clone());
            }
            out.insert("Hash".into(), json!(""));
        }
        Kind::Role => {
            let name = s("Name");
            if name.is_empty() {
                return Err("Invalid Role: no Name is set".into());
            }
            let clash = st.acl().roles.values().any(|r| {
                r.get("Name").and_then(Value::as_str) == Some(&name) && r.get("ID") != out.get("ID")
            });
            if clash && fresh {
                return Err(format!(
                    "Invalid Role: A Role with Name {name:?} already exists"
                ));
            }
            if clash {
                return Err(format!(
                    "Invalid Role: A role with name {name:?} already exists"
                ));
            }
            out.insert("Name".into(), json!(name));
            out.insert("Description".into(), json!(s("Description")));
            identities(st, body, out)?;
            out.insert("Hash".into(), json!(""));
        }
        Kind::AuthMethod => {
            if s("Name").is_empty() {
                return Err("Invalid Auth Method: no Name is set".into());
            }
            if s("Type").is_empty() {
                return Err("Invalid Auth Method: no Type is set".into());
            }
            for f in [
                "Type",
                "DisplayName",
                "Description",
                "MaxTokenTTL",
                "TokenLocality",
            ] {
                if f == "Type" || f == "Description" || !s(f).is_empty() {
                    out.insert(f.into(), json!(s(f)));
                }
            }
            out.insert("Config".into(), Value::Object(decode::map(body, "Config")));
        }
        Kind::BindingRule => {
            let method = s("AuthMethod");
            if !st.acl().auth_methods.contains_key(&method) {
                return Err(format!(
                    "Invalid Binding Rule: unknown auth method {method:?}"
                ));
            }
            for f in [
                "Description",
                "AuthMethod",
                "Selector",
                "BindType",
                "BindName",
            ] {
                out.insert(f.into(), json!(s(f)));
            }
            if let Some(v) = fld(body, "BindVars").filter(|v| v.is_object()) {
                out.insert("BindVars".into(), v.clone());
            }
        }
    }
    Ok(())
}

fn clone_token(ctx: &Ctx, t: Option<&str>, id: &str, body: &[u8]) -> Result<Reply, Reply> {
    let body = decode::object(body, "structs.ACLToken")?;
    require(ctx, t, "acl:write", "")?;
    let r = ctx.shared.write(|st| {
        let mut out = st.acl().tokens.get(id).cloned()?;
        let accessor = new_uuid();
        out.insert("AccessorID".into(), json!(accessor));
        out.insert("SecretID".into(), json!(new_uuid()));
        let desc = decode::string(&body, "Description");
        if !desc.is_empty() {
            out.insert("Description".into(), json!(desc));
        }
        out.insert("CreateTime".into(), json!(rfc3339(SystemTime::now())));
        let idx = st.acl_write_index();
        out.insert("CreateIndex".into(), json!(idx));
        out.insert("ModifyIndex".into(), json!(idx));
        st.acl_mut().tokens.insert(accessor, out.clone());
        Some(Value::Object(out))
    });
    match r {
        Some(v) => ok_json(ctx, v),
        None => Err(not_found()),
    }
}

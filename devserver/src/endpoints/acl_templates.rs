//! `/v1/acl/templated-policies`, `/v1/acl/templated-policy/name/<name>` and
//! `/v1/acl/templated-policy/preview/<name>` (`agent/structs/acl_templated_policy.go`): the
//! built-in policy templates and the synthetic policy one renders to.

use serde_json::{json, Map, Value};

use crate::endpoints::ctx::Ctx;
use crate::endpoints::decode;
use crate::query::Reply;

/// `builtin/service`: write on the service and its sidecar, read on all services and nodes.
const SERVICE_TEMPLATE: &str = "\nservice \"{{.Name}}\" {\n\tpolicy = \"write\"\n}\nservice \"{{.Name}}-sidecar-proxy\" {\n\tpolicy = \"write\"\n}\nservice_prefix \"\" {\n\tpolicy = \"read\"\n}\nnode_prefix \"\" {\n\tpolicy = \"read\"\n}";
/// `builtin/node`: write on the node, read on all services.
const NODE_TEMPLATE: &str = "\nnode \"{{.Name}}\" {\n\tpolicy = \"write\"\n}\nservice_prefix \"\" {\n\tpolicy = \"read\"\n}";
/// `builtin/dns`: read on what DNS answers from.
const DNS_TEMPLATE: &str = "\nnode_prefix \"\" {\n\tpolicy = \"read\"\n}\nservice_prefix \"\" {\n\tpolicy = \"read\"\n}\nquery_prefix \"\" {\n\tpolicy = \"read\"\n}";

const NAME_SCHEMA: &str = "{\n\t\"type\": \"object\",\n\t\"properties\": {\n\t\t\"name\": { \"type\": \"string\", \"$ref\": \"#/definitions/min-length-one\" }\n\t},\n\t\"required\": [\"name\"],\n\t\"definitions\": {\n\t\t\"min-length-one\": {\n\t\t\t\t\"type\": \"string\",\n\t\t\t\t\"minLength\": 1\n\t\t}\n\t}\n}";

fn templates() -> Vec<(&'static str, &'static str, &'static str, &'static str)> {
    vec![
        ("builtin/dns", DNS_TEMPLATE, "", "Gives the token or role permissions for the Consul DNS to query services in the network."),
        ("builtin/node", NODE_TEMPLATE, NAME_SCHEMA, "Gives the token or role permissions to register an agent/node into the catalog. A node is typically a consul agent but can also be a physical server, cloud instance or a container."),
        ("builtin/service", SERVICE_TEMPLATE, NAME_SCHEMA, "Gives the token or role permissions to register a service and discover services in the Consul catalog. It also gives the specified service's sidecar proxy the permission to discover and route traffic to other services."),
    ]
}

fn template_json(name: &str, tpl: &str, schema: &str, desc: &str) -> Value {
    json!({"TemplateName": name, "Schema": schema, "Template": tpl, "Description": desc})
}

/// Routes the templated-policy endpoints (anything else under `/v1/acl/` is unknown).
pub(crate) fn handle(ctx: &Ctx, pattern: &str, rest: &str, body: &[u8]) -> Result<Reply, Reply> {
    let token = crate::query::request_token(&ctx.query, &ctx.headers);
    crate::endpoints::access::require(ctx, token.as_deref(), "acl:read", "")?;
    let find = |name: &str| templates().into_iter().find(|t| t.0 == name);
    match pattern {
        "/v1/acl/templated-policies" => {
            let m: Map<String, Value> = templates()
                .into_iter()
                .map(|(n, t, s, d)| (n.to_string(), template_json(n, t, s, d)))
                .collect();
            Ok(Reply::json(200, &Value::Object(m), ctx.pretty()))
        }
        "/v1/acl/templated-policy/name/" => match find(rest) {
            Some((n, t, s, d)) => Ok(Reply::json(200, &template_json(n, t, s, d), ctx.pretty())),
            None => Err(Reply::text(
                404,
                format!("Invalid templated policy Name: {rest}"),
            )),
        },
        "/v1/acl/templated-policy/preview/" => {
            let Some((_, tpl, schema, _)) = find(rest) else {
                return Err(Reply::text(
                    404,
                    format!("Invalid templated policy Name: {rest}"),
                ));
            };
            let vars = decode::object(body, "structs.ACLTemplatedPolicyVariables")?;
            let name = decode::string(&vars, "Name");
            if !schema.is_empty() && name.is_empty() {
                return Err(Reply::text(
                    400,
                    "Failed to validate template variables: name is required",
                ));
            }
            let id = crate::state::new_uuid();
            let policy = json!({
                "ID": id,
                "Name": format!("synthetic-policy-{}", &id[..8]),
                "Description": format!("synthetic policy generated from templated policy: {rest}"),
                "Rules": tpl.replace("{{.Name}}", &name),
                "Hash": "",
                "CreateIndex": 0,
                "ModifyIndex": 0
            });
            Ok(Reply::json(200, &policy, ctx.pretty()))
        }
        _ => Err(Reply::text(
            404,
            "Invalid URL path: not a recognized HTTP API endpoint\n",
        )),
    }
}

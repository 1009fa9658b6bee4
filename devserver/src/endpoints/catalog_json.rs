//! The JSON forms of catalog rows, with Consul's field names and order (CE): `structs.Node`,
//! `structs.ServiceNode` (catalog service listing), `structs.NodeService` (node services,
//! health entries), `api.AgentService` (agent listings) and `structs.HealthCheck`.

use serde_json::{json, Map, Value};

use crate::endpoints::decode::{self, fld};
use crate::state::{Check, Node, Service};

/// `structs.Node` as `/v1/catalog/nodes` and `/v1/catalog/node/<n>` return it.
pub(crate) fn node(n: &Node, dc: &str) -> Value {
    json!({
        "ID": n.id,
        "Node": n.name,
        "Address": n.address,
        "Datacenter": dc,
        "TaggedAddresses": n.tagged_addresses,
        "Meta": n.meta,
        "CreateIndex": n.create_index,
        "ModifyIndex": n.modify_index,
    })
}

fn weights(s: &Service) -> Value {
    if s.weights.is_object() {
        s.weights.clone()
    } else {
        json!({"Passing": 1, "Warning": 1})
    }
}

fn put_opt(m: &mut Map<String, Value>, k: &str, v: &Value) {
    if !v.is_null() && !v.as_object().is_some_and(|o| o.is_empty()) {
        m.insert(k.into(), v.clone());
    }
}

/// `structs.NodeService`: the `Services` of `/v1/catalog/node/<n>` and the `Service` of a
/// health entry.
pub(crate) fn node_service(s: &Service) -> Value {
    let mut m = Map::new();
    m.insert("ID".into(), json!(s.id));
    m.insert("Service".into(), json!(s.service));
    m.insert("Tags".into(), json!(s.tags));
    m.insert("Address".into(), json!(s.address));
    if !s.tagged_addresses.is_empty() {
        m.insert("TaggedAddresses".into(), json!(s.tagged_addresses));
    }
    m.insert("Meta".into(), json!(s.meta));
    m.insert("Port".into(), json!(s.port));
    if !s.socket_path.is_empty() {
        m.insert("SocketPath".into(), json!(s.socket_path));
    }
    m.insert("Weights".into(), weights(s));
    m.insert("EnableTagOverride".into(), json!(s.enable_tag_override));
    if !s.kind.is_empty() {
        m.insert("Kind".into(), json!(s.kind));
    }
    put_opt(&mut m, "Proxy", &s.proxy);
    m.insert(
        "Connect".into(),
        if s.connect.is_object() {
            s.connect.clone()
        } else {
            json!({})
        },
    );
    put_opt(&mut m, "Locality", &s.locality);
    m.insert("PeerName".into(), json!(""));
    m.insert("CreateIndex".into(), json!(s.create_index));
    m.insert("ModifyIndex".into(), json!(s.modify_index));
    Value::Object(m)
}

/// `structs.ServiceNode`: one row of `/v1/catalog/service/<s>`.
pub(crate) fn service_node(n: &Node, s: &Service, dc: &str) -> Value {
    let mut m = Map::new();
    m.insert("ID".into(), json!(n.id));
    m.insert("Node".into(), json!(n.name));
    m.insert("Address".into(), json!(n.address));
    m.insert("Datacenter".into(), json!(dc));
    m.insert("TaggedAddresses".into(), json!(n.tagged_addresses));
    m.insert("NodeMeta".into(), json!(n.meta));
    m.insert("ServiceKind".into(), json!(s.kind));
    m.insert("ServiceID".into(), json!(s.id));
    m.insert("ServiceName".into(), json!(s.service));
    m.insert("ServiceTags".into(), json!(s.tags));
    m.insert("ServiceAddress".into(), json!(s.address));
    m.insert("ServiceTaggedAddresses".into(), json!(s.tagged_addresses));
    m.insert("ServiceWeights".into(), weights(s));
    m.insert("ServiceMeta".into(), json!(s.meta));
    m.insert("ServicePort".into(), json!(s.port));
    if !s.socket_path.is_empty() {
        m.insert("ServiceSocketPath".into(), json!(s.socket_path));
    }
    m.insert(
        "ServiceEnableTagOverride".into(),
        json!(s.enable_tag_override),
    );
    m.insert(
        "ServiceProxy".into(),
        if s.proxy.is_object() {
            s.proxy.clone()
        } else {
            json!({})
        },
    );
    m.insert("ServiceConnect".into(), json!({}));
    put_opt(&mut m, "ServiceLocality", &s.locality);
    m.insert("CreateIndex".into(), json!(s.create_index));
    m.insert("ModifyIndex".into(), json!(s.modify_index));
    Value::Object(m)
}

/// `api.AgentService` (`buildAgentService`): `/v1/agent/services` and `/v1/agent/service/<id>`.
pub(crate) fn agent_service(s: &Service, dc: &str) -> Value {
    let mut m = Map::new();
    if !s.kind.is_empty() {
        m.insert("Kind".into(), json!(s.kind));
    }
    m.insert("ID".into(), json!(s.id));
    m.insert("Service".into(), json!(s.service));
    m.insert("Tags".into(), json!(s.tags));
    m.insert("Meta".into(), json!(s.meta));
    m.insert("Port".into(), json!(s.port));
    m.insert("Address".into(), json!(s.address));
    if !s.socket_path.is_empty() {
        m.insert("SocketPath".into(), json!(s.socket_path));
    }
    if !s.tagged_addresses.is_empty() {
        m.insert("TaggedAddresses".into(), json!(s.tagged_addresses));
    }
    m.insert("Weights".into(), weights(s));
    m.insert("EnableTagOverride".into(), json!(s.enable_tag_override));
    put_opt(&mut m, "Proxy", &s.proxy);
    put_opt(&mut m, "Connect", &s.connect);
    put_opt(&mut m, "Locality", &s.locality);
    m.insert("Datacenter".into(), json!(dc));
    Value::Object(m)
}

/// `structs.HealthCheck`.
pub(crate) fn check(c: &Check) -> Value {
    json!({
        "Node": c.node,
        "CheckID": c.check_id,
        "Name": c.name,
        "Status": c.status.as_str(),
        "Notes": c.notes,
        "Output": c.output,
        "ServiceID": c.service_id,
        "ServiceName": c.service_name,
        "ServiceTags": c.service_tags,
        "Type": c.check_type,
        "Interval": c.interval,
        "Timeout": c.timeout,
        "ExposedPort": 0,
        "Definition": c.definition,
        "CreateIndex": c.create_index,
        "ModifyIndex": c.modify_index,
    })
}

/// A service as a catalog registration or a txn `Service` op sends it (`structs.NodeService`
/// fields, any case), on `node`.
pub(crate) fn service_from(node: &str, s: &Map<String, Value>) -> Service {
    let name = decode::string(s, "Service");
    let mut id = decode::string(s, "ID");
    if id.is_empty() {
        id = name.clone();
    }
    Service {
        node: node.to_string(),
        id,
        service: name,
        tags: decode::strings(s, "Tags"),
        address: decode::string(s, "Address"),
        port: decode::int(s, "Port"),
        meta: decode::map(s, "Meta"),
        tagged_addresses: decode::map(s, "TaggedAddresses")
            .into_iter()
            .map(|(k, v)| (k, decode::camel(&v)))
            .collect(),
        weights: fld(s, "Weights")
            .filter(|w| w.is_object())
            .map(decode::camel)
            .unwrap_or_else(|| json!({"Passing": 1, "Warning": 1})),
        enable_tag_override: decode::boolean(s, "EnableTagOverride"),
        kind: decode::string(s, "Kind"),
        proxy: fld(s, "Proxy").map(decode::camel).unwrap_or(Value::Null),
        connect: fld(s, "Connect")
            .filter(|c| c.is_object())
            .map(decode::camel)
            .unwrap_or(Value::Null),
        locality: fld(s, "Locality").map(decode::camel).unwrap_or(Value::Null),
        socket_path: decode::string(s, "SocketPath"),
        create_index: 0,
        modify_index: 0,
    }
}

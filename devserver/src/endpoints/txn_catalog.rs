//! The `Node`, `Service` and `Check` operations of `PUT /v1/txn` (`agent/consul/state/txn.go`
//! `txnNode`, `txnService`, `txnCheck`): `get`, `set`, `cas`, `delete`, `delete-cas`, applied
//! in order with the KV operations, each answering the row it read or wrote.

use serde_json::{json, Map, Value};

use crate::endpoints::access::Access;
use crate::endpoints::catalog_json;
use crate::endpoints::decode;
use crate::godur::go_quote;
use crate::state::{Check, CheckStatus, Node, State};

/// Which table an operation works on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Table {
    Node,
    Service,
    Check,
}

impl Table {
    pub fn name(self) -> &'static str {
        match self {
            Table::Node => "Node",
            Table::Service => "Service",
            Table::Check => "Check",
        }
    }
}

/// One decoded catalog operation.
#[derive(Debug, Clone)]
pub(crate) struct CatalogOp {
    pub table: Table,
    pub verb: String,
    /// The node the row is on.
    pub node: String,
    /// The row as sent (`Node`, `Service` or `Check` object).
    pub row: Map<String, Value>,
}

impl CatalogOp {
    /// Decodes `{"Verb", "Node": {...}}`, `{"Verb", "Node": "n", "Service": {...}}` or
    /// `{"Verb", "Check": {...}}`.
    pub fn decode(table: Table, obj: &Map<String, Value>) -> Result<CatalogOp, String> {
        let verb = decode::string(obj, "Verb");
        let sub = |name: &str| -> Result<Map<String, Value>, String> {
            match decode::fld(obj, name) {
                None | Some(Value::Null) => Ok(Map::new()),
                Some(Value::Object(o)) => Ok(o.clone()),
                Some(_) => Err(format!(
                    "json: cannot unmarshal {name} of a {} operation",
                    table.name()
                )),
            }
        };
        let (node, row) = match table {
            Table::Node => {
                let row = sub("Node")?;
                (decode::string(&row, "Node"), row)
            }
            Table::Service => (decode::string(obj, "Node"), sub("Service")?),
            Table::Check => {
                let row = sub("Check")?;
                (decode::string(&row, "Node"), row)
            }
        };
        Ok(CatalogOp {
            table,
            verb,
            node,
            row,
        })
    }

    /// Whether the operation writes (anything but `get`).
    pub fn is_write(&self) -> bool {
        self.verb != "get"
    }

    fn id(&self) -> String {
        match self.table {
            Table::Node => self.node.clone(),
            Table::Service => {
                let id = decode::string(&self.row, "ID");
                if id.is_empty() {
                    decode::string(&self.row, "Service")
                } else {
                    id
                }
            }
            Table::Check => decode::string(&self.row, "CheckID"),
        }
    }

    /// The permission the operation needs, and on what.
    pub fn permission(&self) -> (&'static str, String) {
        let write = self.is_write();
        match self.table {
            Table::Node | Table::Check => (
                if write { "node:write" } else { "node:read" },
                self.node.clone(),
            ),
            Table::Service => (
                if write {
                    "service:write"
                } else {
                    "service:read"
                },
                decode::string(&self.row, "Service"),
            ),
        }
    }

    fn modify_index(&self) -> u64 {
        decode::fld(&self.row, "ModifyIndex")
            .and_then(Value::as_u64)
            .unwrap_or(0)
    }

    /// Applies the operation at `idx`; the results it answers, or the error text.
    pub fn run(
        &self,
        st: &mut State,
        idx: u64,
        access: &Access,
        dc: &str,
    ) -> Result<Vec<Value>, String> {
        let (perm, on) = self.permission();
        if !access.allows(perm, &on) {
            return Err("Permission denied".into());
        }
        match self.table {
            Table::Node => self.run_node(st, idx, dc),
            Table::Service => self.run_service(st, idx),
            Table::Check => self.run_check(st, idx),
        }
    }

    fn run_node(&self, st: &mut State, idx: u64, dc: &str) -> Result<Vec<Value>, String> {
        let q = go_quote(&self.node);
        let current = st.node(&self.node).cloned();
        let stale = |what: &str| format!("failed to {what} node {q}, index is stale");
        match self.verb.as_str() {
            "get" => current
                .map(|n| vec![json!({"Node": node_json(&n, dc)})])
                .ok_or(format!("node {q} doesn't exist")),
            "set" | "cas" => {
                if self.verb == "cas" {
                    let want = self.modify_index();
                    let now = current.as_ref().map_or(0, |n| n.modify_index);
                    if want != now {
                        return Err(stale("set"));
                    }
                }
                let mut node = Node::new(&self.node, &decode::string(&self.row, "Address"));
                node.id = decode::string(&self.row, "ID").to_ascii_lowercase();
                node.tagged_addresses = decode::map(&self.row, "TaggedAddresses");
                node.meta = decode::map(&self.row, "Meta");
                let name = st.put_node_at(idx, node);
                let n = st
                    .node(&name)
                    .cloned()
                    .ok_or(format!("node {q} doesn't exist"))?;
                Ok(vec![json!({"Node": node_json(&n, dc)})])
            }
            "delete" => {
                st.delete_node_at(idx, &self.node);
                Ok(vec![])
            }
            "delete-cas" => match current {
                Some(n) if n.modify_index == self.modify_index() => {
                    st.delete_node_at(idx, &self.node);
                    Ok(vec![])
                }
                Some(_) => Err(stale("delete")),
                None => Ok(vec![]),
            },
            other => Err(format!("unknown Node verb {}", go_quote(other))),
        }
    }

    fn run_service(&self, st: &mut State, idx: u64) -> Result<Vec<Value>, String> {
        let id = self.id();
        let (qi, qn) = (go_quote(&id), go_quote(&self.node));
        let current = st.service(&self.node, &id).cloned();
        let stale =
            |what: &str| format!("failed to {what} service {qi} on node {qn}, index is stale");
        let answer = |st: &State| {
            st.service(&self.node, &id)
                .map(|s| vec![json!({"Service": service_json(s)})])
                .ok_or(format!("service {qi} on node {qn} doesn't exist"))
        };
        match self.verb.as_str() {
            "get" => answer(st),
            "set" | "cas" => {
                if st.node(&self.node).is_none() {
                    return Err(format!("node {qn} doesn't exist"));
                }
                if self.verb == "cas"
                    && self.modify_index() != current.map_or(0, |s| s.modify_index)
                {
                    return Err(stale("set"));
                }
                let mut svc = catalog_json::service_from(&self.node, &self.row);
                svc.id = id.clone();
                st.put_service_at(idx, svc);
                answer(st)
            }
            "delete" => {
                st.delete_service_at(idx, &self.node, &id);
                Ok(vec![])
            }
            "delete-cas" => match current {
                Some(s) if s.modify_index == self.modify_index() => {
                    st.delete_service_at(idx, &self.node, &id);
                    Ok(vec![])
                }
                Some(_) => Err(stale("delete")),
                None => Ok(vec![]),
            },
            other => Err(format!("unknown Service verb {}", go_quote(other))),
        }
    }

    fn run_check(&self, st: &mut State, idx: u64) -> Result<Vec<Value>, String> {
        let id = self.id();
        let (qi, qn) = (go_quote(&id), go_quote(&self.node));
        let current = st.check(&self.node, &id).cloned();
        let stale =
            |what: &str| format!("failed to {what} check {qi} on node {qn}, index is stale");
        let answer = |st: &State| {
            st.check(&self.node, &id)
                .map(|c| vec![json!({"Check": check_json(c)})])
                .ok_or(format!("check {qi} on node {qn} doesn't exist"))
        };
        match self.verb.as_str() {
            "get" => answer(st),
            "set" | "cas" => {
                if self.verb == "cas"
                    && self.modify_index() != current.map_or(0, |c| c.modify_index)
                {
                    return Err(stale("set"));
                }
                let status_text = decode::string(&self.row, "Status");
                let status = if status_text.is_empty() {
                    CheckStatus::Critical
                } else {
                    CheckStatus::parse(&status_text)
                        .ok_or(format!("Invalid check status: {}", go_quote(&status_text)))?
                };
                let name = decode::string(&self.row, "Name");
                let mut chk = Check::new(&self.node, &id, &name, status);
                chk.notes = decode::string(&self.row, "Notes");
                chk.output = decode::string(&self.row, "Output");
                chk.service_id = decode::string(&self.row, "ServiceID");
                chk.check_type = decode::string(&self.row, "Type");
                if let Some(d) = decode::sub(&self.row, "Definition") {
                    chk.definition = decode::camel(&Value::Object(d.clone()));
                }
                st.put_check_at(idx, chk).map_err(|e| e.0)?;
                answer(st)
            }
            "delete" => {
                st.delete_check_at(idx, &self.node, &id);
                Ok(vec![])
            }
            "delete-cas" => match current {
                Some(c) if c.modify_index == self.modify_index() => {
                    st.delete_check_at(idx, &self.node, &id);
                    Ok(vec![])
                }
                Some(_) => Err(stale("delete")),
                None => Ok(vec![]),
            },
            other => Err(format!("unknown Check verb {}", go_quote(other))),
        }
    }
}

/// A txn result's node: `structs.Node` as the FSM returns it, where a node registered without
/// tagged addresses or meta has nil maps (`null`; the api package's `TestAPI_ClientTxn`
/// compares them to nil).
fn node_json(n: &Node, dc: &str) -> Value {
    let mut v = catalog_json::node(n, dc);
    for field in ["TaggedAddresses", "Meta"] {
        if v[field].as_object().is_some_and(Map::is_empty) {
            v[field] = Value::Null;
        }
    }
    v
}

/// A txn result's service: `structs.NodeService` as the FSM returns it, with its (empty)
/// `Proxy` and `Connect` structs present.
fn service_json(s: &crate::state::Service) -> Value {
    let mut v = catalog_json::node_service(s);
    if v.get("Proxy").is_none() {
        v["Proxy"] = json!({"MeshGateway": {}, "Expose": {}});
    }
    if !v["Connect"].is_object() {
        v["Connect"] = json!({});
    }
    v
}

/// A txn result's check: `structs.HealthCheck` as stored (no service, no tags: null).
fn check_json(c: &Check) -> Value {
    let mut v = catalog_json::check(c);
    if c.service_tags.is_empty() {
        v["ServiceTags"] = Value::Null;
    }
    v
}

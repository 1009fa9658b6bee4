//! The tables behind the operator-facing endpoints (Consul's `state/prepared_query.go`,
//! `state/autopilot.go`, `state/connect_ca.go`), kept as the JSON Consul returns: prepared
//! queries with their table index, the autopilot configuration, the Connect CA root.

use std::collections::BTreeMap;

use serde_json::Value;

/// Prepared queries, autopilot configuration, Connect CA root.
#[derive(Default)]
pub(crate) struct OperatorTables {
    /// Prepared queries (`structs.PreparedQuery` JSON) by ID.
    pub prepared_queries: BTreeMap<String, Value>,
    /// The prepared-queries table index.
    pub prepared_queries_index: u64,
    /// The autopilot configuration (`structs.AutopilotConfig` JSON, with its indexes), set on
    /// first write; `None` reads as the defaults at the boot index.
    pub autopilot: Option<Value>,
    /// The Connect CA root (`structs.CARoot` JSON), generated on first use.
    pub connect_root: Option<Value>,
}

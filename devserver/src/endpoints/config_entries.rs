//! Config entries (`/v1/config/`): kept only as far as the catalog reads them.

use serde_json::Value;

use crate::state::State;

/// The services a gateway's config entry links (none until config entries are stored).
pub(crate) fn gateway_services(_st: &State, _gateway: &str) -> Vec<Value> {
    Vec::new()
}

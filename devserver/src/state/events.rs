//! User events (the agent's buffer of the last 256, `agent/user_event.go`) and network
//! coordinates (`coordinates` table).

use std::collections::BTreeMap;

use serde_json::Value;

use super::{State, Topic};

/// How many events an agent keeps (`maxUserEventBuffer`).
const MAX_EVENTS: usize = 256;

/// Events and coordinates.
#[derive(Default)]
pub(crate) struct EventsAndCoords {
    /// Events, oldest first, as `/v1/event/list` returns them.
    pub events: Vec<Value>,
    /// Coordinates by node name.
    pub coords: BTreeMap<String, Value>,
    pub coords_index: u64,
}

impl State {
    /// Events and coordinates.
    pub fn events(&self) -> &EventsAndCoords {
        &self.events
    }

    /// Adds a fired event (gossip, not raft: no index is consumed).
    pub fn add_event(&mut self, ev: Value) {
        self.events.events.push(ev);
        let n = self.events.events.len();
        if n > MAX_EVENTS {
            self.events.events.drain(..n - MAX_EVENTS);
        }
        self.changes.push(Topic::Events);
    }

    /// Stores a node's coordinate (a raft write).
    pub fn set_coordinate(&mut self, node: &str, entry: Value) {
        let idx = self.next_index();
        self.events.coords.insert(node.to_string(), entry);
        self.events.coords_index = idx;
        self.changes.push(Topic::Catalog);
    }
}

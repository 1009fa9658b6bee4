//! The catalog: nodes and their health checks. A check that turns critical, or disappears,
//! invalidates the sessions bound to it in the same write.

use std::collections::BTreeMap;

use super::{Session, State};

/// The node check every session is bound to by default.
pub(crate) const SERF_CHECK_ID: &str = "serfHealth";

/// Health of a registered check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CheckStatus {
    Passing,
    Warning,
    Critical,
}

impl CheckStatus {
    pub fn parse(s: &str) -> Option<CheckStatus> {
        match s {
            "passing" => Some(CheckStatus::Passing),
            "warning" => Some(CheckStatus::Warning),
            "critical" => Some(CheckStatus::Critical),
            _ => None,
        }
    }
}

/// A catalog node and its checks.
#[derive(Clone, Debug)]
pub(crate) struct Node {
    pub name: String,
    pub address: String,
    pub checks: BTreeMap<String, CheckStatus>,
}

impl State {
    /// Registers (or updates) a node and some of its checks. A check that becomes critical
    /// invalidates the sessions bound to it, in the same write.
    pub fn register_node(&mut self, name: &str, address: &str, checks: &[(String, CheckStatus)]) {
        let idx = self.next_index();
        let node = self
            .nodes
            .entry(name.to_ascii_lowercase())
            .or_insert_with(|| Node {
                name: name.to_string(),
                address: address.to_string(),
                checks: BTreeMap::new(),
            });
        if !address.is_empty() {
            node.address = address.to_string();
        }
        for (id, status) in checks {
            node.checks.insert(id.clone(), *status);
        }
        let critical: Vec<&str> = checks
            .iter()
            .filter(|(_, s)| *s == CheckStatus::Critical)
            .map(|(id, _)| id.as_str())
            .collect();
        if !critical.is_empty() {
            self.invalidate_where(idx, |s| {
                s.node.eq_ignore_ascii_case(name)
                    && s.all_check_ids().any(|c| critical.contains(&c))
            });
        }
    }

    /// Removes a node (and its checks, invalidating its sessions), or just one of its checks.
    /// Returns false when the node is unknown.
    pub fn deregister(&mut self, name: &str, check: Option<&str>) -> bool {
        let lname = name.to_ascii_lowercase();
        if !self.nodes.contains_key(&lname) {
            return false;
        }
        let idx = self.next_index();
        match check {
            None => {
                self.nodes.remove(&lname);
                self.invalidate_where(idx, |s| s.node.eq_ignore_ascii_case(name));
            }
            Some(c) => {
                if let Some(n) = self.nodes.get_mut(&lname) {
                    n.checks.remove(c);
                }
                self.invalidate_where(idx, |s| {
                    s.node.eq_ignore_ascii_case(name) && s.all_check_ids().any(|id| id == c)
                });
            }
        }
        true
    }

    fn invalidate_where(&mut self, idx: u64, pred: impl Fn(&Session) -> bool) {
        let victims: Vec<Session> = self
            .sessions
            .values()
            .filter(|s| pred(s))
            .cloned()
            .collect();
        for s in victims {
            self.invalidate_at(idx, s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{sess, st};
    use super::super::{ApplyError, Behavior, NewSession};
    use super::*;

    #[test]
    fn critical_check_invalidates_bound_sessions() {
        let mut s = st();
        let id = sess(&mut s, Behavior::Release, 0);
        s.register_node("n1", "", &[(SERF_CHECK_ID.into(), CheckStatus::Critical)]);
        assert!(s.session(&id).is_none());
        let err = s.session_create(NewSession {
            name: String::new(),
            node: "n1".into(),
            lock_delay_ns: 0,
            behavior: Behavior::Release,
            ttl: String::new(),
            ttl_dur: None,
            node_checks: vec![SERF_CHECK_ID.into()],
            service_checks: None,
            checks: None,
        });
        assert_eq!(
            err,
            Err(ApplyError::Text(
                "apply failed: Check 'serfHealth' is in critical state".into()
            ))
        );
    }
}

//! ACL policy rules (`acl/policy.go`, `acl/policy_authorizer.go`): the HCL or JSON rules of a
//! token's policies, roles and identities, merged, and asked for `kind:access` on a resource.
//!
//! Supported: the `key`, `node`, `service`, `session`, `agent`, `event`, `query` resources with
//! their `_prefix` forms, and the plain `acl`, `operator`, `keyring`, `mesh`, `peering` rules.
//! An exact rule wins over prefix rules, the longest prefix wins among those; when several
//! policies set the same rule, `deny` takes precedence, then `write`, `list`, `read`
//! (`takesPrecedenceOver`). Nothing matching is a denial (the default policy is `deny`).

use std::collections::HashMap;

use serde_json::Value;

/// An access level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Level {
    Deny,
    Read,
    List,
    Write,
}

impl Level {
    fn parse(s: &str) -> Option<Level> {
        match s {
            "deny" => Some(Level::Deny),
            "read" => Some(Level::Read),
            "list" => Some(Level::List),
            "write" => Some(Level::Write),
            _ => None,
        }
    }

    /// Consul's `takesPrecedenceOver` order.
    fn rank(self) -> u8 {
        match self {
            Level::Deny => 4,
            Level::Write => 3,
            Level::List => 2,
            Level::Read => 1,
        }
    }

    fn grants(self, access: &str) -> bool {
        match access {
            "read" => matches!(self, Level::Read | Level::List | Level::Write),
            "list" => matches!(self, Level::List | Level::Write),
            "write" => self == Level::Write,
            _ => false,
        }
    }
}

/// Merged rules: `(kind, exact?)` → name → level; plain rules by kind.
#[derive(Clone, Debug, Default)]
pub(crate) struct Rules {
    named: HashMap<(String, bool), HashMap<String, Level>>,
    plain: HashMap<String, Level>,
}

impl Rules {
    fn set(&mut self, kind: &str, exact: bool, name: &str, level: Level) {
        let slot = self
            .named
            .entry((kind.to_string(), exact))
            .or_default()
            .entry(name.to_string())
            .or_insert(level);
        if level.rank() > slot.rank() {
            *slot = level;
        }
    }

    fn set_plain(&mut self, kind: &str, level: Level) {
        let slot = self.plain.entry(kind.to_string()).or_insert(level);
        if level.rank() > slot.rank() {
            *slot = level;
        }
    }

    /// Adds a policy's rules (HCL, or the JSON form), ignoring what it does not understand.
    pub fn add(&mut self, text: &str) {
        if text.trim_start().starts_with('{') {
            if let Ok(Value::Object(m)) = serde_json::from_str::<Value>(text) {
                for (k, v) in m {
                    self.add_json(&k, &v);
                }
            }
            return;
        }
        let toks = lex(text);
        let mut i = 0;
        while i < toks.len() {
            // kind "name" { policy = "level" ... }   |   kind = "level"
            match (toks.get(i), toks.get(i + 1), toks.get(i + 2)) {
                (Some(Tok::Ident(kind)), Some(Tok::Str(name)), Some(Tok::Open)) => {
                    let mut j = i + 3;
                    let mut level = None;
                    while j < toks.len() && toks[j] != Tok::Close {
                        if let (Some(Tok::Ident(k)), Some(Tok::Eq), Some(Tok::Str(v))) =
                            (toks.get(j), toks.get(j + 1), toks.get(j + 2))
                        {
                            if k == "policy" {
                                level = Level::parse(v);
                            }
                            j += 3;
                        } else {
                            j += 1;
                        }
                    }
                    if let Some(l) = level {
                        self.add_named(kind, name, l);
                    }
                    i = j + 1;
                }
                (Some(Tok::Ident(kind)), Some(Tok::Eq), Some(Tok::Str(v))) => {
                    if let Some(l) = Level::parse(v) {
                        self.set_plain(kind, l);
                    }
                    i += 3;
                }
                _ => i += 1,
            }
        }
    }

    fn add_json(&mut self, kind: &str, v: &Value) {
        match v {
            Value::String(s) => {
                if let Some(l) = Level::parse(s) {
                    self.set_plain(kind, l);
                }
            }
            Value::Object(m) => {
                for (name, body) in m {
                    if let Some(l) = body
                        .get("policy")
                        .and_then(Value::as_str)
                        .and_then(Level::parse)
                    {
                        self.add_named(kind, name, l);
                    }
                }
            }
            _ => {}
        }
    }

    fn add_named(&mut self, kind: &str, name: &str, level: Level) {
        match kind.strip_suffix("_prefix") {
            Some(base) => self.set(base, false, name, level),
            None => self.set(kind, true, name, level),
        }
    }

    /// Whether `perm` (`kind:access`, e.g. `key:write`) is granted on `resource`.
    pub fn allows(&self, perm: &str, resource: &str) -> bool {
        let Some((kind, access)) = perm.split_once(':') else {
            return false;
        };
        if let Some(l) = self.plain.get(kind) {
            return l.grants(access);
        }
        if let Some(l) = self
            .named
            .get(&(kind.to_string(), true))
            .and_then(|m| m.get(resource))
        {
            return l.grants(access);
        }
        let best = self.named.get(&(kind.to_string(), false)).and_then(|m| {
            m.iter()
                .filter(|(p, _)| resource.starts_with(p.as_str()))
                .max_by_key(|(p, _)| p.len())
                .map(|(_, l)| *l)
        });
        best.is_some_and(|l| l.grants(access))
    }
}

/// The rules a service identity grants (`ACLServiceIdentity.SyntheticPolicy`).
pub(crate) fn service_identity(name: &str) -> String {
    format!(
        "service \"{name}\" {{ policy = \"write\" }}\nservice \"{name}-sidecar-proxy\" {{ policy = \"write\" }}\nservice_prefix \"\" {{ policy = \"read\" }}\nnode_prefix \"\" {{ policy = \"read\" }}"
    )
}

/// The rules a node identity grants (`ACLNodeIdentity.SyntheticPolicy`).
pub(crate) fn node_identity(name: &str) -> String {
    format!("node \"{name}\" {{ policy = \"write\" }}\nservice_prefix \"\" {{ policy = \"read\" }}")
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    Str(String),
    Open,
    Close,
    Eq,
}

fn lex(s: &str) -> Vec<Tok> {
    let c: Vec<char> = s.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        match c[i] {
            '#' => {
                while i < c.len() && c[i] != '\n' {
                    i += 1;
                }
            }
            '{' => {
                out.push(Tok::Open);
                i += 1;
            }
            '}' => {
                out.push(Tok::Close);
                i += 1;
            }
            '=' => {
                out.push(Tok::Eq);
                i += 1;
            }
            '"' => {
                let mut j = i + 1;
                let mut v = String::new();
                while j < c.len() && c[j] != '"' {
                    if c[j] == '\\' && j + 1 < c.len() {
                        j += 1;
                    }
                    v.push(c[j]);
                    j += 1;
                }
                out.push(Tok::Str(v));
                i = j + 1;
            }
            ch if ch.is_alphanumeric() || ch == '_' => {
                let mut j = i;
                while j < c.len() && (c[j].is_alphanumeric() || c[j] == '_') {
                    j += 1;
                }
                out.push(Tok::Ident(c[i..j].iter().collect()));
                i = j;
            }
            _ => i += 1,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_beats_prefix_longest_prefix_wins_deny_takes_precedence() {
        let mut r = Rules::default();
        r.add("key_prefix \"\" { policy = \"read\" }\nkey_prefix \"app/\" { policy = \"write\" }\nkey \"app/secret\" { policy = \"deny\" }\nacl = \"read\"");
        assert!(r.allows("key:read", "other"));
        assert!(!r.allows("key:write", "other"));
        assert!(r.allows("key:write", "app/x"));
        assert!(!r.allows("key:read", "app/secret"));
        assert!(r.allows("acl:read", ""));
        assert!(!r.allows("acl:write", ""));
        assert!(!r.allows("session:write", "n1"));
        r.add(r#"{"key_prefix": {"app/": {"policy": "deny"}}}"#);
        assert!(!r.allows("key:write", "app/x"), "deny wins over write");
    }
}

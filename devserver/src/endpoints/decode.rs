//! Request-body decoding shared by the agent, catalog and ACL endpoints. Consul decodes these
//! bodies with `lib.DecodeJSON`/mapstructure after translating snake_case keys
//! (`enable_tag_override` → `EnableTagOverride`), and Go's decoder matches field names
//! case-insensitively; [`fld`] does both.

use serde_json::{Map, Value};

use crate::query::Reply;

/// Parses a JSON object body; Consul's 400 `Request decode failed: ...` otherwise. `go_type`
/// names the Go type in the type-mismatch text (e.g. `structs.RegisterRequest`).
pub(crate) fn object(body: &[u8], go_type: &str) -> Result<Map<String, Value>, Reply> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(v) => Err(Reply::text(
            400,
            format!(
                "Request decode failed: json: cannot unmarshal {} into Go value of type {go_type}",
                json_kind(&v)
            ),
        )),
        Err(e) => Err(Reply::text(
            400,
            format!("Request decode failed: {}", syntax_error(&e)),
        )),
    }
}

/// A Go-flavoured text for a JSON syntax error.
pub(crate) fn syntax_error(e: &serde_json::Error) -> String {
    if e.is_eof() {
        "unexpected EOF".to_string()
    } else {
        format!(
            "invalid character in JSON at line {} column {}: {e}",
            e.line(),
            e.column()
        )
    }
}

fn squash(s: &str) -> String {
    s.chars()
        .filter(|c| *c != '_' && *c != '-')
        .flat_map(char::to_lowercase)
        .collect()
}

/// The field `name` (Go's spelling) of `obj`: exact, else ignoring case and `_`.
pub(crate) fn fld<'a>(obj: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    if let Some(v) = obj.get(name) {
        return Some(v);
    }
    let want = squash(name);
    obj.iter().find(|(k, _)| squash(k) == want).map(|(_, v)| v)
}

/// A string field (`""` when absent, null or not a string).
pub(crate) fn string(obj: &Map<String, Value>, name: &str) -> String {
    fld(obj, name)
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

/// An integer field (0 when absent).
pub(crate) fn int(obj: &Map<String, Value>, name: &str) -> i64 {
    match fld(obj, name) {
        Some(Value::Number(n)) => n.as_i64().unwrap_or(0),
        Some(Value::String(s)) => s.parse().unwrap_or(0),
        _ => 0,
    }
}

/// A boolean field (false when absent).
pub(crate) fn boolean(obj: &Map<String, Value>, name: &str) -> bool {
    match fld(obj, name) {
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => s == "true",
        _ => false,
    }
}

/// A list of strings (empty when absent).
pub(crate) fn strings(obj: &Map<String, Value>, name: &str) -> Vec<String> {
    match fld(obj, name) {
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect(),
        _ => Vec::new(),
    }
}

/// An object field (empty when absent).
pub(crate) fn map(obj: &Map<String, Value>, name: &str) -> Map<String, Value> {
    match fld(obj, name) {
        Some(Value::Object(m)) => m.clone(),
        _ => Map::new(),
    }
}

/// An object field as an object, if present.
pub(crate) fn sub<'a>(obj: &'a Map<String, Value>, name: &str) -> Option<&'a Map<String, Value>> {
    fld(obj, name).and_then(Value::as_object)
}

/// Go's `strconv.ParseBool`.
pub(crate) fn parse_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// Re-keys an object's keys to Go's CamelCase spelling for the few nested structures
/// (`Proxy`, `Locality`, tagged addresses) whose fields a client reads back; the opaque
/// `Config` maps inside them keep their keys.
pub(crate) fn camel(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| {
                    let k = k
                        .split('_')
                        .map(|p| {
                            let mut c = p.chars();
                            match c.next() {
                                Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
                                None => String::new(),
                            }
                        })
                        .collect::<String>();
                    // `Config` maps (a proxy's, an upstream's) are opaque: kept as sent.
                    let v = if k == "Config" { v.clone() } else { camel(v) };
                    (k, v)
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(camel).collect()),
        v => v.clone(),
    }
}

/// Whether `s` is a UUID in Consul's `8-4-4-4-12` hex form.
pub(crate) fn is_uuid(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    parts.len() == 5
        && parts
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(p, n)| p.len() == n && p.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Go's `json.Unmarshal` type name of a JSON value, for its error texts.
pub(crate) fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Finds a field the way Go's decoder does: exact name first, then case-insensitively.
pub(crate) fn field<'a>(obj: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    obj.get(name).or_else(|| {
        obj.iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    })
}

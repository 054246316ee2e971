//! Request parameters as Proxmox's HTTP server decodes them: query string and form body split on
//! `&` and `;`, key from value on `=` (a raw `=` inside a value cuts it short, as in Proxmox),
//! repeated keys become arrays, JSON bodies kept as typed values, the query overriding the body.

use percent_encoding::percent_decode_str;
use serde_json::{Map, Value};

use crate::ApiError;
use crate::schema::{parse_boolean, scalar_text};

/// The largest request body Proxmox accepts.
pub const MAX_BODY: usize = 512 * 1024;

/// Decodes `a=1&b=2;b=3` into `{"a":"1","b":["2","3"]}`.
pub fn decode_form(text: &str, into: &mut Map<String, Value>) {
    for pair in text.split(['&', ';']) {
        if pair.is_empty() {
            continue;
        }
        let mut parts = pair.split('=');
        let key = decode_component(parts.next().unwrap_or_default());
        let value = decode_component(parts.next().unwrap_or_default());
        if key.is_empty() {
            continue;
        }
        match into.get_mut(&key) {
            Some(Value::Array(items)) => items.push(Value::String(value)),
            Some(existing) => {
                let first = existing.take();
                *existing = Value::Array(vec![first, Value::String(value)]);
            }
            None => {
                into.insert(key, Value::String(value));
            }
        }
    }
}

fn decode_component(s: &str) -> String {
    let spaced = s.replace('+', " ");
    percent_decode_str(&spaced).decode_utf8_lossy().into_owned()
}

/// Merges a request's body and query into one parameter map (the query wins).
pub fn collect(
    query: Option<&str>,
    content_type: Option<&str>,
    body: &[u8],
) -> Result<Map<String, Value>, ApiError> {
    let mut params = Map::new();
    if !body.is_empty() {
        let is_json = content_type.is_some_and(|c| c.trim_start().starts_with("application/json"));
        if is_json {
            match serde_json::from_slice::<Value>(body) {
                Ok(Value::Object(map)) => params.extend(map),
                Ok(Value::Null) => {}
                Ok(_) => {
                    return Err(ApiError::new(
                        400,
                        "malformed JSON body: expected an object",
                    ));
                }
                Err(e) => return Err(ApiError::new(400, format!("malformed JSON body: {e}"))),
            }
        } else {
            decode_form(&String::from_utf8_lossy(body), &mut params);
        }
    }
    if let Some(q) = query {
        let mut from_query = Map::new();
        decode_form(q, &mut from_query);
        params.extend(from_query);
    }
    Ok(params)
}

/// Typed reads of already verified parameters.
#[derive(Debug, Clone, Default)]
pub struct Params(pub Map<String, Value>);

impl Params {
    /// A parameter as text (numbers and booleans rendered as Perl would); `None` when absent.
    pub fn text(&self, key: &str) -> Option<String> {
        match self.0.get(key)? {
            Value::Null => None,
            Value::Array(items) => items.first().map(scalar_text),
            v => Some(scalar_text(v)),
        }
    }

    /// A parameter as a list of texts (repeated keys, or a JSON array).
    pub fn list(&self, key: &str) -> Vec<String> {
        match self.0.get(key) {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items.iter().map(scalar_text).collect(),
            Some(v) => vec![scalar_text(v)],
        }
    }

    /// A boolean parameter (`1`/`0`, or JSON `true`/`false`); `None` when absent.
    pub fn flag(&self, key: &str) -> Option<bool> {
        match self.0.get(key)? {
            Value::Bool(b) => Some(*b),
            v => parse_boolean(&scalar_text(v)),
        }
    }

    /// A boolean parameter that defaults to false.
    pub fn is_set(&self, key: &str) -> bool {
        self.flag(key).unwrap_or(false)
    }

    /// An unsigned integer parameter.
    pub fn uint(&self, key: &str) -> Option<u64> {
        self.text(key)
            .and_then(|t| t.trim_start_matches('+').parse().ok())
    }

    /// A float parameter.
    pub fn number(&self, key: &str) -> Option<f64> {
        self.text(key).and_then(|t| t.parse().ok())
    }

    /// A required text parameter (already verified present by the schema).
    pub fn req(&self, key: &str) -> Result<String, ApiError> {
        self.text(key)
            .ok_or_else(|| ApiError::param(key, "property is missing and it is not optional"))
    }

    /// The `vmid` path parameter.
    pub fn vmid(&self) -> Result<u32, ApiError> {
        self.uint("vmid")
            .and_then(|v| u32::try_from(v).ok())
            .ok_or_else(|| ApiError::param("vmid", "value does not look like a valid VM ID\n"))
    }

    /// The `node` path parameter.
    pub fn node(&self) -> Result<String, ApiError> {
        self.req("node")
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests may panic

    use super::*;

    #[test]
    fn forms_split_on_ampersand_and_semicolon() {
        let p = collect(
            Some("a=x"),
            None,
            b"a=1;b=2&b=3&tags=a%3Bb&c=x=y&d=hello+world",
        )
        .unwrap();
        assert_eq!(p["a"], "x", "query overrides body");
        assert_eq!(p["b"], serde_json::json!(["2", "3"]));
        assert_eq!(p["tags"], "a;b");
        assert_eq!(p["c"], "x", "a raw = cuts the value short");
        assert_eq!(p["d"], "hello world");
    }

    #[test]
    fn json_bodies_keep_types() {
        let p = collect(
            None,
            Some("application/json"),
            br#"{"online":true,"vmid":100}"#,
        )
        .unwrap();
        let p = Params(p);
        assert_eq!(p.flag("online"), Some(true));
        assert_eq!(p.uint("vmid"), Some(100));
        assert!(collect(None, Some("application/json"), b"[1]").is_err());
    }
}

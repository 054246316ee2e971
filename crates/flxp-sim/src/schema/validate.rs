//! A validator for Proxmox's JSON-schema dialect, following `PVE::JSONSchema` (`check_prop`,
//! `check_type`, `check_object`, `check_format`, `parse_property_string`) and its error texts.
//!
//! Two strictness levels: [`Mode::Perl`] accepts what Perl accepts (any scalar is a string, `"5"`
//! is an integer) and is used for request parameters; [`Mode::Wire`] also demands the JSON type
//! a typed client expects (numbers as numbers), for checking the simulator's own responses.
//! Schemas may hold `{"$ref": "#/defs/<key>"}` and `name[n]` property families (`net[n]` covers
//! `net0`, `net1`, ...).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::formats;

/// Validation errors: JSON path (`vmid`, `items[3].cpu`, `memory.current`) to message.
pub type Errors = BTreeMap<String, String>;

/// How strictly JSON types are compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// As Proxmox checks request parameters: scalars compared by their text.
    Perl,
    /// As a typed client reads responses: integers and numbers must be JSON numbers, strings
    /// JSON strings, booleans `0`/`1` or `true`/`false`.
    Wire,
}

/// A validator over one schema document (for `$ref` resolution).
pub struct Validator<'a> {
    defs: Option<&'a Map<String, Value>>,
    mode: Mode,
}

impl<'a> Validator<'a> {
    /// A validator resolving `$ref`s into `defs`.
    pub fn new(defs: Option<&'a Map<String, Value>>, mode: Mode) -> Self {
        Validator { defs, mode }
    }

    /// Follows `$ref` (repeatedly) to the referenced schema.
    pub fn resolve(&self, mut schema: &'a Value) -> &'a Value {
        for _ in 0..8 {
            let Some(r) = schema.get("$ref").and_then(Value::as_str) else {
                return schema;
            };
            match r
                .strip_prefix("#/defs/")
                .and_then(|k| self.defs.and_then(|d| d.get(k)))
            {
                Some(target) => schema = target,
                None => return schema,
            }
        }
        schema
    }

    /// Checks `value` (or its absence) against `schema`, adding errors under `path`.
    pub fn check_prop(
        &self,
        value: Option<&Value>,
        schema: &'a Value,
        path: &str,
        errors: &mut Errors,
    ) {
        let schema = self.resolve(schema);
        if !schema.is_object() {
            add_error(errors, path, "Invalid schema definition.");
            return;
        }
        let value = value.filter(|v| !v.is_null());
        let Some(value) = value else {
            if schema.get("type").and_then(Value::as_str) == Some("null") {
                return;
            }
            if !truthy(schema.get("optional"))
                && schema.get("alias").is_none()
                && schema.get("group").is_none()
            {
                add_error(errors, path, "property is missing and it is not optional");
            }
            return;
        };
        if !self.check_type(path, schema.get("type"), value, errors) {
            return;
        }
        match value {
            Value::Array(items) => {
                if let Some(item_schema) = schema.get("items") {
                    for (i, item) in items.iter().enumerate() {
                        self.check_prop(Some(item), item_schema, &format!("{path}[{i}]"), errors);
                    }
                }
            }
            Value::Object(map) => {
                let props = schema.get("properties");
                let additional = schema.get("additionalProperties");
                if props.is_some() || truthy(additional) {
                    let empty = Map::new();
                    let props = props.and_then(Value::as_object).unwrap_or(&empty);
                    self.check_object(path, props, map, additional, errors);
                }
            }
            _ => self.check_scalar(schema, &scalar_text(value), path, errors),
        }
    }

    fn check_scalar(&self, schema: &'a Value, text: &str, path: &str, errors: &mut Errors) {
        if let Some(format) = schema.get("format") {
            if let Err(msg) = self.check_format(format, text, path) {
                add_error(errors, path, &format!("invalid format - {msg}"));
                return;
            }
        }
        if let Some(pattern) = schema.get("pattern").and_then(Value::as_str) {
            if !pattern_matches(pattern, text) {
                add_error(errors, path, "value does not match the regex pattern");
                return;
            }
        }
        if let Some(msg) = broken_bound(schema, &LENGTH_BOUNDS, text.chars().count() as f64) {
            add_error(errors, path, &msg);
            return;
        }
        if is_number(text) {
            let n: f64 = text.parse().unwrap_or(0.0);
            if let Some(msg) = broken_bound(schema, &VALUE_BOUNDS, n) {
                add_error(errors, path, &msg);
                return;
            }
        }
        if let Some(options) = schema.get("enum").and_then(Value::as_array) {
            let texts: Vec<String> = options.iter().map(scalar_text).collect();
            if !texts.iter().any(|t| t == text) {
                add_error(
                    errors,
                    path,
                    &format!(
                        "value '{text}' does not have a value in the enumeration '{}'",
                        texts.join(", ")
                    ),
                );
            }
        }
    }

    /// `check_type`: returns whether the value has the declared type.
    fn check_type(
        &self,
        path: &str,
        ty: Option<&Value>,
        value: &Value,
        errors: &mut Errors,
    ) -> bool {
        let Some(ty) = ty.and_then(Value::as_str) else {
            return true;
        };
        let fail = |errors: &mut Errors, what: &str| {
            add_error(errors, path, &format!("type check ('{ty}') failed{what}"));
            false
        };
        match (ty, value) {
            ("any", _) => true,
            ("null", Value::Null) => true,
            ("null", _) => fail(errors, " - value is not null"),
            ("array", Value::Array(_)) | ("object", Value::Object(_)) => true,
            ("array" | "object", _) => fail(errors, ""),
            (_, Value::Array(_)) => fail(errors, " - got ARRAY"),
            (_, Value::Object(_)) => fail(errors, " - got HASH"),
            ("boolean", Value::Bool(_)) => true,
            (_, Value::Bool(_)) => fail(errors, " - got JSON::PP::Boolean"),
            ("string", v) => {
                if self.mode == Mode::Wire && !v.is_string() {
                    return fail(errors, &format!(" - got {v} (a JSON number)"));
                }
                true
            }
            ("boolean", v) => {
                let t = scalar_text(v);
                if t == "1" || t == "0" {
                    if self.mode == Mode::Wire && v.is_string() {
                        return fail(errors, &format!(" - got '{t}' (a JSON string)"));
                    }
                    true
                } else {
                    fail(errors, &format!(" - got '{t}'"))
                }
            }
            ("integer" | "number", v) => {
                let t = scalar_text(v);
                let numeric = if ty == "integer" {
                    is_integer(&t)
                } else {
                    is_number(&t)
                };
                if !numeric {
                    return fail(errors, &format!(" - got '{t}'"));
                }
                if self.mode == Mode::Wire && v.is_string() {
                    return fail(errors, &format!(" - got '{t}' (a JSON string)"));
                }
                true
            }
            _ => true,
        }
    }

    /// `check_object`: declared properties (missing and present), then undeclared ones.
    pub fn check_object(
        &self,
        path: &str,
        props: &'a Map<String, Value>,
        value: &Map<String, Value>,
        additional: Option<&'a Value>,
        errors: &mut Errors,
    ) {
        let join = |k: &str| {
            if path.is_empty() {
                k.to_string()
            } else {
                format!("{path}.{k}")
            }
        };
        for (k, sub) in props {
            // `name[n]` families are all optional; members are checked below.
            if k.ends_with("[n]") {
                continue;
            }
            self.check_prop(value.get(k), sub, &join(k), errors);
        }
        for (k, v) in value {
            if props.contains_key(k) {
                continue;
            }
            if let Some(sub) = family_schema(props, k) {
                self.check_prop(Some(v), sub, &join(k), errors);
                continue;
            }
            match additional {
                Some(a) if a.is_object() => self.check_prop(Some(v), a, &join(k), errors),
                Some(a) if !truthy(Some(a)) => add_error(
                    errors,
                    &join(k),
                    "property is not defined in schema and the schema does not allow additional properties",
                ),
                _ => {}
            }
        }
    }

    /// `check_format`: a property-string object, or a named format with `-list`/`-opt` suffix.
    fn check_format(&self, format: &'a Value, value: &str, path: &str) -> Result<(), String> {
        if let Some(obj) = format.as_object() {
            return self.parse_property_string(obj, value, path).map(|_| ());
        }
        let Some(name) = format.as_str() else {
            return Ok(());
        };
        if name == "regex" {
            return Ok(());
        }
        let (base, kind) = match name.rsplit_once('-') {
            Some((b, "list")) => (b, "list"),
            Some((b, "opt")) => (b, "opt"),
            _ => (name, "none"),
        };
        match kind {
            "list" => {
                for item in crate::tags::split_list(value) {
                    formats::check_named(base, item)?;
                }
                Ok(())
            }
            "opt" if value.is_empty() => Ok(()),
            _ => formats::check_named(base, value)
                .map(|_| ())
                .map_err(String::from),
        }
    }

    /// `parse_property_string`: `key=value,...` with a default key, aliases and typed values.
    pub(crate) fn parse_property_string(
        &self,
        format: &'a Map<String, Value>,
        data: &str,
        path: &str,
    ) -> Result<Map<String, Value>, String> {
        let mut res = Map::new();
        let mut default_key_used = false;
        for part in data.split(',') {
            if part.trim().is_empty() {
                continue;
            }
            match part.split_once('=') {
                Some((k, v)) if !k.is_empty() && !v.is_empty() => {
                    if res.contains_key(k) {
                        return Err(format!(
                            "duplicate key in comma-separated list property: {k}\n"
                        ));
                    }
                    let mut key = k.to_string();
                    let mut schema = format.get(k);
                    if let Some(alias) = schema.and_then(|s| s.get("alias")).and_then(Value::as_str)
                    {
                        if let Some(key_alias) = schema
                            .and_then(|s| s.get("keyAlias"))
                            .and_then(Value::as_str)
                        {
                            if res.contains_key(key_alias) {
                                return Err(format!(
                                    "key alias '{key_alias}' is already defined\n"
                                ));
                            }
                            res.insert(key_alias.to_string(), Value::String(k.to_string()));
                        }
                        key = alias.to_string();
                        schema = format.get(alias);
                    }
                    let Some(schema) = schema else {
                        return Err(format!(
                            "invalid key in comma-separated list property: {key}\n"
                        ));
                    };
                    let schema = self.resolve(schema);
                    let mut v = Value::String(v.to_string());
                    if schema.get("type").and_then(Value::as_str) == Some("boolean") {
                        if let Some(b) = parse_boolean(v.as_str().unwrap_or_default()) {
                            v = Value::String(if b { "1" } else { "0" }.into());
                        }
                    }
                    res.insert(key, v);
                }
                None => {
                    let default_key = format
                        .iter()
                        .find(|(_, s)| truthy(s.get("default_key")))
                        .map(|(k, _)| k.clone());
                    let Some(default_key) = default_key else {
                        return Err(
                            "value without key, but schema does not define a default key\n".into(),
                        );
                    };
                    if default_key_used || res.contains_key(&default_key) {
                        return Err(format!(
                            "duplicate key in comma-separated list property: {default_key}\n"
                        ));
                    }
                    default_key_used = true;
                    res.insert(default_key, Value::String(part.to_string()));
                }
                Some(_) => return Err("missing key in comma-separated list property\n".into()),
            }
        }
        // Property strings never allow undeclared keys.
        let mut errors = Errors::new();
        let strict_inner = Validator::new(self.defs, Mode::Perl);
        strict_inner.check_object(path, format, &res, Some(&Value::from(0)), &mut errors);
        if errors.is_empty() {
            Ok(res)
        } else {
            let mut msg = String::from("format error\n");
            for (k, v) in &errors {
                msg.push_str(&format!("{k}: {v}\n"));
            }
            Err(msg)
        }
    }
}

/// The schema of a `name[n]` family member (`net0` → `net[n]`), if the properties declare one.
pub fn family_schema<'a>(props: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    let digits = key.len() - key.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    if digits == 0 || digits == key.len() {
        return None;
    }
    props.get(&format!("{}[n]", &key[..key.len() - digits]))
}

/// `add_error`: several messages on one path are joined with a literal `\n`, as Perl's
/// single-quoted `'\n'` does.
pub fn add_error(errors: &mut Errors, path: &str, msg: &str) {
    let path = if path.is_empty() { "_root" } else { path };
    errors
        .entry(path.to_string())
        .and_modify(|e| {
            e.push_str("\\n");
            e.push_str(msg);
        })
        .or_insert_with(|| msg.to_string());
}

/// Perl truthiness of a schema flag (`1`, `true`, non-empty string other than `"0"`).
pub fn truthy(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(Value::Number(n)) => n.as_f64().is_some_and(|f| f != 0.0),
        Some(Value::String(s)) => !s.is_empty() && s != "0",
        Some(_) => true,
    }
}

/// The text Perl sees for a scalar JSON value.
pub fn scalar_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => if *b { "1" } else { "0" }.to_string(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// A limit a schema may set on a scalar: its key, whether a value breaks it, and Proxmox's
/// message naming the limit.
struct Bound {
    key: &'static str,
    broken: fn(f64, f64) -> bool,
    message: fn(f64) -> String,
}

impl Bound {
    /// A limit a value must not exceed.
    const fn upper(key: &'static str, message: fn(f64) -> String) -> Self {
        Self {
            key,
            broken: |value, limit| value > limit,
            message,
        }
    }

    /// A limit a value must not fall below.
    const fn lower(key: &'static str, message: fn(f64) -> String) -> Self {
        Self {
            key,
            broken: |value, limit| value < limit,
            message,
        }
    }
}

/// The string length limits, in the order Proxmox checks them.
const LENGTH_BOUNDS: [Bound; 2] = [
    Bound::upper("maxLength", |max| {
        format!("value may only be {max} characters long")
    }),
    Bound::lower("minLength", |min| {
        format!("value must be at least {min} characters long")
    }),
];

/// The numeric value limits, in the order Proxmox checks them.
const VALUE_BOUNDS: [Bound; 2] = [
    Bound::upper("maximum", |max| {
        format!("value must have a maximum value of {max}")
    }),
    Bound::lower("minimum", |min| {
        format!("value must have a minimum value of {min}")
    }),
];

/// The message of the first of `bounds` that `schema` sets and `value` breaks.
fn broken_bound(schema: &Value, bounds: &[Bound], value: f64) -> Option<String> {
    bounds.iter().find_map(|b| {
        let limit = schema.get(b.key).and_then(as_f64)?;
        (b.broken)(value, limit).then(|| (b.message)(limit))
    })
}

fn as_f64(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

/// `^[+-]?\d+$`.
fn is_integer(t: &str) -> bool {
    let d = t.strip_prefix(['+', '-']).unwrap_or(t);
    !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit())
}

/// `^[+-]?(\d+\.\d+|\d+\.|\.\d+|\d+)([eE][+-]?\d+)?$`.
fn is_number(t: &str) -> bool {
    let t = t.strip_prefix(['+', '-']).unwrap_or(t);
    let (mantissa, exp) = match t.find(['e', 'E']) {
        Some(i) => (&t[..i], Some(&t[i + 1..])),
        None => (t, None),
    };
    if let Some(e) = exp {
        if !is_integer(e) {
            return false;
        }
    }
    let (a, b) = match mantissa.split_once('.') {
        Some((a, b)) => (a, Some(b)),
        None => (mantissa, None),
    };
    let digits = |s: &str| s.bytes().all(|c| c.is_ascii_digit());
    match b {
        None => !a.is_empty() && digits(a),
        Some(b) => (!a.is_empty() || !b.is_empty()) && digits(a) && digits(b),
    }
}

/// `parse_boolean`: `1|on|yes|true` and `0|off|no|false`, case-insensitive.
pub fn parse_boolean(v: &str) -> Option<bool> {
    match v.to_ascii_lowercase().as_str() {
        "1" | "on" | "yes" | "true" => Some(true),
        "0" | "off" | "no" | "false" => Some(false),
        _ => None,
    }
}

/// Matches the few `pattern`s the endpoints we serve use; unknown patterns pass.
fn pattern_matches(pattern: &str, text: &str) -> bool {
    match pattern {
        // sshkeys-like and ID patterns appear only on parameters the simulator treats as opaque.
        "[A-Za-z][A-Za-z0-9\\.\\-_]+" => {
            let b = text.as_bytes();
            b.len() >= 2
                && b[0].is_ascii_alphabetic()
                && b.iter()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'-' | b'_'))
        }
        // Disk sizes of `PUT .../resize`: an optional `+`, digits, a fraction, a binary unit.
        "\\+?\\d+(\\.\\d+)?[KMGT]?" => {
            let rest = text.strip_prefix('+').unwrap_or(text);
            let number = rest.strip_suffix(['K', 'M', 'G', 'T']).unwrap_or(rest);
            let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
            match number.split_once('.') {
                Some((whole, fraction)) => digits(whole) && digits(fraction),
                None => digits(number),
            }
        }
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests may panic

    use serde_json::json;

    use super::*;

    fn check(schema: Value, value: Value, mode: Mode) -> Errors {
        let mut errors = Errors::new();
        Validator::new(None, mode).check_prop(Some(&value), &schema, "", &mut errors);
        errors
    }

    #[test]
    fn parameters_follow_perl_rules() {
        let schema = json!({"additionalProperties": 0, "properties": {
            "vmid": {"type": "integer", "format": "pve-vmid", "minimum": 100},
            "online": {"type": "boolean", "optional": 1},
            "tags": {"type": "string", "format": "pve-tag-list", "optional": 1},
            "net[n]": {"type": "string", "optional": 1, "format": {
                "model": {"type": "string", "default_key": 1},
                "bridge": {"type": "string", "optional": 1},
                "firewall": {"type": "boolean", "optional": 1},
                "virtio": {"alias": "macaddr", "keyAlias": "model"},
                "macaddr": {"type": "string", "optional": 1, "format": "mac-addr"}}}}});
        let ok = check(
            schema.clone(),
            json!({"vmid": "100", "online": "1", "tags": "a;b", "net0": "virtio=BC:24:11:00:00:01,bridge=vmbr0,firewall=yes"}),
            Mode::Perl,
        );
        assert!(ok.is_empty(), "{ok:?}");
        let bad = check(
            schema,
            json!({"vmid": "99", "online": "true", "tags": "flxp/affinity=web", "extra": "1", "net1": "virtio=zz,bogus=1"}),
            Mode::Perl,
        );
        assert_eq!(bad["online"], "type check ('boolean') failed - got 'true'");
        assert_eq!(
            bad["vmid"],
            "invalid format - value does not look like a valid VM ID\n"
        );
        assert_eq!(bad["tags"], "invalid format - invalid characters in tag\n");
        assert_eq!(
            bad["extra"],
            "property is not defined in schema and the schema does not allow additional properties"
        );
        assert!(
            bad["net1"].starts_with(
                "invalid format - invalid key in comma-separated list property: bogus"
            ),
            "{}",
            bad["net1"]
        );
        let missing = check(
            json!({"properties": {"vmid": {"type": "integer"}}}),
            json!({}),
            Mode::Perl,
        );
        assert_eq!(
            missing["vmid"],
            "property is missing and it is not optional"
        );
    }

    #[test]
    fn wire_mode_demands_json_types() {
        let schema = json!({"type": "array", "items": {"type": "object", "properties": {
            "vmid": {"type": "integer"}, "name": {"type": "string", "optional": 1},
            "template": {"type": "boolean", "optional": 1}, "cpu": {"type": "number", "optional": 1}}}});
        assert!(
            check(
                schema.clone(),
                json!([{"vmid": 100, "name": "a", "template": 0, "cpu": 0.5}]),
                Mode::Wire
            )
            .is_empty()
        );
        let e = check(
            schema.clone(),
            json!([{"vmid": "100", "name": 5, "template": "1", "cpu": "x"}]),
            Mode::Wire,
        );
        assert_eq!(e.len(), 4, "{e:?}");
        assert!(check(schema, json!([{"vmid": "100"}]), Mode::Perl).is_empty());
    }

    #[test]
    fn resize_sizes_match_the_anchored_pattern() {
        let s = json!({"type": "string", "pattern": "\\+?\\d+(\\.\\d+)?[KMGT]?"});
        for ok in ["64G", "+32G", "1.5T", "1000", "+0", "0.25K"] {
            assert!(check(s.clone(), json!(ok), Mode::Perl).is_empty(), "{ok}");
        }
        for bad in [
            "64g", "64GB", "-1G", "", "+", "G", "1.G", ".5G", "1 G", "x64G", "64G+",
        ] {
            let e = check(s.clone(), json!(bad), Mode::Perl);
            assert_eq!(
                e["_root"], "value does not match the regex pattern",
                "{bad}"
            );
        }
    }

    #[test]
    fn numbers_ranges_and_enums() {
        let s = json!({"type": "integer", "minimum": 1, "maximum": 10, "enum": [1, 2, 3]});
        assert_eq!(
            check(s.clone(), json!(11), Mode::Perl)["_root"],
            "value must have a maximum value of 10"
        );
        assert_eq!(
            check(s.clone(), json!(0), Mode::Perl)["_root"],
            "value must have a minimum value of 1"
        );
        assert_eq!(
            check(s, json!(5), Mode::Perl)["_root"],
            "value '5' does not have a value in the enumeration '1, 2, 3'"
        );
        assert!(is_number("1.5e3") && is_number(".5") && is_number("5.") && !is_number("."));
    }

    #[test]
    fn property_strings_use_default_key_and_types() {
        let format = json!({"current": {"type": "integer", "default_key": 1, "minimum": 16}});
        let v = Validator::new(None, Mode::Perl);
        let parsed = v
            .parse_property_string(format.as_object().unwrap(), "4096", "memory")
            .unwrap();
        assert_eq!(parsed["current"], "4096");
        let err = v
            .parse_property_string(format.as_object().unwrap(), "current=8", "memory")
            .unwrap_err();
        assert_eq!(
            err,
            "format error\nmemory.current: value must have a minimum value of 16\n"
        );
    }
}

//! The Proxmox API schema the simulator serves by: the extracted `pve-api-schema.json` (kept in
//! `tests/fixtures/`, so the contract tests read the very same file) plus a few endpoints it lacks
//! (`extra.json`: node config and version, node power and Wake-on-LAN, pools, permissions, LXC
//! power and rrddata).
//!
//! Request parameters are verified against it exactly as Proxmox does, so a bad parameter gets
//! Proxmox's 400 with the same per-parameter texts; handlers can then trust what they read.

mod formats;
mod validate;

use std::sync::OnceLock;

use serde_json::{Map, Value};

use crate::error::Error;

pub use formats::{is_dns_label, is_storage_id, is_vmid, parse_size};
pub use validate::{Errors, Mode, Validator, family_schema, parse_boolean, scalar_text};

static SCHEMA_JSON: &str = include_str!("../../tests/fixtures/pve-api-schema.json");
static EXTRA_JSON: &str = include_str!("extra.json");

/// The endpoint schemas, keyed `"METHOD /path/{param}"`, with the shared `defs`.
#[derive(Debug)]
pub struct ApiSchema {
    endpoints: Map<String, Value>,
    defs: Map<String, Value>,
    supplements: Value,
}

impl ApiSchema {
    /// The schema compiled into the simulator, or why it cannot be read.
    ///
    /// [`crate::Sim::new`] calls this and refuses to start on an error, so a simulator never
    /// serves without validating requests.
    pub fn load() -> Result<&'static ApiSchema, Error> {
        static SCHEMA: OnceLock<Result<ApiSchema, String>> = OnceLock::new();
        SCHEMA
            .get_or_init(ApiSchema::parse)
            .as_ref()
            .map_err(|message| Error::Schema(message.clone()))
    }

    /// The schema compiled into the simulator, for handlers of a simulator that started (and so
    /// loaded it, see [`ApiSchema::load`]).
    pub fn embedded() -> &'static ApiSchema {
        static EMPTY: OnceLock<ApiSchema> = OnceLock::new();
        // Only reachable without a schema outside a started simulator (a test reading it),
        // where the contract tests fail on the load error itself.
        ApiSchema::load().unwrap_or_else(|_| {
            EMPTY.get_or_init(|| ApiSchema {
                endpoints: Map::new(),
                defs: Map::new(),
                supplements: Value::Null,
            })
        })
    }

    /// Reads both documents; every part the simulator serves by must be there.
    fn parse() -> Result<ApiSchema, String> {
        let doc: Value =
            serde_json::from_str(SCHEMA_JSON).map_err(|e| format!("pve-api-schema.json: {e}"))?;
        let part = |key: &str| {
            doc.get(key)
                .and_then(Value::as_object)
                .cloned()
                .ok_or_else(|| format!("pve-api-schema.json has no object `{key}`"))
        };
        let mut endpoints = part("endpoints")?;
        let defs = part("defs")?;
        let supplements = doc
            .get("supplements")
            .cloned()
            .ok_or("pve-api-schema.json has no `supplements`")?;
        let extra: Map<String, Value> =
            serde_json::from_str(EXTRA_JSON).map_err(|e| format!("extra.json: {e}"))?;
        for (k, v) in extra {
            endpoints.entry(k).or_insert(v);
        }
        Ok(ApiSchema {
            endpoints,
            defs,
            supplements,
        })
    }

    /// The method entry of `"GET /cluster/resources"`-style key.
    pub fn endpoint(&self, key: &str) -> Option<&Value> {
        self.endpoints.get(key)
    }

    /// Every endpoint key, sorted.
    pub fn endpoint_keys(&self) -> impl Iterator<Item = &String> {
        self.endpoints.keys()
    }

    /// The `supplements` section (formats, wire notes, shapes the schema lacks).
    pub fn supplements(&self) -> &Value {
        &self.supplements
    }

    /// A validator that resolves this schema's `$ref`s.
    pub fn validator(&self, mode: Mode) -> Validator<'_> {
        Validator::new(Some(&self.defs), mode)
    }

    /// Verifies request parameters as Proxmox does (`PVE::JSONSchema::validate`).
    pub fn check_params(&self, endpoint: &Value, params: &Map<String, Value>) -> Errors {
        let mut errors = Errors::new();
        if let Some(schema) = endpoint.get("parameters") {
            self.validator(Mode::Perl).check_prop(
                Some(&Value::Object(params.clone())),
                schema,
                "",
                &mut errors,
            );
        }
        errors
    }

    /// Validates a response `data` value against the endpoint's `returns`.
    pub fn check_returns(&self, endpoint: &Value, data: &Value, mode: Mode) -> Errors {
        let mut errors = Errors::new();
        if let Some(schema) = endpoint.get("returns") {
            self.validator(mode)
                .check_prop(Some(data), schema, "", &mut errors);
        }
        errors
    }

    /// The declared JSON type of a guest config key in `GET .../config` (`cores` → `integer`).
    pub fn config_key_type(&self, endpoint_key: &str, key: &str) -> Option<&str> {
        let props = self
            .endpoint(endpoint_key)?
            .get("returns")?
            .get("properties")?
            .as_object()?;
        let schema = props.get(key).or_else(|| family_schema(props, key))?;
        let v = self.validator(Mode::Perl);
        v.resolve(schema).get("type")?.as_str()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_schema_has_the_endpoints_we_serve() {
        // `load`, not `embedded`: a schema that fails to read must fail here, not serve empty.
        let s = match ApiSchema::load() {
            Ok(s) => s,
            Err(e) => panic!("{e}"),
        };
        assert!(!s.defs.is_empty() && s.supplements.is_object());
        for key in [
            "GET /cluster/resources",
            "POST /nodes/{node}/qemu/{vmid}/migrate",
            "GET /nodes/{node}/config",
            "GET /pools/{poolid}",
        ] {
            assert!(s.endpoint(key).is_some(), "{key}");
        }
        assert_eq!(
            s.config_key_type("GET /nodes/{node}/qemu/{vmid}/config", "cores"),
            Some("integer")
        );
        assert_eq!(
            s.config_key_type("GET /nodes/{node}/qemu/{vmid}/config", "net3"),
            Some("string")
        );
    }
}

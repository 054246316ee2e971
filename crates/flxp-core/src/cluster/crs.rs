//! Proxmox's own cluster resource scheduler settings (`crs` in `/cluster/options`).
//!
//! flxp reads them to coexist: when Proxmox's HA auto-rebalance is on, HA guests are its to move.

use serde::Serialize;

use crate::warning::Warning;

/// Proxmox's CRS mode (`crs: ha=...`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum CrsMode {
    /// Count of services per node.
    #[default]
    Basic,
    /// TOPSIS over configured guest sizes.
    Static,
    /// TOPSIS over measured usage.
    Dynamic,
}

/// The `crs` datacenter option, read leniently.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Crs {
    /// Scheduler mode for HA.
    pub mode: CrsMode,
    /// `ha-rebalance-on-start`.
    pub rebalance_on_start: bool,
    /// `ha-auto-rebalance`: Proxmox moves HA guests itself.
    pub auto_rebalance: bool,
}

impl Crs {
    /// Reads `crs` from `/cluster/options`: a property string (`ha=static,ha-auto-rebalance=1`)
    /// or an object. Unknown values become warnings.
    pub fn from_options(
        options: &serde_json::Map<String, serde_json::Value>,
        warnings: &mut Vec<Warning>,
    ) -> Self {
        let mut crs = Self::default();
        let Some(value) = options.get("crs") else {
            return crs;
        };
        let pairs: Vec<(String, String)> = match value {
            serde_json::Value::String(s) => s
                .split(',')
                .filter(|p| !p.trim().is_empty())
                .map(|p| match p.split_once('=') {
                    Some((k, v)) => (k.trim().to_owned(), v.trim().to_owned()),
                    // A bare value is the default key `ha`.
                    None => ("ha".to_owned(), p.trim().to_owned()),
                })
                .collect(),
            serde_json::Value::Object(m) => m
                .iter()
                .map(|(k, v)| {
                    let v = match v {
                        serde_json::Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    (k.clone(), v)
                })
                .collect(),
            _ => {
                warnings.push(Warning::general(
                    "cluster option crs is neither a string nor an object; ignored",
                ));
                return crs;
            }
        };
        for (k, v) in pairs {
            let truthy = matches!(v.as_str(), "1" | "true" | "yes" | "on");
            match k.as_str() {
                "ha" => {
                    crs.mode = match v.as_str() {
                        "basic" => CrsMode::Basic,
                        "static" => CrsMode::Static,
                        "dynamic" => CrsMode::Dynamic,
                        other => {
                            warnings.push(Warning::general(format!(
                                "cluster option crs: unknown ha mode {other:?}; read as basic"
                            )));
                            CrsMode::Basic
                        }
                    }
                }
                "ha-rebalance-on-start" => crs.rebalance_on_start = truthy,
                "ha-auto-rebalance" => crs.auto_rebalance = truthy,
                _ => {}
            }
        }
        crs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(v: serde_json::Value) -> Crs {
        let mut m = serde_json::Map::new();
        m.insert("crs".into(), v);
        Crs::from_options(&m, &mut Vec::new())
    }

    #[test]
    fn property_string_and_object_forms_agree() {
        let a = read(serde_json::json!("ha=dynamic,ha-auto-rebalance=1"));
        let b = read(serde_json::json!({"ha": "dynamic", "ha-auto-rebalance": 1}));
        assert_eq!(a, b);
        assert_eq!(a.mode, CrsMode::Dynamic);
        assert!(a.auto_rebalance);
        assert_eq!(read(serde_json::json!("static")).mode, CrsMode::Static);
    }
}

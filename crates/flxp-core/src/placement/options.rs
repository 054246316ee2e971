//! Placement options: reserves, overcommit caps and the policy.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::cluster::Node;
use crate::{Error, Result};

/// Knobs of the filters and the default policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "kebab-case", deny_unknown_fields)]
pub struct PlacementOptions {
    /// Memory kept free on every node, in bytes.
    pub reserve_bytes: u64,
    /// Per-node reserve overrides, in bytes, by node name.
    pub node_reserve_bytes: BTreeMap<String, u64>,
    /// Cap on committed memory (sum of `maxmem` of running guests) as a ratio of node memory;
    /// `None` means no cap.
    pub max_memory_commit: Option<f64>,
    /// Cap on committed vCPUs as a ratio of node CPUs; `None` means no cap.
    pub max_vcpu_ratio: Option<f64>,
    /// The default policy's name.
    pub policy: String,
}

impl Default for PlacementOptions {
    fn default() -> Self {
        Self {
            reserve_bytes: 0,
            node_reserve_bytes: BTreeMap::new(),
            max_memory_commit: None,
            max_vcpu_ratio: None,
            policy: "free-memory".into(),
        }
    }
}

impl PlacementOptions {
    /// Memory kept free on a node.
    pub fn reserve_for(&self, node: &Node) -> u64 {
        self.node_reserve_bytes
            .get(&node.name)
            .copied()
            .unwrap_or(self.reserve_bytes)
    }

    /// Checks ranges; the error names the option.
    pub fn validate(&self) -> Result<()> {
        for (name, v) in [
            ("max-memory-commit", self.max_memory_commit),
            ("max-vcpu-ratio", self.max_vcpu_ratio),
        ] {
            if let Some(v) = v {
                if !v.is_finite() || v <= 0.0 {
                    return Err(Error::Option {
                        name: name.into(),
                        message: format!("must be a positive ratio (e.g. 1.5), got {v}"),
                    });
                }
            }
        }
        Ok(())
    }
}

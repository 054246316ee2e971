//! Placement options: reserves, overcommit caps and the policy.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Filter;
use super::registry::FILTERS;
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
    /// Filters registered besides the built-in ones ([`Placer::with_filter`]), run after them.
    /// Set in code, never in the config file.
    ///
    /// [`Placer::with_filter`]: super::Placer::with_filter
    #[serde(skip)]
    pub extra_filters: ExtraFilters,
}

impl Default for PlacementOptions {
    fn default() -> Self {
        Self {
            reserve_bytes: 0,
            node_reserve_bytes: BTreeMap::new(),
            max_memory_commit: None,
            max_vcpu_ratio: None,
            policy: "free-memory".into(),
            extra_filters: ExtraFilters::default(),
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

/// Filters a pipeline runs besides the built-in ones, in registration order, each under a name
/// of its own.
#[derive(Clone, Default)]
pub struct ExtraFilters(Vec<&'static dyn Filter>);

impl ExtraFilters {
    /// Adds a filter after the others; its name must be new (not a built-in's, not a registered
    /// one's), since explanations and `--explain` tell filters apart by name.
    pub fn push(&mut self, filter: &'static dyn Filter) -> Result<()> {
        let name = filter.name();
        if FILTERS.iter().chain(&self.0).any(|f| f.name() == name) {
            return Err(Error::Option {
                name: format!("filters.{name}"),
                message: "a filter of this name is registered already".into(),
            });
        }
        self.0.push(filter);
        Ok(())
    }

    /// The registered filters, in order.
    pub fn as_slice(&self) -> &[&'static dyn Filter] {
        &self.0
    }
}

/// The filters' names.
impl std::fmt::Debug for ExtraFilters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|x| x.name()))
            .finish()
    }
}

/// The same filters: the same names in the same order (a name is registered once).
impl PartialEq for ExtraFilters {
    fn eq(&self, other: &Self) -> bool {
        self.0.len() == other.0.len()
            && self
                .0
                .iter()
                .zip(&other.0)
                .all(|(a, b)| a.name() == b.name())
    }
}

//! Policies: named sets of scorers with weights.
//!
//! Every built-in policy also carries the soft-rule scorers at `SOFT_RULE_WEIGHT`, ten times a
//! resource scorer's weight: a preference then decides unless it cannot be met, which is how
//! Proxmox HA treats priority classes and how users read "prefer".

use std::collections::BTreeMap;

use serde::Serialize;

use super::registry;
use super::scorers::{
    free_cpu, free_memory, least_loaded, pack, prefer_affinity, prefer_no, prefer_node, pve_topsis,
    spread,
};
use crate::{Error, Result};

/// Weight of each soft-rule scorer in built-in policies.
pub const SOFT_RULE_WEIGHT: f64 = 10.0;

/// The soft-rule scorers every policy carries at [`SOFT_RULE_WEIGHT`] unless it sets them.
pub const SOFT_RULES: [&str; 4] = [
    prefer_node::NAME,
    prefer_affinity::NAME,
    prefer_affinity::ANTI_NAME,
    prefer_no::NAME,
];

/// A named set of weighted scorers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Policy {
    /// Its name (`free-memory`, `pve-static`, or a configured one).
    pub name: String,
    /// Scorer name → weight, in name order; weight 0 disables a scorer.
    pub weights: BTreeMap<String, f64>,
}

/// Built-in policies: name, main scorer, one line for users.
pub const BUILTIN: &[(&str, &str, &str)] = &[
    (
        "free-memory",
        free_memory::NAME,
        "most available memory wins (default)",
    ),
    ("free-cpu", free_cpu::NAME, "most idle CPU wins"),
    (
        "least-loaded",
        least_loaded::NAME,
        "lowest memory share after placement wins (evacuation's default)",
    ),
    ("spread", spread::NAME, "fewest running guests wins"),
    (
        "pack",
        pack::NAME,
        "fullest node that fits wins (consolidation)",
    ),
    (
        "pve-static",
        pve_topsis::STATIC_NAME,
        "Proxmox CRS static: TOPSIS over configured sizes",
    ),
    (
        "pve-dynamic",
        pve_topsis::DYNAMIC_NAME,
        "Proxmox CRS dynamic: TOPSIS over measured usage",
    ),
];

impl Policy {
    /// A built-in policy by name.
    pub fn builtin(name: &str) -> Option<Self> {
        let (_, main, _) = BUILTIN.iter().find(|(n, _, _)| *n == name)?;
        Some(Self::with_soft_rules(
            name,
            [(main.to_string(), 1.0)].into(),
        ))
    }

    /// Names of the built-in policies.
    pub fn builtin_names() -> Vec<&'static str> {
        BUILTIN.iter().map(|(n, _, _)| *n).collect()
    }

    /// A configured policy; soft-rule scorers get their default weight unless named. Every
    /// scorer name must be registered and every weight finite and not negative.
    pub fn custom(name: &str, weights: BTreeMap<String, f64>) -> Result<Self> {
        Self::custom_with(name, weights, &[])
    }

    /// [`Policy::custom`] where the named score plugins count as scorers too.
    pub fn custom_with(
        name: &str,
        weights: BTreeMap<String, f64>,
        plugins: &[&str],
    ) -> Result<Self> {
        for (scorer, w) in &weights {
            if registry::scorer(scorer).is_none() && !plugins.contains(&scorer.as_str()) {
                let known: Vec<&str> = registry::SCORERS
                    .iter()
                    .map(|s| s.name)
                    .chain(plugins.iter().copied())
                    .collect();
                return Err(Error::Option {
                    name: format!("policies.{name}.{scorer}"),
                    message: format!("unknown scorer; known: {}", known.join(", ")),
                });
            }
            if !w.is_finite() || *w < 0.0 {
                return Err(Error::Option {
                    name: format!("policies.{name}.{scorer}"),
                    message: format!("weight must be a number ≥ 0, got {w}"),
                });
            }
        }
        if weights.values().all(|w| *w == 0.0) {
            return Err(Error::Option {
                name: format!("policies.{name}"),
                message: "needs at least one scorer with a weight above 0".into(),
            });
        }
        Ok(Self::with_soft_rules(name, weights))
    }

    fn with_soft_rules(name: &str, mut weights: BTreeMap<String, f64>) -> Self {
        for s in SOFT_RULES {
            weights.entry(s.to_owned()).or_insert(SOFT_RULE_WEIGHT);
        }
        Self {
            name: name.to_owned(),
            weights,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_carry_their_scorer_and_the_soft_rules() {
        let p = Policy::builtin("free-memory").unwrap();
        assert_eq!(p.weights["free-memory"], 1.0);
        assert_eq!(p.weights["prefer-node"], SOFT_RULE_WEIGHT);
        assert!(Policy::builtin("nope").is_none());
    }

    #[test]
    fn custom_policies_name_unknown_scorers_and_bad_weights() {
        let e = Policy::custom("mine", [("free-mem".to_string(), 1.0)].into())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("policies.mine.free-mem") && e.contains("unknown scorer"),
            "{e}"
        );
        let e = Policy::custom("mine", [("spread".to_string(), -1.0)].into())
            .unwrap_err()
            .to_string();
        assert!(e.contains("≥ 0"), "{e}");
        let p = Policy::custom(
            "mine",
            [("spread".to_string(), 2.0), ("prefer-no".to_string(), 0.0)].into(),
        )
        .unwrap();
        assert_eq!(p.weights["prefer-no"], 0.0);
        assert_eq!(p.weights["prefer-node"], SOFT_RULE_WEIGHT);
    }
}

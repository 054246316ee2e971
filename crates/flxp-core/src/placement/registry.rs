//! The one list of filters and scorers. A new strategy is one file plus one line here.

use super::filters::{
    affinity, anti_affinity, cpu, maintenance, memory, node_rules, online, selector, taints,
};
use super::scorers::{
    free_cpu, free_memory, least_loaded, pack, prefer_affinity, prefer_no, prefer_node, pve_topsis,
    spread,
};
use super::{Filter, Scorer};

/// A registered filter: name, what it checks, constructor.
pub struct FilterEntry {
    /// Stable name.
    pub name: &'static str,
    /// One line for users.
    pub doc: &'static str,
    /// Builds it.
    pub make: fn() -> Box<dyn Filter>,
}

/// A registered scorer: name, what it prefers, constructor.
pub struct ScorerEntry {
    /// Stable name.
    pub name: &'static str,
    /// One line for users.
    pub doc: &'static str,
    /// Builds it.
    pub make: fn() -> Box<dyn Scorer>,
}

/// Every filter, in the order they run and are explained.
pub const FILTERS: &[FilterEntry] = &[
    FilterEntry {
        name: online::NAME,
        doc: "the node reports online",
        make: || Box::new(online::Online),
    },
    FilterEntry {
        name: maintenance::NAME,
        doc: "the node is not in maintenance",
        make: || Box::new(maintenance::NotInMaintenance),
    },
    FilterEntry {
        name: memory::NAME,
        doc: "memory fits: total − used − reserve, and the optional commit cap",
        make: || Box::new(memory::MemoryFits),
    },
    FilterEntry {
        name: cpu::NAME,
        doc: "vCPUs not above the node's CPUs, and the optional overcommit cap",
        make: || Box::new(cpu::CpuFits),
    },
    FilterEntry {
        name: node_rules::NAME,
        doc: "flxp.node tags, ProxLB pins and strict HA node-affinity allow the node",
        make: || Box::new(node_rules::NodeRules),
    },
    FilterEntry {
        name: selector::NAME,
        doc: "the node carries every flxp.select label",
        make: || Box::new(selector::Selector),
    },
    FilterEntry {
        name: taints::NAME,
        doc: "every flxp.taint of the node is tolerated",
        make: || Box::new(taints::Taints),
    },
    FilterEntry {
        name: affinity::NAME,
        doc: "hard affinity groups run on this node (or nowhere yet)",
        make: || Box::new(affinity::Affinity),
    },
    FilterEntry {
        name: anti_affinity::NAME,
        doc: "no member of a hard anti-affinity group runs here",
        make: || Box::new(anti_affinity::AntiAffinity),
    },
];

/// Every scorer.
pub const SCORERS: &[ScorerEntry] = &[
    ScorerEntry {
        name: free_memory::NAME,
        doc: "most available memory after placement",
        make: || Box::new(free_memory::FreeMemory),
    },
    ScorerEntry {
        name: free_cpu::NAME,
        doc: "most idle CPU cores after placement",
        make: || Box::new(free_cpu::FreeCpu),
    },
    ScorerEntry {
        name: least_loaded::NAME,
        doc: "lowest memory share after placement (evens out load percentages)",
        make: || Box::new(least_loaded::LeastLoaded),
    },
    ScorerEntry {
        name: spread::NAME,
        doc: "fewest running guests",
        make: || Box::new(spread::Spread),
    },
    ScorerEntry {
        name: pack::NAME,
        doc: "most allocated memory that still fits (consolidation)",
        make: || Box::new(pack::Pack),
    },
    ScorerEntry {
        name: pve_topsis::STATIC_NAME,
        doc: "Proxmox's TOPSIS start scoring over configured guest sizes (CRS static)",
        make: || Box::new(pve_topsis::PveStatic),
    },
    ScorerEntry {
        name: pve_topsis::DYNAMIC_NAME,
        doc: "Proxmox's TOPSIS start scoring over measured usage plus starting guests (CRS dynamic)",
        make: || Box::new(pve_topsis::PveDynamic),
    },
    ScorerEntry {
        name: prefer_node::NAME,
        doc: "flxp.prefer-node tags and HA node-affinity priority classes",
        make: || Box::new(prefer_node::PreferNode),
    },
    ScorerEntry {
        name: prefer_affinity::NAME,
        doc: "nodes holding members of soft affinity groups",
        make: || Box::new(prefer_affinity::PreferAffinity),
    },
    ScorerEntry {
        name: prefer_affinity::ANTI_NAME,
        doc: "nodes without members of soft anti-affinity groups",
        make: || Box::new(prefer_affinity::PreferAntiAffinity),
    },
    ScorerEntry {
        name: prefer_no::NAME,
        doc: "nodes without untolerated flxp.prefer-no taints",
        make: || Box::new(prefer_no::PreferNo),
    },
];

/// The registered scorer of a name.
pub fn scorer(name: &str) -> Option<&'static ScorerEntry> {
    SCORERS.iter().find(|s| s.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_documented_and_match_the_implementations() {
        let mut names: Vec<&str> = FILTERS
            .iter()
            .map(|f| f.name)
            .chain(SCORERS.iter().map(|s| s.name))
            .collect();
        let n = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), n, "duplicate registration");
        for f in FILTERS {
            assert!(!f.doc.is_empty());
            assert_eq!((f.make)().name(), f.name);
        }
        for s in SCORERS {
            assert!(!s.doc.is_empty());
            assert_eq!((s.make)().name(), s.name);
        }
    }
}

//! The one list of filters and scorers. A new filter is one file plus its entry here; a new
//! scorer is one file plus one line in `scorers/mod.rs`.

use super::filters::{
    affinity, anti_affinity, cpu, maintenance, memory, node_rules, online, selector, storage,
    taints,
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
        name: storage::NAME,
        doc: "the storages of the guest's local disks exist here with room for them",
        make: || Box::new(storage::StorageFits),
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

/// Every scorer (listed in `scorers/mod.rs`, next to their modules).
pub const SCORERS: &[ScorerEntry] = super::scorers::ALL;

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

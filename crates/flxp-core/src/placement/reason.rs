//! Why a node cannot take the subject, with the numbers, in user words.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

use crate::constraints::allows_only;
use crate::units::{fmt_bytes, fmt_bytes_apart, fmt_cores_apart};

/// One failed filter on one node.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Reason {
    /// The node is not online.
    NotOnline {
        /// Its status word.
        status: String,
    },
    /// The node is online but Proxmox HA does not count it as such (fence, unknown, gone).
    HaNotOnline {
        /// Its HA node state.
        state: String,
    },
    /// The node is being emptied.
    Maintenance {
        /// Where the maintenance comes from.
        sources: Vec<String>,
    },
    /// The node is one the plan frees (a consolidation): it takes nothing, though it is not in
    /// maintenance.
    BeingFreed,
    /// The subject is already on this node.
    CurrentNode,
    /// Not enough available memory.
    InsufficientMemory {
        /// Bytes needed.
        need: u64,
        /// Bytes available (total − used − reserve).
        available: u64,
        /// Node total.
        total: u64,
        /// Used now.
        used: u64,
        /// Kept in reserve.
        reserve: u64,
    },
    /// The committed-memory cap would be exceeded.
    MemoryCommitCap {
        /// Committed after placement, in bytes.
        committed: u64,
        /// The cap in bytes.
        cap: u64,
        /// The configured ratio.
        ratio: f64,
    },
    /// More vCPUs than the node has CPUs.
    TooManyCores {
        /// vCPUs wanted.
        need: f64,
        /// Node CPUs.
        have: f64,
    },
    /// The vCPU overcommit cap would be exceeded.
    VcpuCap {
        /// Committed vCPUs after placement.
        committed: f64,
        /// The cap in vCPUs.
        cap: f64,
        /// The configured ratio.
        ratio: f64,
    },
    /// Hard node rules do not allow the node.
    NodeRules {
        /// The refusing rules with the nodes they allow.
        rules: Vec<(String, Vec<String>)>,
    },
    /// The node lacks required labels.
    MissingLabels {
        /// Labels the node lacks.
        labels: Vec<String>,
    },
    /// The node carries taints the subject does not tolerate.
    Tainted {
        /// Untolerated taints.
        taints: Vec<String>,
    },
    /// A hard affinity group's running members are on another node.
    AffinityElsewhere {
        /// Group name.
        group: String,
        /// The node the group is on.
        node: String,
    },
    /// The node lacks a storage the subject's local disks are on (they keep their storage id).
    StorageMissing {
        /// Storage id.
        storage: String,
        /// What is placed (`guest 104 (db1)`).
        subject: String,
    },
    /// A storage of the node lacks room for the subject's local disks.
    StorageFull {
        /// Storage id.
        storage: String,
        /// The node.
        node: String,
        /// Free bytes there, after the moves planned before.
        free: u64,
        /// Bytes of the subject's local disks on that storage.
        need: u64,
        /// What is placed (`guest 104 (db1)`).
        subject: String,
    },
    /// A hard anti-affinity group already has running members here.
    AntiAffinity {
        /// Group name.
        group: String,
        /// Members already on the node.
        vmids: Vec<u32>,
    },
    /// A filter that is not built in refuses the node: every such filter reports through this
    /// one variant, so adding a filter never adds one. Reads as its `message`.
    Custom {
        /// The filter's name.
        filter: String,
        /// Why, as a stable kebab-case word for programs (`name-ends-in-3`).
        code: String,
        /// Why, in user words, with the numbers.
        message: String,
        /// The numbers behind it, by name (may be empty).
        figures: BTreeMap<String, f64>,
    },
}

impl Reason {
    /// A refusal by a filter that is not built in, without figures ([`Reason::with_figure`]
    /// adds them).
    pub fn custom(filter: &str, code: &str, message: impl Into<String>) -> Self {
        Self::Custom {
            filter: filter.to_owned(),
            code: code.to_owned(),
            message: message.into(),
            figures: BTreeMap::new(),
        }
    }

    /// With one more figure of a [`Reason::Custom`]; other reasons carry theirs in their fields
    /// and stay as they are.
    pub fn with_figure(mut self, name: &str, value: f64) -> Self {
        if let Self::Custom { figures, .. } = &mut self {
            figures.insert(name.to_owned(), value);
        }
        self
    }

    /// Whether it reads on its own in a list of failed filters, without the filter's name and
    /// an example node: `n5: being freed by this plan`, not `maintenance (...)`.
    pub fn reads_alone(&self) -> bool {
        matches!(self, Self::BeingFreed)
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotOnline { status } => write!(f, "node is {status}"),
            Self::HaNotOnline { state } => write!(f, "node's HA state is {state}, not online"),
            Self::Maintenance { sources } => {
                write!(f, "node is in maintenance ({})", sources.join(", "))
            }
            Self::BeingFreed => f.write_str("being freed by this plan"),
            Self::CurrentNode => f.write_str("already there"),
            Self::InsufficientMemory {
                need,
                available,
                total,
                used,
                reserve,
            } => {
                let (need, available) = fmt_bytes_apart(*need, *available);
                write!(
                    f,
                    "needs {need} but {available} is available ({} total − {} used − {} reserve)",
                    fmt_bytes(*total),
                    fmt_bytes(*used),
                    fmt_bytes(*reserve)
                )
            }
            Self::MemoryCommitCap {
                committed,
                cap,
                ratio,
            } => {
                let (committed, cap) = fmt_bytes_apart(*committed, *cap);
                write!(
                    f,
                    "committed memory would be {committed}, above the cap of {cap} ({ratio}× total)"
                )
            }
            Self::TooManyCores { need, have } => {
                let (need, have) = fmt_cores_apart(*need, *have);
                write!(f, "needs {need} vCPUs but the node has {have} CPUs")
            }
            Self::VcpuCap {
                committed,
                cap,
                ratio,
            } => {
                let (committed, cap) = fmt_cores_apart(*committed, *cap);
                write!(
                    f,
                    "committed vCPUs would be {committed}, above the cap of {cap} ({ratio}× CPUs)"
                )
            }
            Self::NodeRules { rules } => {
                let parts: Vec<String> = rules
                    .iter()
                    .map(|(r, nodes)| allows_only(r, nodes))
                    .collect();
                f.write_str(&parts.join("; "))
            }
            Self::MissingLabels { labels } => write!(f, "node lacks label {}", labels.join(", ")),
            Self::Tainted { taints } => {
                write!(f, "node is tainted {} (not tolerated)", taints.join(", "))
            }
            Self::AffinityElsewhere { group, node } => write!(f, "{group} runs on {node}"),
            Self::StorageMissing { storage, subject } => write!(
                f,
                "node has no storage {storage}, where the local disks of {subject} are"
            ),
            Self::StorageFull {
                storage,
                node,
                free,
                need,
                subject,
            } => write!(
                f,
                "storage {storage} on {node} has {} free, {subject} needs {} for its local disks",
                fmt_bytes(*free),
                fmt_bytes(*need)
            ),
            Self::AntiAffinity { group, vmids } => {
                let v: Vec<String> = vmids.iter().map(u32::to_string).collect();
                write!(f, "{group} already has {} here", v.join(", "))
            }
            Self::Custom { message, .. } => f.write_str(message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_rule_naming_no_node_says_so_instead_of_printing_empty_braces() {
        let none: [&str; 0] = [];
        assert_eq!(
            allows_only("flxp.node", &none),
            "flxp.node names no node of the cluster"
        );
        assert_eq!(
            allows_only("plb_pin", &["a", "b"]),
            "plb_pin allows only {a, b}"
        );
        let r = Reason::NodeRules {
            rules: vec![("flxp.node".into(), Vec::new())],
        };
        assert_eq!(r.to_string(), "flxp.node names no node of the cluster");
    }

    #[test]
    fn a_custom_refusal_reads_as_its_message_and_serializes_every_part() {
        let r = Reason::custom("ends-in-3", "name-ends-in-3", "node name ends in 3")
            .with_figure("digit", 3.0);
        assert_eq!(r.to_string(), "node name ends in 3");
        assert!(!r.reads_alone());
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            serde_json::json!({
                "kind": "custom",
                "filter": "ends-in-3",
                "code": "name-ends-in-3",
                "message": "node name ends in 3",
                "figures": {"digit": 3.0},
            })
        );
        // The built-in reasons keep their form.
        assert_eq!(
            serde_json::to_value(Reason::AntiAffinity {
                group: "g".into(),
                vmids: vec![101]
            })
            .unwrap(),
            serde_json::json!({"kind": "anti-affinity", "group": "g", "vmids": [101]})
        );
    }
}

//! What is being placed: a new VM from a request, one existing guest, or a bundle of guests that
//! must move together.

use serde::Serialize;

use crate::cluster::{Cluster, GuestIdx, MAX_BYTES, MAX_CPUS, NodeIdx};
use crate::constraints::{GuestRules, NodeRule, Rules};
use crate::{Error, Result, Warning};

/// A request to place a new VM (`flxp place`, `createVM`, `placement` query).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PlacementRequest {
    /// Memory in bytes.
    pub memory: u64,
    /// vCPUs; a fraction (`0.5`) asks for part of a CPU, like a container's `cpulimit`.
    pub cores: f64,
    /// Tags the VM will carry (flxp rules among them).
    pub tags: Vec<String>,
    /// A host named by the user: skips scoring, not the online and resource checks.
    pub host: Option<String>,
    /// Policy name; the configured default when absent.
    pub policy: Option<String>,
}

/// Checks a requested CPU count: finite, above 0 (Proxmox reads a `cpulimit` of 0 as "no limit",
/// which a request cannot size) and at most [`MAX_CPUS`]. The error is the sentence after the
/// field's name.
pub fn check_cores(cores: f64) -> std::result::Result<f64, NotCores> {
    if cores.is_finite() && cores > 0.0 && cores <= MAX_CPUS {
        Ok(cores)
    } else {
        Err(NotCores(cores.to_string()))
    }
}

/// Reads a requested CPU count from text (`2`, `0.5`), checked as [`check_cores`] does.
pub fn parse_cores(text: &str) -> std::result::Result<f64, NotCores> {
    let text = text.trim();
    text.parse::<f64>()
        .ok()
        .and_then(|cores| check_cores(cores).ok())
        .ok_or_else(|| NotCores(text.to_owned()))
}

/// A requested CPU count that is not one, as given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0} is not a vCPU count (a number above 0 and at most {MAX_CPUS}, such as 2 or 0.5)")]
pub struct NotCores(pub String);

/// The thing to place, with everything the filters need to know about it.
#[derive(Debug, Clone, PartialEq)]
pub struct Subject {
    /// For messages: `new VM`, `guest 101 (web1)`, `group flxp.affinity.app (101, 102)`.
    pub label: String,
    /// Memory it needs on the target, in bytes.
    pub memory: u64,
    /// vCPUs (the largest member's for a bundle, since each member needs them on one node).
    pub cores: f64,
    /// Sum of vCPUs, for the overcommit cap.
    pub committed_cpus: f64,
    /// CPU cores it is expected to use.
    pub cpu: f64,
    /// Configured memory (`maxmem`), for the commit cap.
    pub committed_mem: u64,
    /// Its rules (for a bundle: every member's node rules, selectors and groups; only the
    /// tolerations all members share).
    pub rules: GuestRules,
    /// Existing guests being moved; empty for a new VM.
    pub members: Vec<GuestIdx>,
    /// Where the members are now, for a move.
    pub from: Option<NodeIdx>,
}

impl Subject {
    /// A new VM from a request; also returns the warnings about its tags.
    pub fn new_vm(
        cluster: &Cluster,
        rules: &Rules,
        request: &PlacementRequest,
    ) -> Result<(Self, Vec<Warning>)> {
        if request.memory == 0 {
            return Err(Error::Request("memory must be more than 0 bytes".into()));
        }
        if request.memory > MAX_BYTES {
            return Err(Error::Request(format!(
                "memory {} bytes is more than {} (no machine has that much memory)",
                request.memory,
                crate::units::fmt_bytes(MAX_BYTES)
            )));
        }
        check_cores(request.cores).map_err(|m| Error::Request(format!("cores: {m}")))?;
        let mut warnings = Vec::new();
        let mut tags = Vec::new();
        for tag in &request.tags {
            for t in crate::cluster::split_tags(tag) {
                if crate::constraints::tags::is_valid_tag_text(&t) {
                    tags.push(t);
                } else {
                    return Err(Error::Request(format!(
                        "tag {t:?} is not a valid Proxmox tag (letters, digits, _ + . - only, not starting with + . -)"
                    )));
                }
            }
        }
        let (guest_rules, w) = rules.compile_request(cluster, &tags);
        warnings.extend(w);
        let cores = request.cores;
        Ok((
            Self {
                label: "new VM".into(),
                memory: request.memory,
                cores,
                committed_cpus: cores,
                cpu: cores,
                committed_mem: request.memory,
                rules: guest_rules,
                members: Vec::new(),
                from: None,
            },
            warnings,
        ))
    }

    /// One existing guest, to be moved from where the state has it.
    pub fn guest(cluster: &Cluster, rules: &Rules, guest: GuestIdx, from: NodeIdx) -> Self {
        let g = cluster.guest(guest);
        Self {
            label: format!("guest {}", g.label()),
            memory: g.mem_footprint(),
            cores: g.maxcpu,
            committed_cpus: g.maxcpu,
            cpu: g.cpu_cores(),
            committed_mem: g.maxmem,
            rules: rules.guest(guest).clone(),
            members: vec![guest],
            from: Some(from),
        }
    }

    /// Guests that must land on one node together (an affinity group), moved from one node.
    pub fn bundle(
        cluster: &Cluster,
        rules: &Rules,
        label: String,
        members: &[GuestIdx],
        from: NodeIdx,
    ) -> Self {
        let mut r = GuestRules::default();
        let mut tolerations: Option<Vec<String>> = None;
        // A set: members may carry many selectors each (tags from outside).
        let mut seen_selectors = std::collections::BTreeSet::new();
        let (mut memory, mut cores, mut committed_cpus, mut cpu, mut committed_mem) =
            (0u64, 0f64, 0f64, 0f64, 0u64);
        for &m in members {
            let g = cluster.guest(m);
            let gr = rules.guest(m);
            if g.running {
                memory += g.mem_footprint();
                committed_cpus += g.maxcpu;
                cpu += g.cpu_cores();
                committed_mem += g.maxmem;
            }
            cores = cores.max(g.maxcpu);
            for nr in &gr.node_rules {
                r.node_rules.push(NodeRule {
                    rule: nr.rule.clone(),
                    nodes: nr.nodes.clone(),
                });
            }
            for s in &gr.selectors {
                if seen_selectors.insert(s.as_str()) {
                    r.selectors.push(s.clone());
                }
            }
            r.preferences.extend(gr.preferences.iter().cloned());
            r.groups.extend(gr.groups.iter().copied());
            r.ignore |= gr.ignore;
            tolerations = Some(match tolerations {
                None => gr.tolerations.clone(),
                Some(t) => t.into_iter().filter(|x| gr.tolerates(x)).collect(),
            });
        }
        r.tolerations = tolerations.unwrap_or_default();
        r.groups.sort();
        r.groups.dedup();
        Self {
            label,
            memory,
            cores,
            committed_cpus,
            cpu,
            committed_mem,
            rules: r,
            members: members.to_vec(),
            from: Some(from),
        }
    }

    /// Whether a guest is part of what is being placed.
    pub fn contains(&self, guest: GuestIdx) -> bool {
        self.members.contains(&guest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::*;

    #[test]
    fn cores_accept_fractions_and_refuse_zero_negative_and_non_numbers() {
        // A container's `cpulimit` may be a fraction such as 0.5; whole counts work as before.
        assert_eq!(parse_cores("0.5"), Ok(0.5));
        assert_eq!(parse_cores(" 2 "), Ok(2.0));
        let hint = "is not a vCPU count (a number above 0 and at most 1048576, such as 2 or 0.5)";
        for bad in ["0", "-1", "abc", "NaN", "inf", "", "1048577"] {
            assert_eq!(
                parse_cores(bad).map_err(|e| e.to_string()),
                Err(format!("{bad} {hint}")),
                "{bad}"
            );
        }
        assert_eq!(
            check_cores(f64::NAN).map_err(|e| e.to_string()),
            Err(format!("NaN {hint}"))
        );
    }

    #[test]
    fn a_fractional_request_is_placed_with_its_fraction() {
        let c = ClusterBuilder::new().node(node("a").cpus(1.0)).build();
        let rules = Rules::compile(&c);
        let mut request = PlacementRequest {
            memory: GIB,
            cores: 0.5,
            ..PlacementRequest::default()
        };
        let (s, _) = Subject::new_vm(&c, &rules, &request).unwrap();
        assert_eq!((s.cores, s.committed_cpus, s.cpu), (0.5, 0.5, 0.5));
        request.cores = 0.0;
        let e = Subject::new_vm(&c, &rules, &request).unwrap_err();
        assert!(
            e.to_string().contains("cores: 0 is not a vCPU count"),
            "{e}"
        );
    }
}

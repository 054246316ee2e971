//! What every filter and scorer shares for one decision, computed once: the subject, the state,
//! and where the subject's groups have running members.

use crate::cluster::{Cluster, Landing, NodeIdx};
use crate::constraints::{GroupId, GroupKind, Rules};
use crate::state::State;

use super::registry::FILTERS;
use super::{NodeView, PlacementOptions, Subject};

/// Where one group's running members are (the subject's own members left out).
#[derive(Debug, Clone, PartialEq)]
pub struct GroupPresence {
    /// The group.
    pub group: GroupId,
    /// Nodes with running members, and those members' vmids, in node order.
    pub nodes: Vec<(NodeIdx, Vec<u32>)>,
}

impl GroupPresence {
    /// Whether any of `groups` has a running member somewhere: only then can it favour or
    /// refuse a node.
    pub fn any_running(groups: &[GroupPresence]) -> bool {
        groups.iter().any(|p| !p.nodes.is_empty())
    }

    /// The members on a node.
    pub fn on(&self, node: NodeIdx) -> &[u32] {
        self.nodes
            .iter()
            .find(|(n, _)| *n == node)
            .map_or(&[], |(_, v)| v.as_slice())
    }

    /// The node with the most running members (ties: the first by name), as Proxmox picks it.
    pub fn majority(&self) -> Option<NodeIdx> {
        self.nodes
            .iter()
            .fold(None::<(NodeIdx, usize)>, |best, (n, v)| match best {
                Some((_, c)) if c >= v.len() => best,
                _ => Some((*n, v.len())),
            })
            .map(|(n, _)| n)
    }
}

/// Shared inputs of one decision.
#[derive(Debug, Clone)]
pub struct Ctx<'a> {
    /// The cluster.
    pub cluster: &'a Cluster,
    /// Its compiled rules.
    pub rules: &'a Rules,
    /// The state being judged (the snapshot's, or one after planned moves).
    pub state: &'a State,
    /// Placement options.
    pub options: &'a PlacementOptions,
    /// What is placed.
    pub subject: &'a Subject,
    /// Hard affinity groups of the subject.
    pub affinity: Vec<GroupPresence>,
    /// Hard anti-affinity groups of the subject.
    pub anti_affinity: Vec<GroupPresence>,
    /// Soft affinity groups of the subject.
    pub prefer_affinity: Vec<GroupPresence>,
    /// Soft anti-affinity groups of the subject.
    pub prefer_anti_affinity: Vec<GroupPresence>,
    /// Bit `i` set: filter `i` of [`FILTERS`] may refuse a node to this subject; the others
    /// pass everywhere and are skipped. Worked out once here, since the planner asks about many
    /// nodes per context.
    pub(super) filters: u32,
    /// Memory kept free per node, indexed like `Cluster::nodes`, when the caller worked it out
    /// once for many decisions (else each check looks the node up in the options by name).
    pub reserves: Option<&'a [u64]>,
}

impl<'a> Ctx<'a> {
    /// Prepares a decision: finds where the subject's groups have running members.
    pub fn new(
        cluster: &'a Cluster,
        rules: &'a Rules,
        state: &'a State,
        options: &'a PlacementOptions,
        subject: &'a Subject,
    ) -> Self {
        let mut ctx = Self {
            cluster,
            rules,
            state,
            options,
            subject,
            affinity: Vec::new(),
            anti_affinity: Vec::new(),
            prefer_affinity: Vec::new(),
            prefer_anti_affinity: Vec::new(),
            filters: 0,
            reserves: None,
        };
        for &gid in &subject.rules.groups {
            let group = rules.group(gid);
            let mut nodes: Vec<(NodeIdx, Vec<u32>)> = Vec::new();
            for &m in &group.members {
                let g = cluster.guest(m);
                if !g.running || subject.contains(m) {
                    continue;
                }
                let at = state.location(m);
                let mut add = |at: NodeIdx| match nodes.iter_mut().find(|(n, _)| *n == at) {
                    Some((_, v)) => v.push(g.vmid),
                    None => nodes.push((at, vec![g.vmid])),
                };
                // A member in flight is on its target too for anti-affinity; one whose target
                // nobody could read may land anywhere. Affinity follows where it will be: the
                // target (a known one), or where it is now.
                match (group.kind, g.migrating) {
                    (GroupKind::Affinity, Some(Landing::Node(to))) => add(to),
                    (GroupKind::Affinity, _) => add(at),
                    (GroupKind::AntiAffinity, Some(Landing::Node(to))) if to != at => {
                        add(at);
                        add(to);
                    }
                    (GroupKind::AntiAffinity, Some(Landing::Unknown)) => {
                        add(at);
                        cluster.node_indexes().filter(|&n| n != at).for_each(add)
                    }
                    (GroupKind::AntiAffinity, _) => add(at),
                }
            }
            nodes.sort_by_key(|(n, _)| *n);
            let presence = GroupPresence { group: gid, nodes };
            match (group.kind, group.hard) {
                (GroupKind::Affinity, true) => ctx.affinity.push(presence),
                (GroupKind::AntiAffinity, true) => ctx.anti_affinity.push(presence),
                (GroupKind::Affinity, false) => ctx.prefer_affinity.push(presence),
                (GroupKind::AntiAffinity, false) => ctx.prefer_anti_affinity.push(presence),
            }
        }
        const _: () = assert!(FILTERS.len() <= u32::BITS as usize);
        for (i, f) in FILTERS.iter().enumerate() {
            if f.applies(&ctx) {
                ctx.filters |= 1 << i;
            }
        }
        ctx
    }

    /// Memory kept free on a node: from [`Self::reserves`] when set, else the options.
    pub fn reserve(&self, node: &NodeView) -> u64 {
        match self.reserves.and_then(|r| r.get(node.idx.get())) {
            Some(&r) => r,
            None => self.options.reserve_for(node.node),
        }
    }

    /// The view of one node in the state at hand.
    pub fn view(&self, idx: NodeIdx) -> NodeView<'a> {
        NodeView {
            idx,
            node: self.cluster.node(idx),
            usage: self.state.usage(idx),
        }
    }
}

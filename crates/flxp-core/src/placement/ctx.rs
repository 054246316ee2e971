//! What every filter and scorer shares for one decision, computed once: the subject, the state,
//! where the subject's soft groups have running members (for the scorers), and each filter's own
//! prepared state.

use crate::cluster::{Cluster, Landing, NodeIdx};
use crate::constraints::{GroupId, GroupKind, Rules};
use crate::state::State;

use super::filters::COUNT;
use super::registry::FILTERS;
use super::{Filter, FilterState, NodeView, PlacementOptions, Subject};

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

    /// Where the subject's groups of one kind (hard or soft) have running members, in the
    /// subject's group order.
    pub fn of(ctx: &Ctx, kind: GroupKind, hard: bool) -> Vec<GroupPresence> {
        presence(ctx.cluster, ctx.rules, ctx.state, ctx.subject, kind, hard)
    }
}

/// [`GroupPresence::of`] from the parts of a [`Ctx`].
fn presence(
    cluster: &Cluster,
    rules: &Rules,
    state: &State,
    subject: &Subject,
    kind: GroupKind,
    hard: bool,
) -> Vec<GroupPresence> {
    let mut out = Vec::new();
    for &gid in &subject.rules.groups {
        let group = rules.group(gid);
        if group.kind != kind || group.hard != hard {
            continue;
        }
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
        out.push(GroupPresence { group: gid, nodes });
    }
    out
}

/// Each filter's state prepared for one decision, `None` for a filter that passes every node
/// of it: the built-in filters' inline, in [`FILTERS`] order (no allocation per decision), then
/// the registered ones' ([`PlacementOptions::extra_filters`]).
pub(super) struct Prepared {
    builtin: [Option<Box<FilterState>>; COUNT],
    /// Bit `i` set: built-in filter `i` has a state (it may refuse a node to this subject).
    active: u32,
    /// Bit `i` set: built-in filter `i` judges only some subjects ([`Filter::is_conditional`]).
    conditional: u32,
    extra: Vec<Option<Box<FilterState>>>,
}

impl Prepared {
    const NONE: Self = Self {
        builtin: [const { None }; COUNT],
        active: 0,
        conditional: 0,
        extra: Vec::new(),
    };
}

const _: () = assert!(COUNT <= u32::BITS as usize);

/// The indexes of the set bits, lowest first.
#[derive(Clone)]
struct Bits(u32);

impl Iterator for Bits {
    type Item = usize;
    #[inline]
    fn next(&mut self) -> Option<usize> {
        if self.0 == 0 {
            return None;
        }
        let i = self.0.trailing_zeros() as usize;
        self.0 &= self.0 - 1;
        Some(i)
    }
}

/// Shared inputs of one decision.
#[derive(Debug)]
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
    /// Soft affinity groups of the subject (the `prefer-affinity` scorer's).
    pub prefer_affinity: Vec<GroupPresence>,
    /// Soft anti-affinity groups of the subject (the `prefer-anti-affinity` scorer's).
    pub prefer_anti_affinity: Vec<GroupPresence>,
    /// Each filter's own state for this decision, prepared once here, since the planner asks
    /// about many nodes per context.
    prepared: Prepared,
    /// Memory kept free per node, indexed like `Cluster::nodes`, when the caller worked it out
    /// once for many decisions (else each check looks the node up in the options by name).
    pub reserves: Option<&'a [u64]>,
}

/// Which filters may refuse a node to this subject.
impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let on = |s: &Option<Box<FilterState>>| s.is_some();
        f.debug_struct("Prepared")
            .field("builtin", &self.builtin.iter().map(on).collect::<Vec<_>>())
            .field("conditional", &Bits(self.conditional).collect::<Vec<_>>())
            .field("extra", &self.extra.iter().map(on).collect::<Vec<_>>())
            .finish()
    }
}

impl<'a> Ctx<'a> {
    /// Prepares a decision: finds where the subject's soft groups have running members, and has
    /// every filter prepare its own state.
    pub fn new(
        cluster: &'a Cluster,
        rules: &'a Rules,
        state: &'a State,
        options: &'a PlacementOptions,
        subject: &'a Subject,
    ) -> Self {
        let soft = |kind| presence(cluster, rules, state, subject, kind, false);
        let mut ctx = Self {
            cluster,
            rules,
            state,
            options,
            subject,
            prefer_affinity: soft(GroupKind::Affinity),
            prefer_anti_affinity: soft(GroupKind::AntiAffinity),
            prepared: Prepared::NONE,
            reserves: None,
        };
        // Filled in place: a state borrows nothing from the context it is prepared from.
        for (i, f) in FILTERS.iter().enumerate().take(COUNT) {
            let state = f.prepare(&ctx);
            if state.is_some() {
                ctx.prepared.active |= 1 << i;
                if f.is_conditional() {
                    ctx.prepared.conditional |= 1 << i;
                }
            }
            ctx.prepared.builtin[i] = state;
        }
        let extra = options.extra_filters.as_slice();
        if !extra.is_empty() {
            let states = extra.iter().map(|f| f.prepare(&ctx)).collect();
            ctx.prepared.extra = states;
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

    /// The filters that may refuse a node to this subject, each with its prepared state, in
    /// pipeline order (built-in, then registered); the others pass everywhere.
    pub(super) fn active_filters(
        &self,
    ) -> impl Iterator<Item = (&'static dyn Filter, &FilterState)> + '_ {
        self.active_builtin(u32::MAX).chain(self.active_extra())
    }

    /// [`Ctx::active_filters`] with the conditional ones first (the planner's fast path: they
    /// tend to leave few nodes for the others).
    pub(super) fn active_filters_conditional_first(
        &self,
    ) -> impl Iterator<Item = (&'static dyn Filter, &FilterState)> + '_ {
        let conditional = self.prepared.conditional;
        let extra = self.active_extra();
        let (first, then): (Vec<_>, Vec<_>) = extra.partition(|(f, _)| f.is_conditional());
        self.active_builtin(conditional)
            .chain(first)
            .chain(self.active_builtin(!conditional))
            .chain(then)
    }

    /// The built-in filters of `mask` that may refuse a node to this subject, in order.
    fn active_builtin(
        &self,
        mask: u32,
    ) -> impl Iterator<Item = (&'static dyn Filter, &FilterState)> + '_ {
        Bits(self.prepared.active & mask).filter_map(|i| {
            let state = self.prepared.builtin.get(i)?.as_deref()?;
            Some((*FILTERS.get(i)?, state))
        })
    }

    /// The registered filters that may refuse a node to this subject, in order.
    fn active_extra(&self) -> impl Iterator<Item = (&'static dyn Filter, &FilterState)> + '_ {
        let extra = self.options.extra_filters.as_slice().iter().copied();
        extra
            .zip(&self.prepared.extra)
            .filter_map(|(f, s)| s.as_deref().map(|s| (f, s)))
    }
}

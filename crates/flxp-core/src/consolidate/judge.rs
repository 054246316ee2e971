//! Whether freeing a set of nodes keeps every limit: the CPU ceiling (targets closed and the try
//! run again), rules, guests stuck or arriving, the auto mode's load cap and N+1 headroom.

use std::cmp::Reverse;
use std::collections::BTreeSet;

use super::{ConsolidateOptions, Ctx, KeptBecause, MAX_CLOSED};
use crate::Result;
use crate::balance::{Skipped, Unplaced};
use crate::cluster::{Cluster, GuestIdx, NodeIdx};
use crate::placement::{PlacementOptions, Placer};
use crate::state::State;
use crate::units::fmt_bytes;

/// Why the nodes of `nodes` are not empty though nothing is on them: a guest whose running
/// migration takes it onto one of them (the last of `nodes` first), named with where it comes
/// from; `None` when none is arriving. Such a guest is on its source until it lands, so an
/// evacuation of its target does not move it, and a target switched off stops it.
pub fn arriving(cluster: &Cluster, nodes: &[NodeIdx]) -> Option<String> {
    let mut among = vec![false; cluster.nodes().len()];
    for &n in nodes {
        among[n.get()] = true;
    }
    arriving_among(cluster, cluster.guests(), &among, nodes.last().copied())
}

/// [`arriving`] for the nodes flagged in `among` (indexed like `Cluster::nodes`), a guest
/// arriving on `first` named first: one sweep over the guests.
pub(super) fn arriving_among<'c>(
    cluster: &'c Cluster,
    guests: impl IntoIterator<Item = &'c crate::cluster::Guest>,
    among: &[bool],
    first: Option<NodeIdx>,
) -> Option<String> {
    let mut found: Option<&crate::cluster::Guest> = None;
    for g in guests {
        if let Some(to) = g.migrating_to().filter(|to| among[to.get()]) {
            if Some(to) == first {
                found = Some(g);
                break;
            }
            found.get_or_insert(g);
        }
    }
    found.and_then(|g| {
        let to = g.migrating_to()?;
        Some(format!(
            "guest {} is migrating onto {} (from {}): it holds the node once it lands",
            g.label(),
            cluster.node(to).name,
            cluster.node(g.node).name
        ))
    })
}

/// What one try at freeing a set of nodes left: the guests that fit nowhere or stayed, the state
/// after its moves, and what the caller keeps of it (a plan, or migrations).
pub(super) struct Trial<T> {
    pub(super) unplaced: Vec<Unplaced>,
    pub(super) skipped: Vec<Skipped>,
    pub(super) after: State,
    pub(super) payload: T,
    /// The guests the try moved, when the caller knows them (else every guest is swept).
    pub(super) moved: Option<Vec<GuestIdx>>,
    /// The targets closed to the try that was kept (set by [`try_free`]).
    pub(super) closed: Vec<NodeIdx>,
}

/// What an incremental try knows of the state it starts from, so that its judgement looks only
/// at what the try changed instead of sweeping every guest.
pub(super) struct Local<'a> {
    /// Guests per node (any state) before the try, indexed like `Cluster::nodes`.
    pub(super) on: &'a [Vec<GuestIdx>],
    /// The state before the try.
    pub(super) before: &'a State,
    /// The nodes being freed that may still hold guests (the newest, and those freed before
    /// whose guests stayed): only their guests can be stuck.
    pub(super) holding: &'a [NodeIdx],
    /// The hosts not freed before, by room and by running memory, for N+1.
    pub(super) rooms: &'a Rooms,
}

/// The hosts not freed yet ordered by their room for a failed node's guests (free memory less
/// the zone's reserve) and by their running guests' memory, kept up to date as steps are
/// accepted, so that an incremental N+1 check finds the few nodes that need packing without
/// looking at every node.
pub(super) struct Rooms {
    /// The zone's reserve per node, indexed like `Cluster::nodes`.
    reserve: Vec<u64>,
    /// Room and running memory per node, as in the sets.
    room: Vec<u64>,
    running: Vec<u64>,
    /// Roomiest first, ties by node.
    by_room: BTreeSet<(Reverse<u64>, NodeIdx)>,
    /// Most running memory first, ties by node.
    by_running: BTreeSet<(Reverse<u64>, NodeIdx)>,
    /// The memory of the largest running guest in the cluster.
    largest: u64,
}

impl Rooms {
    /// The hosts in `state`, with the running memory per node.
    pub(super) fn new(
        cluster: &Cluster,
        state: &State,
        hosts: &[NodeIdx],
        options: &PlacementOptions,
        running: &[u64],
    ) -> Self {
        let reserve: Vec<u64> = cluster
            .nodes()
            .iter()
            .map(|n| options.reserve_for(n))
            .collect();
        let mut r = Self {
            room: vec![0; reserve.len()],
            running: running.to_vec(),
            reserve,
            by_room: BTreeSet::new(),
            by_running: BTreeSet::new(),
            largest: cluster
                .guests()
                .iter()
                .filter(|g| g.running)
                .map(crate::cluster::Guest::mem_footprint)
                .max()
                .unwrap_or(0),
        };
        for &h in hosts {
            let room = r.room_in(cluster, state, h);
            r.room[h.get()] = room;
            r.by_room.insert((Reverse(room), h));
            r.by_running.insert((Reverse(running[h.get()]), h));
        }
        r
    }

    fn room_in(&self, cluster: &Cluster, state: &State, n: NodeIdx) -> u64 {
        cluster
            .node(n)
            .maxmem
            .saturating_sub(state.usage(n).mem_held())
            .saturating_sub(self.reserve[n.get()])
    }

    /// Re-keys a host from `state` and its running memory.
    pub(super) fn update(&mut self, cluster: &Cluster, state: &State, n: NodeIdx, running: u64) {
        let i = n.get();
        if self.by_room.remove(&(Reverse(self.room[i]), n)) {
            self.room[i] = self.room_in(cluster, state, n);
            self.by_room.insert((Reverse(self.room[i]), n));
        }
        if self.by_running.remove(&(Reverse(self.running[i]), n)) {
            self.by_running.insert((Reverse(running), n));
        }
        self.running[i] = running;
    }

    /// The hosts' rooms, roomiest first (ties by node).
    pub(super) fn roomiest(&self) -> impl Iterator<Item = (u64, NodeIdx)> + '_ {
        self.by_room.iter().map(|&(Reverse(r), n)| (r, n))
    }

    /// Takes a freed host out.
    pub(super) fn remove(&mut self, n: NodeIdx) {
        self.by_room.remove(&(Reverse(self.room[n.get()]), n));
        self.by_running.remove(&(Reverse(self.running[n.get()]), n));
    }

    /// The `k` largest rooms after a try, largest first: the hosts' rooms, skipping `skip`
    /// (nodes being freed or changed by the try, and a failed node), merged with the changed
    /// nodes' new rooms (`changed`, largest first).
    fn top(
        &self,
        k: usize,
        skip: impl Fn(NodeIdx) -> bool,
        changed: &[(u64, NodeIdx)],
        without: Option<NodeIdx>,
    ) -> Vec<u64> {
        self.after(skip, changed, without).take(k).collect()
    }

    /// The rooms after a try, largest first, as [`Self::top`] takes them (lazily).
    fn after<'s>(
        &'s self,
        skip: impl Fn(NodeIdx) -> bool + 's,
        changed: &'s [(u64, NodeIdx)],
        without: Option<NodeIdx>,
    ) -> impl Iterator<Item = u64> + 's {
        let mut kept = self
            .by_room
            .iter()
            .filter(move |&&(_, n)| !skip(n) && Some(n) != without)
            .map(|&(Reverse(r), _)| r)
            .peekable();
        let mut new = changed
            .iter()
            .filter(move |&&(_, n)| Some(n) != without)
            .map(|&(r, _)| r)
            .peekable();
        std::iter::from_fn(move || match (kept.peek(), new.peek()) {
            (Some(&a), Some(&b)) if a >= b => kept.next(),
            (Some(_), Some(_)) | (None, Some(_)) => new.next(),
            (Some(_), None) => kept.next(),
            (None, None) => None,
        })
    }
}

/// The try (`run`, handed the pipeline to place with) that frees `trial` within every limit, or
/// why none was found. It places by memory; a target it would push over the CPU ceiling is closed
/// to it and it runs again, so the ceiling shapes the choice of targets and does not only veto
/// the first choice, up to [`MAX_CLOSED`] runs again. When none is found, the first CPU breach
/// is the reason given. Each run adds `cost` to `work`. `closed` starts closed (targets that
/// cannot take more CPU anyway); with `close_all`, every target a run overloads is closed at
/// once, not only the first (fewer runs on large clusters).
pub(super) fn try_free<T>(
    ctx: &Ctx<'_>,
    trial: &[NodeIdx],
    (work, cost): (&mut u64, u64),
    (mut closed, close_all): (Vec<NodeIdx>, bool),
    local: Option<&Local<'_>>,
    mut run: impl FnMut(&Placer, &[NodeIdx]) -> Result<Trial<T>>,
) -> Result<std::result::Result<Trial<T>, (KeptBecause, String)>> {
    let (cluster, state, options) = (ctx.cluster, ctx.state, ctx.options);
    let mut reruns = 0;
    let mut first_cpu: Option<String> = None;
    let mut in_trial = vec![false; cluster.nodes().len()];
    for &n in trial {
        in_trial[n.get()] = true;
    }
    let remaining: Vec<NodeIdx> = ctx
        .hosts
        .iter()
        .copied()
        .filter(|n| !in_trial[n.get()])
        .collect();
    loop {
        *work += cost;
        let t = run(ctx.ceiling, &closed)?;
        // An incremental judgement counts what it looks at (a full one is in `cost`).
        let verdict = judge(ctx, trial, &in_trial, &remaining, &t, (local, &mut *work));
        match verdict {
            Ok(()) => {
                let mut t = t;
                t.closed = closed;
                return Ok(Ok(t));
            }
            Err((because, reason)) => {
                let grown = grown(&t, &in_trial, &remaining);
                let breach = (because == KeptBecause::Cpu)
                    .then(|| cpu_breach(cluster, state, &t.after, options, &grown))
                    .flatten()
                    .filter(|(n, _)| !closed.contains(n) && reruns < MAX_CLOSED);
                match breach {
                    Some((n, _)) => {
                        // Named by the guest that needs the CPUs: the node it would overload
                        // may be one this plan frees later.
                        let why = cpu_hungry(cluster, state, &t, n)
                            .map(|g| {
                                let guest = cluster.guest(g);
                                format!(
                                    "guest {} uses {:.1} CPUs: no remaining node can take it \
                                     within the {:.0}% CPU ceiling",
                                    guest.label(),
                                    guest.cpu_cores(),
                                    100.0 * options.max_cpu
                                )
                            })
                            .unwrap_or(reason);
                        first_cpu.get_or_insert(why);
                        closed.push(n);
                        reruns += 1;
                        if close_all {
                            let more = grown.iter().copied().filter(|&r| {
                                r != n
                                    && !closed.contains(&r)
                                    && cpu_over(cluster, state, &t.after, options, r)
                            });
                            closed.extend(more.collect::<Vec<_>>());
                        }
                    }
                    None => {
                        return Ok(Err(match first_cpu {
                            Some(cpu) => (KeptBecause::Cpu, cpu),
                            None => (because, reason),
                        }));
                    }
                }
            }
        }
    }
}

/// The pipeline that chooses targets for a try with `closed` shut: the ceiling's, with each
/// closed node's whole memory as its reserve (a full re-plan builds it per run).
pub(super) fn closed_placer(ctx: &Ctx<'_>, closed: &[NodeIdx]) -> Result<Option<Placer>> {
    if closed.is_empty() {
        return Ok(None);
    }
    let mut o = ctx.ceiling.options().clone();
    for &n in closed {
        let node = ctx.cluster.node(n);
        o.node_reserve_bytes.insert(node.name.clone(), node.maxmem);
    }
    ctx.ceiling.with_options(o).map(Some)
}

/// The remaining nodes whose load a try can have raised, in node order: the targets of the
/// guests it moved when it knows them, else all of `remaining`.
fn grown<T>(t: &Trial<T>, in_trial: &[bool], remaining: &[NodeIdx]) -> Vec<NodeIdx> {
    match &t.moved {
        Some(moved) => {
            let mut v: Vec<NodeIdx> = moved
                .iter()
                .map(|&g| t.after.location(g))
                .filter(|n| !in_trial[n.get()])
                .collect();
            v.sort_unstable();
            v.dedup();
            v
        }
        None => remaining.to_vec(),
    }
}

/// The guest moved onto `node` by the plan (from `state` to `after`) that uses the most CPU.
fn cpu_hungry<T>(
    cluster: &Cluster,
    state: &State,
    t: &Trial<T>,
    node: NodeIdx,
) -> Option<GuestIdx> {
    let after = &t.after;
    let all: Box<dyn Iterator<Item = GuestIdx>> = match &t.moved {
        Some(moved) => Box::new(moved.iter().copied()),
        None => Box::new(cluster.guest_indexes()),
    };
    all.filter(|&g| after.location(g) == node && state.location(g) != node)
        .max_by(|&a, &b| {
            cluster
                .guest(a)
                .cpu_cores()
                .total_cmp(&cluster.guest(b).cpu_cores())
                .then(cluster.guest(b).vmid.cmp(&cluster.guest(a).vmid))
        })
}

/// Whether `after` puts node `r` above the CPU ceiling with more than `state` has on it.
fn cpu_over(
    cluster: &Cluster,
    state: &State,
    after: &State,
    options: &ConsolidateOptions,
    r: NodeIdx,
) -> bool {
    let cap = cluster.node(r).maxcpu * options.max_cpu;
    let (was, now) = (state.usage(r).cpu, after.usage(r).cpu);
    now > was + 1e-9 && now > cap + 1e-9
}

/// A remaining node the plan's result pushes above the CPU ceiling, and the words for it.
fn cpu_breach(
    cluster: &Cluster,
    state: &State,
    after: &State,
    options: &ConsolidateOptions,
    remaining: &[NodeIdx],
) -> Option<(NodeIdx, String)> {
    remaining.iter().find_map(|&r| {
        let node = cluster.node(r);
        let cap = node.maxcpu * options.max_cpu;
        let (was, now) = (state.usage(r).cpu, after.usage(r).cpu);
        (now > was + 1e-9 && now > cap + 1e-9).then(|| {
            (
                r,
                format!(
                    "{} would use {:.0}% of its CPUs, above the {:.0}% ceiling",
                    node.name,
                    100.0 * now / node.maxcpu.max(f64::MIN_POSITIVE),
                    100.0 * options.max_cpu
                ),
            )
        })
    })
}

/// Whether the try at freeing `trial` (flagged in `in_trial`; `remaining` the other hosts) keeps
/// every limit; else why not. With `local` (an incremental try), only the guests on the nodes
/// being freed and those the try moved are looked at, and what that took is added to `work` (in
/// units: a guest or a node looked at).
pub(super) fn judge<T>(
    ctx: &Ctx<'_>,
    trial: &[NodeIdx],
    in_trial: &[bool],
    remaining: &[NodeIdx],
    t: &Trial<T>,
    (local, work): (Option<&Local<'_>>, &mut u64),
) -> std::result::Result<(), (KeptBecause, String)> {
    let (cluster, state, options) = (ctx.cluster, ctx.state, ctx.options);
    // The node just added to the trial first: its own guest is the reason it stays.
    let newest = trial.last().map(|&n| cluster.node(n).name.as_str());
    if let Some(u) = t
        .unplaced
        .iter()
        .find(|u| Some(u.node.as_str()) == newest)
        .or_else(|| t.unplaced.first())
    {
        // A guest of a node freed before this one: this node was its only room.
        let reason = match newest {
            Some(newest) if newest != u.node => format!(
                "freeing {newest} too would leave guest {} of {}, which is freed, no node within \
                 the limits: {}",
                u.vmid, u.node, u.reason
            ),
            _ => format!(
                "guest {} on {} fits on no other node within the limits: {}",
                u.vmid, u.node, u.reason
            ),
        };
        return Err((KeptBecause::NoRoom, reason));
    }
    let landing = ctx.landing.iter().map(|&g| cluster.guest(g));
    if let Some(reason) = arriving_among(cluster, landing, in_trial, trial.last().copied()) {
        return Err((KeptBecause::Arriving, reason));
    }
    let after = &t.after;
    // A guest whose migration off its node is in flight (an interrupted run's, say) is leaving,
    // unless it lands on a node being freed too.
    let leaving = |g: crate::cluster::GuestIdx| {
        let guest = cluster.guest(g);
        after.location(g) == guest.node
            && guest.migrating_to().is_some_and(|to| !in_trial[to.get()])
    };
    let stuck = |g: &crate::cluster::GuestIdx| in_trial[after.location(*g).get()] && !leaving(*g);
    // Nothing moves onto a node being freed (it is in maintenance), so only the guests on them
    // before the try can stay there: in guest order, as the sweep finds them.
    let candidates: Vec<GuestIdx> = match local {
        Some(l) => {
            let mut v: Vec<GuestIdx> = l
                .holding
                .iter()
                .flat_map(|&n| l.on[n.get()].iter().copied())
                .collect();
            *work += (l.holding.len() + v.len()) as u64;
            v.sort_unstable();
            v
        }
        None => cluster.guest_indexes().collect(),
    };
    if let Some(g) = candidates
        .iter()
        .copied()
        .filter(stuck)
        .find(|&g| trial.last() == Some(&after.location(g)))
        .or_else(|| candidates.iter().copied().find(stuck))
    {
        let guest = cluster.guest(g);
        let why = t
            .skipped
            .iter()
            .find(|s| s.vmid == guest.vmid)
            .map_or_else(|| "it cannot be moved".to_owned(), |s| s.reason.clone());
        return Err((
            KeptBecause::Unmovable,
            format!(
                "guest {} stays on {}: {why}",
                guest.label(),
                cluster.node(after.location(g)).name
            ),
        ));
    }
    // Only a node that gained load can newly pass the ceiling (every earlier step was judged).
    if let Some((_, reason)) = cpu_breach(
        cluster,
        state,
        after,
        options,
        &grown(t, in_trial, remaining),
    ) {
        return Err((KeptBecause::Cpu, reason));
    }
    if let Some(max) = options.max_load {
        let l = load(cluster, after, remaining);
        if l > max + 1e-9 {
            return Err((
                KeptBecause::Load,
                format!(
                    "the other {} node(s) would carry {:.0}% of their capacity, above the {:.0}% \
                     the auto mode allows (halfway between consolidate-below and wake-above)",
                    remaining.len(),
                    100.0 * l,
                    100.0 * max
                ),
            ));
        }
    }
    if options.headroom {
        let placement = ctx.placer.options();
        let why = match (local, &t.moved) {
            (Some(l), Some(moved)) => {
                headroom_local(cluster, after, remaining, in_trial, l, moved, work)
            }
            _ => headroom_breach(cluster, after, remaining, placement),
        };
        if let Some(why) = why {
            return Err((KeptBecause::Headroom, why));
        }
    }
    Ok(())
}

/// [`headroom_breach`] of an incremental try, the same verdict and words without a sweep over
/// every node: a failed node whose running guests use no more memory than the roomiest other
/// node has free passes at once (packed largest first, each onto the roomiest, they all fit:
/// the roomiest always has at least what that one node has left, which is at least what is left
/// to place). Only a node with more running memory than the second largest room can fail that
/// test, so those are found from the largest down in `local.rooms` (the nodes the try changed
/// with their new figures), and only they are packed guest by guest. Adds the nodes and guests
/// looked at to `work`.
fn headroom_local(
    cluster: &Cluster,
    after: &State,
    hosts: &[NodeIdx],
    in_trial: &[bool],
    local: &Local<'_>,
    moved: &[GuestIdx],
    work: &mut u64,
) -> Option<String> {
    let rooms = local.rooms;
    // The remaining nodes the try changed, with their running memory and room after it.
    let mut changed: Vec<NodeIdx> = moved
        .iter()
        .flat_map(|&g| [local.before.location(g), after.location(g)])
        .filter(|n| !in_trial[n.get()])
        .collect();
    changed.sort_unstable();
    changed.dedup();
    let mut running: Vec<u64> = changed.iter().map(|n| rooms.running[n.get()]).collect();
    for &g in moved {
        let guest = cluster.guest(g);
        if !guest.running {
            continue;
        }
        let fp = guest.mem_footprint();
        if let Ok(i) = changed.binary_search(&local.before.location(g)) {
            running[i] = running[i].saturating_sub(fp);
        }
        if let Ok(i) = changed.binary_search(&after.location(g)) {
            running[i] += fp;
        }
    }
    let mut new_rooms: Vec<(u64, NodeIdx)> = changed
        .iter()
        .map(|&n| (rooms.room_in(cluster, after, n), n))
        .collect();
    new_rooms.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let skip = |n: NodeIdx| in_trial[n.get()] || changed.binary_search(&n).is_ok();
    *work += changed.len() as u64;
    let most = rooms
        .by_running
        .iter()
        .find(|&&(_, n)| !skip(n))
        .map_or(0, |&(Reverse(r), _)| r)
        .max(running.iter().copied().max().unwrap_or(0));
    let all = rooms.after(skip, &new_rooms, None);
    if spare_holds(all, rooms.largest, most, work) {
        return None;
    }
    let second = rooms
        .top(2, skip, &new_rooms, None)
        .get(1)
        .copied()
        .unwrap_or(0);
    // Every node whose running memory is above the second largest room, in node order.
    let mut failing: Vec<(NodeIdx, u64)> = rooms
        .by_running
        .iter()
        .filter(|&&(_, n)| !skip(n))
        .take_while(|&&(Reverse(r), _)| r > second)
        .map(|&(Reverse(r), n)| (n, r))
        .chain(
            changed
                .iter()
                .zip(&running)
                .filter(|&(_, &r)| r > second)
                .map(|(&n, &r)| (n, r)),
        )
        .collect();
    failing.sort_unstable();
    *work += failing.len() as u64;
    for (failed, run) in failing {
        let top = rooms
            .top(1, skip, &new_rooms, Some(failed))
            .first()
            .copied();
        if top.is_some_and(|top| top >= run) {
            continue;
        }
        let items: Vec<u64> = local.on[failed.get()]
            .iter()
            .chain(moved)
            .copied()
            .filter(|&g| after.location(g) == failed && cluster.guest(g).running)
            .map(|g| cluster.guest(g).mem_footprint())
            .collect();
        *work += items.len() as u64;
        let others = rooms.top(items.len(), skip, &new_rooms, Some(failed));
        if let Some(why) = pack_failed(cluster, hosts.len(), failed, items, others) {
            return Some(why);
        }
    }
    None
}

/// Whether every node's running guests, `most` memory at most, fit on the others if it fails,
/// from the hosts' rooms (`rooms`, largest first) alone: packed largest first, each onto the
/// roomiest, a guest finds no room only once every other node has less than it left, so each
/// has taken more than its room less the largest running guest (`largest`). The roomiest spare
/// is left out (it may be the failed node's own). Adds the rooms looked at to `work`; the walk
/// stops once the spares hold `most`, or at the first room without a spare.
fn spare_holds(rooms: impl Iterator<Item = u64>, largest: u64, most: u64, work: &mut u64) -> bool {
    let (mut held, mut left_out) = (0u64, false);
    for room in rooms {
        if held >= most && left_out {
            return true;
        }
        *work += 1;
        let spare = room.saturating_sub(largest);
        if spare == 0 {
            return false;
        }
        if left_out {
            held = held.saturating_add(spare);
        }
        left_out = true;
    }
    held >= most && left_out
}

/// Why the running guests on `node` cannot all be placed, found from their memory alone: a
/// guest goes only where at least its memory is free, and a node takes no more than it has free,
/// so the guests larger than a room need no more than the rooms larger than it hold together
/// (all the guests, than all the rooms). `items` are their memory, largest first, `rooms` each
/// open target's free memory within the limits, roomiest first; with `split`, only the total is
/// compared (a bundle joined from elsewhere may free room on a target). `None` when no shortfall
/// is found: they may still not fit. Adds the rooms looked at to `work`; the walk stops once the
/// rooms seen hold all the guests.
pub(super) fn room_shortfall(
    node: &str,
    items: &[u64],
    rooms: impl Iterator<Item = u64>,
    (split, max_memory): (bool, f64),
    work: &mut u64,
) -> Option<String> {
    let total = items.iter().fold(0u64, |s, &m| s.saturating_add(m));
    if total == 0 {
        return None;
    }
    let ceiling = 100.0 * max_memory;
    let (mut held, mut need, mut larger) = (0u64, 0u64, 0usize);
    for room in rooms {
        *work += 1;
        while !split && larger < items.len() && items[larger] > room {
            need = need.saturating_add(items[larger]);
            larger += 1;
        }
        if need > held {
            return Some(if held == 0 {
                format!(
                    "{larger} running guest(s) on {node} use more than {} of memory each, and \
                     no remaining node has more free within the {ceiling:.0}% memory ceiling",
                    fmt_bytes(room)
                )
            } else {
                format!(
                    "{larger} running guest(s) on {node} use more than {} of memory each, {} \
                     in all, and the remaining nodes with more free have {} in all within the \
                     {ceiling:.0}% memory ceiling",
                    fmt_bytes(room),
                    fmt_bytes(need),
                    fmt_bytes(held)
                )
            });
        }
        held = held.saturating_add(room);
        if held >= total {
            return None;
        }
    }
    Some(format!(
        "the running guests on {node} use {} of memory, and the remaining nodes have {} free in \
         all within the {ceiling:.0}% memory ceiling",
        fmt_bytes(total),
        fmt_bytes(held)
    ))
}

/// Why the nodes `hosts` lack N+1 headroom in `state`: a node whose running guests would not fit
/// on the others (their free memory less the reserves) if it failed; `None` when every node's
/// would. Packed largest guest first, each onto the node with the most room left: a packing it
/// finds exists, so `None` is a proof.
///
/// A failed node's m guests only ever land on the m roomiest other nodes (each goes to the
/// roomiest, and an untouched node is touched only once it is the roomiest left), so the rooms
/// are sorted once and each failure packs onto its own few: O(H log H + G log G) in all.
pub fn headroom_breach(
    cluster: &Cluster,
    state: &State,
    hosts: &[NodeIdx],
    options: &PlacementOptions,
) -> Option<String> {
    let mut slot = vec![usize::MAX; cluster.nodes().len()];
    for (i, &h) in hosts.iter().enumerate() {
        slot[h.get()] = i;
    }
    let mut on: Vec<Vec<u64>> = vec![Vec::new(); hosts.len()];
    for g in cluster.guest_indexes() {
        let guest = cluster.guest(g);
        if !guest.running {
            continue;
        }
        if let Some(items) = on.get_mut(slot[state.location(g).get()]) {
            items.push(guest.mem_footprint());
        }
    }
    let (room, roomiest) = rooms(cluster, state, hosts, options);
    for (i, &failed) in hosts.iter().enumerate() {
        let items = std::mem::take(&mut on[i]);
        let others: Vec<u64> = roomiest
            .iter()
            .filter(|&&j| j != i)
            .take(items.len())
            .map(|&j| room[j])
            .collect();
        if let Some(why) = pack_failed(cluster, hosts.len(), failed, items, others) {
            return Some(why);
        }
    }
    None
}

/// Every host's free memory less its reserve in `state`, and the hosts roomiest first (ties by
/// position, so the order is fixed).
fn rooms(
    cluster: &Cluster,
    state: &State,
    hosts: &[NodeIdx],
    options: &PlacementOptions,
) -> (Vec<u64>, Vec<usize>) {
    let room: Vec<u64> = hosts
        .iter()
        .map(|&h| {
            let node = cluster.node(h);
            node.maxmem
                .saturating_sub(state.usage(h).mem_held())
                .saturating_sub(options.reserve_for(node))
        })
        .collect();
    let mut roomiest: Vec<usize> = (0..hosts.len()).collect();
    roomiest.sort_by(|&a, &b| room[b].cmp(&room[a]).then(a.cmp(&b)));
    (room, roomiest)
}

/// Why the running guests `items` of `failed` (one of `hosts` nodes) would not fit on the other
/// hosts if it failed, packed largest first each onto the roomiest of the m roomiest others
/// (`others`, their rooms); `None` when they fit.
fn pack_failed(
    cluster: &Cluster,
    hosts: usize,
    failed: NodeIdx,
    mut items: Vec<u64>,
    others: Vec<u64>,
) -> Option<String> {
    if items.is_empty() {
        return None;
    }
    items.sort_unstable_by(|a, b| b.cmp(a));
    let mut free: std::collections::BinaryHeap<u64> = others.into_iter().collect();
    for &item in &items {
        match free.peek_mut() {
            Some(mut top) if *top >= item => *top -= item,
            _ => {
                let sum: u64 = items.iter().sum();
                return Some(format!(
                    "if {} failed, its {} running guest(s) ({}) would not fit on the other {} node(s)",
                    cluster.node(failed).name,
                    items.len(),
                    fmt_bytes(sum),
                    hosts - 1
                ));
            }
        }
    }
    None
}

/// The load of some nodes: the larger of the shares of their memory and of their CPUs in use
/// (0 for no capacity). The daemon's auto mode compares it with its two levels.
pub fn load(cluster: &Cluster, state: &State, nodes: &[NodeIdx]) -> f64 {
    let (mut mem, mut maxmem, mut cpu, mut maxcpu) = (0.0, 0.0, 0.0, 0.0);
    for &n in nodes {
        let node = cluster.node(n);
        let u = state.usage(n);
        mem += u.mem as f64;
        maxmem += node.maxmem as f64;
        cpu += u.cpu;
        maxcpu += node.maxcpu;
    }
    let share = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
    share(mem, maxmem).max(share(cpu, maxcpu))
}

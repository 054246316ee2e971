//! Whether freeing a set of nodes keeps every limit: the CPU ceiling (targets closed and the try
//! run again), rules, guests stuck or arriving, the auto mode's load cap and N+1 headroom.

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
    /// Memory of the running guests per node before the try.
    pub(super) running: &'a [u64],
    /// The state before the try.
    pub(super) before: &'a State,
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
    mut run: impl FnMut(&Placer) -> Result<Trial<T>>,
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
        let t = if closed.is_empty() {
            run(ctx.ceiling)?
        } else {
            let mut o = ctx.ceiling.options().clone();
            for &n in &closed {
                let node = cluster.node(n);
                o.node_reserve_bytes.insert(node.name.clone(), node.maxmem);
            }
            run(&ctx.ceiling.with_options(o)?)?
        };
        // An incremental judgement counts what it looks at (a full one is in `cost`).
        let verdict = judge(ctx, trial, &in_trial, &remaining, &t, (local, &mut *work));
        match verdict {
            Ok(()) => {
                let mut t = t;
                t.closed = closed;
                return Ok(Ok(t));
            }
            Err((because, reason)) => {
                let breach = (because == KeptBecause::Cpu)
                    .then(|| cpu_breach(cluster, state, &t.after, options, &remaining))
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
                            let more = remaining.iter().copied().filter(|&r| {
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
            let mut v: Vec<GuestIdx> = trial
                .iter()
                .flat_map(|&n| l.on[n.get()].iter().copied())
                .collect();
            *work += (trial.len() + v.len()) as u64;
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
    if let Some((_, reason)) = cpu_breach(cluster, state, after, options, remaining) {
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
                headroom_local(cluster, after, remaining, placement, l, moved, work)
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
/// every guest: a failed node whose running guests use no more memory than the roomiest other
/// node has free passes at once (packed largest first, each onto the roomiest, they all fit:
/// the roomiest always has at least what that one node has left, which is at least what is left
/// to place); only the others are packed guest by guest. Adds the nodes and guests looked at to
/// `work`.
fn headroom_local(
    cluster: &Cluster,
    after: &State,
    hosts: &[NodeIdx],
    options: &PlacementOptions,
    local: &Local<'_>,
    moved: &[GuestIdx],
    work: &mut u64,
) -> Option<String> {
    let footprint = |g: GuestIdx| {
        let guest = cluster.guest(g);
        if guest.running {
            guest.mem_footprint()
        } else {
            0
        }
    };
    // Running memory per node after the try: before, less what left, plus what came.
    let mut running: Vec<u64> = local.running.to_vec();
    for &g in moved {
        let fp = footprint(g);
        let from = local.before.location(g).get();
        running[from] = running[from].saturating_sub(fp);
        running[after.location(g).get()] += fp;
    }
    let (room, roomiest) = rooms(cluster, after, hosts, options);
    *work += hosts.len() as u64;
    for (i, &failed) in hosts.iter().enumerate() {
        let top = roomiest.iter().find(|&&j| j != i).map(|&j| room[j]);
        if top.is_some_and(|top| top >= running[failed.get()]) {
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
        if let Some(why) = pack_failed(cluster, hosts, (i, failed), items, &room, &roomiest) {
            return Some(why);
        }
    }
    None
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
        if let Some(why) = pack_failed(cluster, hosts, (i, failed), items, &room, &roomiest) {
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
                .saturating_sub(state.usage(h).mem)
                .saturating_sub(options.reserve_for(node))
        })
        .collect();
    let mut roomiest: Vec<usize> = (0..hosts.len()).collect();
    roomiest.sort_by(|&a, &b| room[b].cmp(&room[a]).then(a.cmp(&b)));
    (room, roomiest)
}

/// Why the running guests `items` of `hosts[i]` (= `failed`) would not fit on the other hosts
/// if it failed, packed largest first each onto the roomiest of its m roomiest peers (`room`
/// per host, `roomiest` their order); `None` when they fit.
fn pack_failed(
    cluster: &Cluster,
    hosts: &[NodeIdx],
    (i, failed): (usize, NodeIdx),
    mut items: Vec<u64>,
    room: &[u64],
    roomiest: &[usize],
) -> Option<String> {
    if items.is_empty() {
        return None;
    }
    items.sort_unstable_by(|a, b| b.cmp(a));
    let mut free: std::collections::BinaryHeap<u64> = roomiest
        .iter()
        .filter(|&&j| j != i)
        .take(items.len())
        .map(|&j| room[j])
        .collect();
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
                    hosts.len() - 1
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

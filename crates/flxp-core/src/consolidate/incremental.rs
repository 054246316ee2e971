//! Large clusters: a candidate node is tried by placing only its own guests on the state the
//! nodes freed before it leave, instead of planning the evacuation of every freed node anew (which
//! grows with the square of the nodes freed). The plan is the accepted steps in order, judged by
//! the same limits after each step; it must not hold anything the small-cluster path would refuse.

use std::cell::RefCell;
use std::collections::BTreeSet;

use super::judge::{Local, Rooms, Trial, room_shortfall, try_free};
use super::{Ctx, KeptBecause};
use crate::Result;
use crate::balance::draft::Draft;
use crate::balance::fix::{self, Scope};
use crate::balance::shortlist::Shortlist;
use crate::balance::units::Units;
use crate::balance::{Migration, Plan, Skipped};
use crate::cluster::{Cluster, GuestIdx, NodeIdx};
use crate::evacuate::finish_evacuation;
use crate::placement::scorers::least_loaded;
use crate::placement::{Placer, SOFT_RULES};
use crate::state::State;

/// The nodes accepted so far, and what emptying them does.
pub(super) struct Packer<'a> {
    ctx: Ctx<'a>,
    /// The cluster with the accepted nodes (and the one being tried) marked as being freed.
    marked: Cluster,
    /// The state once the accepted migrations have run.
    state: State,
    /// The accepted migrations, in the order they were planned.
    migrations: Vec<Migration>,
    /// Guests left in place by the accepted steps (leaving by a migration of their own).
    skipped: Vec<Skipped>,
    /// What moves together, built once (each try's draft borrows it).
    units: Units,
    /// Guests per node in `state` (any state), kept up to date as steps are accepted.
    on: Vec<Vec<GuestIdx>>,
    /// Memory of the running guests per node in `state`, kept up to date likewise.
    running: Vec<u64>,
    /// Targets a try found it would push over the CPU ceiling: the later tries start with them
    /// closed (a target only ever gains guests), so each is found once, not once per try.
    cpu_full: Vec<NodeIdx>,
    /// Hosts at the CPU ceiling in `state` (they take nothing that uses CPU): found once, then
    /// looked at again only when a step moves guests onto them.
    at_cap: BTreeSet<NodeIdx>,
    /// The nodes accepted whose guests did not all leave (each leaves by a migration of its own).
    holding: Vec<NodeIdx>,
    /// Memory each node keeps free for packing: the ceiling's reserve, and a closed target's whole
    /// memory while a try runs with it closed (worked out once, not looked up by name per check).
    reserves: RefCell<Vec<u64>>,
    /// The ceiling's reserve per node, as `reserves` holds it for an open node.
    base: Vec<u64>,
    /// The open targets least loaded first, when the policy ranks by that (`least-loaded`): a
    /// guest's target is then picked among the first few its filters accept.
    shortlist: RefCell<Option<Shortlist>>,
    /// The hosts by room and running memory, for N+1.
    rooms: Rooms,
    /// The hosts by room within the ceiling (the packing's reserves), for a try's first check:
    /// whether the guests can fit at all.
    packing_rooms: Rooms,
    /// Work not counted yet: looking at every host once to find those at the CPU ceiling.
    setup: u64,
}

/// Whether a policy ranks by the least memory share after placement alone (with soft rules),
/// so that a target can be picked among the least loaded nodes.
fn ranks_least_loaded(placer: &Placer, policy: &str) -> bool {
    placer.policy_def(policy).is_ok_and(|p| {
        p.weights.iter().all(|(name, &w)| {
            w == 0.0 || name == least_loaded::NAME || SOFT_RULES.contains(&name.as_str())
        })
    })
}

impl<'a> Packer<'a> {
    /// Nothing accepted yet.
    pub(super) fn new(ctx: Ctx<'a>) -> Self {
        let nodes = ctx.cluster.nodes().len();
        let mut on: Vec<Vec<GuestIdx>> = vec![Vec::new(); nodes];
        let mut running = vec![0u64; nodes];
        for g in ctx.cluster.guest_indexes() {
            let at = ctx.state.location(g).get();
            on[at].push(g);
            let guest = ctx.cluster.guest(g);
            if guest.running {
                running[at] += guest.mem_footprint();
            }
        }
        let cluster = ctx.cluster;
        let at_cap = ctx
            .hosts
            .iter()
            .copied()
            .filter(|&r| at_cpu_cap(&ctx, ctx.state, r))
            .collect();
        let ceiling = ctx.ceiling.options();
        let base: Vec<u64> = cluster
            .nodes()
            .iter()
            .map(|n| ceiling.reserve_for(n))
            .collect();
        let shortlist = ranks_least_loaded(ctx.ceiling, &ctx.evac.policy)
            .then(|| Shortlist::new(cluster, ctx.state, ctx.hosts));
        let rooms = Rooms::new(
            cluster,
            ctx.state,
            ctx.hosts,
            ctx.placer.options(),
            &running,
        );
        let packing_rooms = Rooms::new(cluster, ctx.state, ctx.hosts, ceiling, &running);
        Self {
            ctx,
            marked: cluster.clone(),
            state: ctx.state.clone(),
            migrations: Vec::new(),
            skipped: Vec::new(),
            units: Units::new(cluster, ctx.rules),
            on,
            running,
            cpu_full: Vec::new(),
            at_cap,
            holding: Vec::new(),
            reserves: RefCell::new(base.clone()),
            base,
            shortlist: RefCell::new(shortlist),
            rooms,
            packing_rooms,
            setup: ctx.hosts.len() as u64,
        }
    }

    /// Tries freeing the last node of `trial` on top of the others (accepted before): its
    /// guests are placed on the state they leave and the result judged as a whole (each run adds
    /// the cost in `work`). Accepted, it joins them; else why not.
    pub(super) fn try_add(
        &mut self,
        trial: &[NodeIdx],
        next: &[NodeIdx],
        work: &mut u64,
    ) -> Result<std::result::Result<(), (KeptBecause, String)>> {
        let Some(&n) = trial.last() else {
            return Ok(Ok(()));
        };
        let ctx = self.ctx;
        // The hosts looked at once for the CPU ceiling.
        *work += std::mem::take(&mut self.setup);
        // A node whose guests cannot fit by their memory alone is not tried: on a full cluster
        // every further candidate fails, and a failed try is the dearest kind (each guest that
        // fits nowhere is judged on every node, and the try runs twice).
        let demand = self.demand(n, work);
        if let Some(why) = self.shortfall(n, &demand, None, work) {
            return Ok(Err((KeptBecause::NoRoom, why)));
        }
        let fresh = !self.marked.node(n).in_maintenance();
        self.marked.empty_for(n, ctx.evac.emptied_as.clone());
        // Without a shortlist, the guests on n now (some may have come from a node freed
        // before) are each judged over every host; with one, the nodes it judged are counted.
        let short = self.shortlist.borrow().is_some();
        let cost = if short {
            0
        } else {
            self.on[n.get()].len() as u64 * ctx.hosts.len() as u64
        };
        let (marked, state, units) = (&self.marked, &self.state, &self.units);
        let (reserves, base, shortlist) = (&self.reserves, &self.base, &self.shortlist);
        let run = |p: &Placer, closed: &[NodeIdx]| -> Result<Trial<Vec<Migration>>> {
            // A closed target keeps all its memory free: nothing that needs memory goes there.
            {
                let mut r = reserves.borrow_mut();
                for &c in closed {
                    r[c.get()] = marked.node(c).maxmem;
                }
            }
            let mut list = shortlist.borrow_mut().take();
            if let Some(list) = &mut list {
                // A run again starts from the state before the try, with other targets closed.
                list.revert(marked, state);
                list.close(&[closed, &[n]].concat());
            }
            let r = reserves.borrow();
            let measure = ctx.evac.measure;
            let kind = (measure.kind_for(ctx.evac.metric, marked, state), measure);
            let units = std::borrow::Cow::Borrowed(units);
            let mut draft =
                Draft::with_units(marked, ctx.rules, p, state, kind, 0, usize::MAX, units);
            p.policy_def(&ctx.evac.policy)?;
            draft.target_policy = Some(ctx.evac.policy.clone());
            draft.reserves = Some(r.as_slice());
            draft.shortlist = list;
            let scope = Scope {
                only_nodes: Some(vec![n]),
                stopped_off_maintenance: ctx.evac.include_stopped,
                make_room: 0,
            };
            let fixed = fix::fix_all(&mut draft, &scope);
            *shortlist.borrow_mut() = draft.shortlist.take();
            fixed?;
            let moved = moved(marked, state, &draft.state, &draft.migrations);
            let trial = Trial {
                unplaced: draft.unplaced,
                skipped: draft.skipped,
                after: draft.state,
                payload: draft.migrations,
                moved: Some(moved),
                closed: Vec::new(),
            };
            drop(r);
            let mut r = reserves.borrow_mut();
            for &c in closed {
                r[c.get()] = base[c.get()];
            }
            Ok(trial)
        };
        // Targets at the CPU ceiling already take nothing that uses CPU: closed at once; so
        // are those an earlier try found it would push over.
        let mut in_trial = vec![false; self.marked.nodes().len()];
        for &t in trial {
            in_trial[t.get()] = true;
        }
        let full: Vec<NodeIdx> = self
            .at_cap
            .iter()
            .copied()
            .filter(|r| !in_trial[r.get()])
            .collect();
        // Closed besides: the targets an earlier try found full of CPU, and the nodes to be
        // tried next (a guest put there would move again when they are freed).
        let mut shut = vec![false; in_trial.len()];
        for &r in &full {
            shut[r.get()] = true;
        }
        let mut closed = full.clone();
        for &r in self.cpu_full.iter().chain(next) {
            if !in_trial[r.get()] && !shut[r.get()] {
                shut[r.get()] = true;
                closed.push(r);
            }
        }
        let holding = [self.holding.as_slice(), &[n]].concat();
        let local = Local {
            on: &self.on,
            before: &self.state,
            holding: &holding,
            rooms: &self.rooms,
        };
        // With the next nodes closed as well the guests may not fit by their memory alone:
        // then only the open try runs.
        let closes_more = closed.len() > full.len();
        let first = if closes_more && self.shortfall(n, &demand, Some(&shut), work).is_some() {
            None
        } else {
            let closed = (closed.clone(), true);
            Some(try_free(
                &ctx,
                trial,
                (&mut *work, cost),
                closed,
                Some(&local),
                &run,
            )?)
        };
        let outcome = match first {
            Some(outcome) if outcome.is_ok() || !closes_more => outcome,
            // Tried again with only the full targets closed, so that keeping the others closed
            // never keeps a node an open try would free.
            _ => {
                let full = (full.clone(), true);
                try_free(&ctx, trial, (&mut *work, cost), full, Some(&local), &run)?
            }
        };
        let mut list = self.shortlist.borrow_mut();
        if let Some(list) = list.as_ref() {
            *work += list.take_checks();
        }
        match outcome {
            Ok(t) => {
                // Each step numbers from 0: after the accepted ones.
                let base = self.migrations.last().map_or(0, |m| m.step + 1);
                self.migrations
                    .extend(t.payload.into_iter().map(|m| Migration {
                        step: m.step + base,
                        ..m
                    }));
                self.skipped.extend(t.skipped);
                let mut changed: Vec<NodeIdx> = Vec::new();
                for &g in t.moved.as_deref().unwrap_or_default() {
                    let (from, to) = (self.state.location(g), t.after.location(g));
                    self.on[from.get()].retain(|&x| x != g);
                    self.on[to.get()].push(g);
                    changed.extend([from, to]);
                    let guest = ctx.cluster.guest(g);
                    if guest.running {
                        let fp = guest.mem_footprint();
                        self.running[from.get()] = self.running[from.get()].saturating_sub(fp);
                        self.running[to.get()] += fp;
                    }
                }
                changed.sort_unstable();
                changed.dedup();
                // Targets the step closed for the CPU ceiling stay closed to the next steps.
                for &r in &t.closed {
                    if !shut[r.get()] {
                        shut[r.get()] = true;
                        self.cpu_full.push(r);
                    }
                }
                self.state = t.after;
                // The nodes the step changed: their figures for the next steps (work counted by
                // the judgement, which looked at them).
                for &c in &changed {
                    self.rooms
                        .update(ctx.cluster, &self.state, c, self.running[c.get()]);
                    self.packing_rooms
                        .update(ctx.cluster, &self.state, c, self.running[c.get()]);
                    if !in_trial[c.get()] && at_cpu_cap(&ctx, &self.state, c) {
                        self.at_cap.insert(c);
                    } else {
                        self.at_cap.remove(&c);
                    }
                }
                self.rooms.remove(n);
                self.packing_rooms.remove(n);
                self.at_cap.remove(&n);
                if let Some(list) = list.as_mut() {
                    list.settle();
                    list.remove(n);
                }
                self.holding.retain(|h| !self.on[h.get()].is_empty());
                if !self.on[n.get()].is_empty() {
                    self.holding.push(n);
                }
                Ok(Ok(()))
            }
            Err(why) => {
                if let Some(list) = list.as_mut() {
                    list.revert(ctx.cluster, &self.state);
                }
                if fresh {
                    self.marked.unmark_emptied(n, &ctx.evac.emptied_as);
                }
                Ok(Err(why))
            }
        }
    }

    /// The memory of the running guests on `n` that a try moves, largest first, and whether one
    /// of them is in a bundle with a member elsewhere (for [`Self::shortfall`]); adds the guests
    /// looked at to `work`.
    fn demand(&self, n: NodeIdx, work: &mut u64) -> (Vec<u64>, bool) {
        let cluster = self.ctx.cluster;
        let on = &self.on[n.get()];
        *work += on.len() as u64;
        let mut split = false;
        let mut items: Vec<u64> = on
            .iter()
            .filter_map(|&g| {
                let unit = self.units.get(self.units.of(g));
                split |= unit.is_bundle() && unit.node(&self.state) != Some(n);
                let guest = cluster.guest(g);
                (guest.running && guest.migrating_to().is_none()).then(|| guest.mem_footprint())
            })
            .collect();
        items.sort_unstable_by(|a, b| b.cmp(a));
        (items, split)
    }

    /// Why the guests on `n` (their [`Self::demand`]) cannot all be placed on the open targets,
    /// from their memory alone ([`room_shortfall`]); `None` when they may fit. The targets at the
    /// CPU ceiling are closed to every run of a try, so their room does not count, nor that of
    /// the nodes flagged in `shut` (closed to a run).
    fn shortfall(
        &self,
        n: NodeIdx,
        (items, split): &(Vec<u64>, bool),
        shut: Option<&[bool]>,
        work: &mut u64,
    ) -> Option<String> {
        let rooms = self
            .packing_rooms
            .roomiest()
            .filter(|&(_, r)| {
                r != n && !self.at_cap.contains(&r) && shut.is_none_or(|s| !s[r.get()])
            })
            .map(|(room, _)| room);
        let name = &self.ctx.cluster.node(n).name;
        let limits = (*split, self.ctx.options.max_memory);
        room_shortfall(name, items, rooms, limits, work)
    }

    /// The plan of the accepted steps, which free `freed`: figures, waves and order as an
    /// evacuation's.
    pub(super) fn plan(self, freed: &[NodeIdx]) -> Result<Plan> {
        let ctx = self.ctx;
        let measure = ctx.evac.measure;
        let kind = measure.kind_for(ctx.evac.metric, &self.marked, &self.state);
        let mut draft = Draft::new(
            &self.marked,
            ctx.rules,
            ctx.ceiling,
            ctx.state,
            kind,
            measure,
            0,
            usize::MAX,
        );
        draft.target_policy = Some(ctx.evac.policy.clone());
        draft.state = self.state;
        draft.migrations = once_each(self.migrations);
        draft.skipped = self.skipped;
        let mut targets = freed.to_vec();
        targets.sort();
        Ok(finish_evacuation(draft, ctx.state, &targets, ctx.evac))
    }
}

/// Whether host `r` uses its CPUs up to the ceiling in `state`.
fn at_cpu_cap(ctx: &Ctx<'_>, state: &State, r: NodeIdx) -> bool {
    let cap = ctx.cluster.node(r).maxcpu * ctx.options.max_cpu;
    state.usage(r).cpu >= cap - 1e-9
}

/// The guests a try's migrations moved (a bundle's members too), from `before` to `after`, once
/// each.
fn moved(
    cluster: &Cluster,
    before: &State,
    after: &State,
    migrations: &[Migration],
) -> Vec<GuestIdx> {
    let mut v: Vec<GuestIdx> = migrations
        .iter()
        .flat_map(|m| std::iter::once(m.vmid).chain(m.bundle.iter().copied()))
        .filter_map(|vmid| cluster.guest_idx(vmid))
        .filter(|&g| before.location(g) != after.location(g))
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// The migrations with each guest moved once: a guest an early step put on a node a later step
/// freed moves from where it was straight to its last target, at the later step (so every node
/// holds, between the two, no more than the steps judged: less, on the node it skips).
fn once_each(migrations: Vec<Migration>) -> Vec<Migration> {
    let mut last: std::collections::HashMap<u32, usize> = std::collections::HashMap::new();
    for (i, m) in migrations.iter().enumerate() {
        last.insert(m.vmid, i);
    }
    let mut origin: std::collections::HashMap<u32, String> = std::collections::HashMap::new();
    let mut out = Vec::with_capacity(last.len());
    for (i, mut m) in migrations.into_iter().enumerate() {
        if last.get(&m.vmid) != Some(&i) {
            origin.entry(m.vmid).or_insert(m.from);
            continue;
        }
        if let Some(from) = origin.remove(&m.vmid) {
            // The reason names the node it leaves: where it really is until then.
            let (was, now) = (
                format!("{} is being freed", m.from),
                format!("{from} is being freed"),
            );
            m.reason = m.reason.replacen(&was, &now, 1);
            m.from = from;
        }
        out.push(m);
    }
    out
}

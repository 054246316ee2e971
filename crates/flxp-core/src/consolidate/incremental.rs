//! Large clusters: a candidate node is tried by placing only its own guests on the state the
//! nodes freed before it leave, instead of planning the evacuation of every freed node anew (which
//! grows with the square of the nodes freed). The plan is the accepted steps in order, judged by
//! the same limits after each step; it must not hold anything the small-cluster path would refuse.

use super::judge::{Local, Trial, try_free};
use super::{Ctx, KeptBecause};
use crate::Result;
use crate::balance::draft::Draft;
use crate::balance::fix::{self, Scope};
use crate::balance::units::Units;
use crate::balance::{Migration, Plan, Skipped};
use crate::cluster::{Cluster, GuestIdx, NodeIdx};
use crate::evacuate::finish_evacuation;
use crate::placement::Placer;
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
        Self {
            ctx,
            marked: ctx.cluster.clone(),
            state: ctx.state.clone(),
            migrations: Vec::new(),
            skipped: Vec::new(),
            units: Units::new(ctx.cluster, ctx.rules),
            on,
            running,
            cpu_full: Vec::new(),
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
        let fresh = !self.marked.node(n).in_maintenance();
        self.marked.empty_for(n, ctx.evac.emptied_as.clone());
        // The guests on n now (some may have come from a node freed before), each judged over
        // every host.
        let cost = self.on[n.get()].len() as u64 * ctx.hosts.len() as u64;
        let (marked, state, units) = (&self.marked, &self.state, &self.units);
        let run = |p: &Placer| -> Result<Trial<Vec<Migration>>> {
            let measure = ctx.evac.measure;
            let kind = (measure.kind_for(ctx.evac.metric, marked, state), measure);
            let units = std::borrow::Cow::Borrowed(units);
            let mut draft =
                Draft::with_units(marked, ctx.rules, p, state, kind, 0, usize::MAX, units);
            p.policy_def(&ctx.evac.policy)?;
            draft.target_policy = Some(ctx.evac.policy.clone());
            let scope = Scope {
                only_nodes: Some(vec![n]),
                stopped_off_maintenance: ctx.evac.include_stopped,
                make_room: 0,
            };
            fix::fix_all(&mut draft, &scope)?;
            let moved = moved(marked, state, &draft.state, &draft.migrations);
            Ok(Trial {
                unplaced: draft.unplaced,
                skipped: draft.skipped,
                after: draft.state,
                payload: draft.migrations,
                moved: Some(moved),
                closed: Vec::new(),
            })
        };
        // Targets at the CPU ceiling already take nothing that uses CPU: closed at once; so
        // are those an earlier try found it would push over.
        let mut in_trial = vec![false; self.marked.nodes().len()];
        for &t in trial {
            in_trial[t.get()] = true;
        }
        let full: Vec<NodeIdx> = ctx
            .hosts
            .iter()
            .copied()
            .filter(|r| !in_trial[r.get()])
            .filter(|&r| {
                let cap = self.marked.node(r).maxcpu * ctx.options.max_cpu;
                self.state.usage(r).cpu >= cap - 1e-9
            })
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
        let local = Local {
            on: &self.on,
            running: &self.running,
            before: &self.state,
        };
        // The nodes looked at to close them.
        *work += ctx.hosts.len() as u64;
        let mut outcome = try_free(
            &ctx,
            trial,
            (&mut *work, cost),
            (closed.clone(), true),
            Some(&local),
            &run,
        )?;
        if outcome.is_err() && closed.len() > full.len() {
            // Tried again with only the full targets closed, so that keeping the others closed
            // never keeps a node an open try would free.
            outcome = try_free(
                &ctx,
                trial,
                (&mut *work, cost),
                (full.clone(), true),
                Some(&local),
                &run,
            )?;
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
                for &g in t.moved.as_deref().unwrap_or_default() {
                    let (from, to) = (self.state.location(g), t.after.location(g));
                    self.on[from.get()].retain(|&x| x != g);
                    self.on[to.get()].push(g);
                    let guest = ctx.cluster.guest(g);
                    if guest.running {
                        let fp = guest.mem_footprint();
                        self.running[from.get()] = self.running[from.get()].saturating_sub(fp);
                        self.running[to.get()] += fp;
                    }
                }
                // Targets the step closed for the CPU ceiling stay closed to the next steps.
                for &r in &t.closed {
                    if !shut[r.get()] {
                        shut[r.get()] = true;
                        self.cpu_full.push(r);
                    }
                }
                self.state = t.after;
                Ok(Ok(()))
            }
            Err(why) => {
                if fresh {
                    self.marked.unmark_emptied(n, &ctx.evac.emptied_as);
                }
                Ok(Err(why))
            }
        }
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

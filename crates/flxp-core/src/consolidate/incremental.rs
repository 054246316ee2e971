//! Large clusters: a candidate node is tried by placing only its own guests on the state the
//! nodes freed before it leave, instead of planning the evacuation of every freed node anew (which
//! grows with the square of the nodes freed). The plan is the accepted steps in order, judged by
//! the same limits after each step; it must not hold anything the small-cluster path would refuse.

use super::judge::{Trial, try_free};
use super::{Ctx, KeptBecause};
use crate::Result;
use crate::balance::draft::Draft;
use crate::balance::fix::{self, Scope};
use crate::balance::units::Units;
use crate::balance::{Migration, Plan, Skipped};
use crate::cluster::{Cluster, NodeIdx};
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
}

impl<'a> Packer<'a> {
    /// Nothing accepted yet.
    pub(super) fn new(ctx: Ctx<'a>) -> Self {
        Self {
            ctx,
            marked: ctx.cluster.clone(),
            state: ctx.state.clone(),
            migrations: Vec::new(),
            skipped: Vec::new(),
            units: Units::new(ctx.cluster, ctx.rules),
        }
    }

    /// Tries freeing the last node of `trial` on top of the others (accepted before): its
    /// guests are placed on the state they leave and the result judged as a whole (each run adds
    /// the cost in `work`). Accepted, it joins them; else why not.
    pub(super) fn try_add(
        &mut self,
        trial: &[NodeIdx],
        work: (&mut u64, u64),
    ) -> Result<std::result::Result<(), (KeptBecause, String)>> {
        let Some(&n) = trial.last() else {
            return Ok(Ok(()));
        };
        let ctx = self.ctx;
        let fresh = !self.marked.node(n).in_maintenance();
        self.marked.empty_for(n, ctx.evac.emptied_as.clone());
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
            Ok(Trial {
                unplaced: draft.unplaced,
                skipped: draft.skipped,
                after: draft.state,
                payload: draft.migrations,
            })
        };
        // Targets at the CPU ceiling already take nothing that uses CPU: closed at once.
        let full: Vec<NodeIdx> = ctx
            .hosts
            .iter()
            .copied()
            .filter(|r| !trial.contains(r))
            .filter(|&r| {
                let cap = self.marked.node(r).maxcpu * ctx.options.max_cpu;
                self.state.usage(r).cpu >= cap - 1e-9
            })
            .collect();
        match try_free(&ctx, trial, work, (full, true), run)? {
            Ok(t) => {
                // Each step numbers from 0: after the accepted ones.
                let base = self.migrations.last().map_or(0, |m| m.step + 1);
                self.migrations
                    .extend(t.payload.into_iter().map(|m| Migration {
                        step: m.step + base,
                        ..m
                    }));
                self.skipped.extend(t.skipped);
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

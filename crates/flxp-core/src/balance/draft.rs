//! The plan under construction: a copy of the state that every chosen migration is applied to, so
//! that each later choice is checked against the state all earlier ones leave behind.
//!
//! Fixes, balancing and evacuation share it. It owns the rules every step obeys: a guest moves at
//! most once per plan (no ping-pong inside a plan), every target passes the placement filters on
//! the current state, and the budget is never exceeded.

use std::collections::{BTreeMap, HashSet};

use crate::Result;
use crate::Warning;
use crate::cluster::{Cluster, GuestIdx, GuestKind, NodeIdx};
use crate::constraints::Rules;
use crate::placement::{Ctx, Placer, Ranked, Reason, Subject};
use crate::state::State;

use super::explain;
use super::measure::{LoadKind, Measure};
use super::movable::{Intent, Mover, Stay, returns, stays_for};
use super::objective::{Objective, Shift};
use super::plan::{Migration, Purpose, Skipped, Unplaced};
use super::shortlist::{SHORT, Shortlist};
use super::units::{UnitId, Units};

/// Whether an applied move opens a decision of its own or joins the previous one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// A step of its own.
    New,
    /// Part of the previous step (the second half of a swap).
    Joined,
}

/// The working state of one plan while it is drafted: moves so far, their state, notes.
pub(crate) struct Draft<'a> {
    /// The cluster.
    pub cluster: &'a Cluster,
    /// Its rules.
    pub rules: &'a Rules,
    /// The placement pipeline every target is checked with.
    pub placer: &'a Placer,
    /// The reported measure.
    pub measure: Measure,
    /// The state after the migrations so far.
    pub state: State,
    /// The objective over `state`.
    pub objective: Objective,
    /// Guests grouped into what moves together (borrowed when many drafts share them).
    pub units: std::borrow::Cow<'a, Units>,
    /// Migrations so far, in run order.
    pub migrations: Vec<Migration>,
    /// Guests that had to move and could not.
    pub unplaced: Vec<Unplaced>,
    /// Guests left in place, with why.
    pub skipped: Vec<Skipped>,
    /// Limits reached and the like.
    pub warnings: Vec<Warning>,
    /// Balance cooldown, seconds.
    pub cooldown_secs: i64,
    /// Balancing takes no guest back to a node it left less than this many seconds ago (0: off).
    pub return_hold_secs: i64,
    /// Guests whose best balancing target the return hold refused, with that refusal: why they
    /// stay if they do.
    pub held: BTreeMap<GuestIdx, Stay>,
    /// Most migrations in the plan.
    pub budget: usize,
    /// Whether running containers may move (by a restart); evacuation always, balancing by option.
    pub restart_containers: bool,
    /// Whose moves these are: flxp's, or Proxmox's auto-rebalance (the `pve-*` methods).
    pub mover: Mover,
    /// The policy that ranks targets; `None` is the placement default.
    pub target_policy: Option<String>,
    /// What one soft rule is worth in imbalance when balancing (`None`: never traded).
    pub soft_weight: Option<f64>,
    /// Whether fixing stopped early because the budget ran out (broken rules left unfixed).
    pub fixes_cut: bool,
    /// Whether the plan gets its [`Bounds`](crate::balance::Bounds); off, they are left unknown
    /// (a plan only judged or listed, where they would cost more than the plan itself).
    pub bounds: bool,
    /// Memory kept free per node, worked out once by the caller (consolidation's ceiling and
    /// closed targets); `None`: the placer's options, looked up per check.
    pub reserves: Option<&'a [u64]>,
    /// The open nodes least loaded first, when a fix's target is picked among the first few of
    /// them instead of every node (large consolidations); kept up to date by [`Self::apply`].
    pub shortlist: Option<Shortlist>,
    moved: Vec<bool>,
    /// Vmids in `skipped` and in `unplaced`: each is recorded once, without a scan.
    noted: (HashSet<u32>, HashSet<u32>),
}

impl<'a> Draft<'a> {
    /// A draft set up as the balance options ask: measure, load kind, cooldown, budget,
    /// containers and soft-rule weight.
    pub(crate) fn for_options(
        cluster: &'a Cluster,
        rules: &'a Rules,
        placer: &'a Placer,
        state: &State,
        options: &super::options::BalanceOptions,
    ) -> Self {
        let measure = options.measure;
        let mut draft = Self::new(
            cluster,
            rules,
            placer,
            state,
            measure.load_kind(options.metric),
            measure,
            options.cooldown_secs,
            options.max_migrations,
        );
        draft.restart_containers = options.restart_containers;
        draft.soft_weight = options.soft_weight;
        draft.return_hold_secs = options.return_hold_secs;
        draft
    }

    /// Starts from a state.
    #[allow(clippy::too_many_arguments)] // one constructor for all entry points; a struct would only rename them
    pub fn new(
        cluster: &'a Cluster,
        rules: &'a Rules,
        placer: &'a Placer,
        state: &State,
        kind: LoadKind,
        measure: Measure,
        cooldown_secs: i64,
        budget: usize,
    ) -> Self {
        let units = std::borrow::Cow::Owned(Units::new(cluster, rules));
        Self::with_units(
            cluster,
            rules,
            placer,
            state,
            (kind, measure),
            cooldown_secs,
            budget,
            units,
        )
    }

    /// [`Self::new`] with the units given (built once and borrowed by many drafts of one
    /// cluster: they depend on its guests and rules only, not on its maintenance marks).
    #[allow(clippy::too_many_arguments)] // as `new`, plus the units
    pub fn with_units(
        cluster: &'a Cluster,
        rules: &'a Rules,
        placer: &'a Placer,
        state: &State,
        (kind, measure): (LoadKind, Measure),
        cooldown_secs: i64,
        budget: usize,
        units: std::borrow::Cow<'a, Units>,
    ) -> Self {
        Self {
            cluster,
            rules,
            placer,
            measure,
            objective: Objective::new(cluster, state, kind),
            state: state.clone(),
            units,
            migrations: Vec::new(),
            unplaced: Vec::new(),
            skipped: Vec::new(),
            warnings: Vec::new(),
            cooldown_secs,
            return_hold_secs: 0,
            held: BTreeMap::new(),
            budget,
            restart_containers: true,
            mover: Mover::Flxp,
            target_policy: None,
            soft_weight: None,
            fixes_cut: false,
            bounds: true,
            reserves: None,
            shortlist: None,
            moved: vec![false; cluster.guests().len()],
            noted: (HashSet::new(), HashSet::new()),
        }
    }

    /// Migrations still allowed.
    pub fn budget_left(&self) -> usize {
        self.budget.saturating_sub(self.migrations.len())
    }

    /// Whether a guest has moved in this plan already.
    pub fn has_moved(&self, guest: GuestIdx) -> bool {
        self.moved[guest.get()]
    }

    /// Why a unit may not move for this intent: the first member's reason, or having moved already.
    pub fn unit_stays(&self, unit: UnitId, intent: Intent) -> Option<(GuestIdx, Stay)> {
        let u = self.units.get(unit);
        if let (Some(rule), Some(&first)) = (&u.conflict, u.members.first()) {
            return Some((first, Stay::Conflict { rule: rule.clone() }));
        }
        u.members
            .iter()
            .find_map(|&m| {
                stays_for(
                    self.cluster,
                    self.rules,
                    m,
                    intent,
                    self.cooldown_secs,
                    self.mover,
                )
                .map(|s| (m, s))
            })
            .or_else(|| {
                if self.restart_containers {
                    return None;
                }
                u.members.iter().find_map(|&m| {
                    let g = self.cluster.guest(m);
                    (g.running && g.kind == GuestKind::Lxc).then_some((m, Stay::RunningContainer))
                })
            })
    }

    /// Why balancing may not take these guests to `to`: the first that would return to a node it
    /// left within the return hold, with the [`Stay::ReturnHold`].
    pub fn returning(&self, members: &[GuestIdx], to: NodeIdx) -> Option<(GuestIdx, Stay)> {
        members.iter().find_map(|&m| {
            (self.state.location(m) != to)
                .then(|| returns(self.cluster, m, to, self.return_hold_secs))
                .flatten()
                .map(|s| (m, s))
        })
    }

    /// For a move that may return a guest (a fix, an evacuation, making room for them):
    /// `returns to pve2, which it left 2 h ago, to ` when one of these guests does so within the
    /// return hold, else nothing; the step's own reason follows.
    pub fn return_words(&self, members: &[GuestIdx], to: NodeIdx) -> String {
        match self.returning(members, to) {
            Some((m, Stay::ReturnHold { node, ago_secs, .. })) => {
                let who = if members.len() > 1 {
                    format!("{} ", self.cluster.guest(m).vmid)
                } else {
                    String::new()
                };
                format!(
                    "{who}returns to {node}, which it left {} ago, to ",
                    crate::units::fmt_secs(ago_secs)
                )
            }
            _ => String::new(),
        }
    }

    /// Whether any member of a unit has moved in this plan.
    pub fn unit_moved(&self, unit: UnitId) -> bool {
        self.units
            .get(unit)
            .members
            .iter()
            .any(|&m| self.has_moved(m))
    }

    /// The subject for moving some guests from where the state has the first of them.
    pub fn subject(&self, members: &[GuestIdx], label: Option<&str>) -> Subject {
        let from = members
            .first()
            .map_or(NodeIdx(0), |&m| self.state.location(m));
        match (members, label) {
            ([single], _) => Subject::guest(self.cluster, self.rules, *single, from),
            (_, label) => {
                let ids: Vec<String> = members
                    .iter()
                    .map(|&m| self.cluster.guest(m).vmid.to_string())
                    .collect();
                Subject::bundle(
                    self.cluster,
                    self.rules,
                    format!("group {} ({})", label.unwrap_or("bundle"), ids.join(", ")),
                    members,
                    from,
                )
            }
        }
    }

    /// What the guests carry.
    pub fn shift(&self, members: &[GuestIdx]) -> Shift {
        Shift::of(members.iter().map(|&m| self.cluster.guest(m)))
    }

    /// Bytes to copy for some guests: memory of the running ones and every local disk.
    pub fn bytes(&self, members: &[GuestIdx]) -> u64 {
        members.iter().fold(0, |sum, &m| {
            sum.saturating_add(self.cluster.guest(m).move_bytes())
        })
    }

    /// The policy that ranks targets.
    pub fn target_policy_name(&self) -> &str {
        self.target_policy
            .as_deref()
            .unwrap_or(&self.placer.options().policy)
    }

    /// The placement context of a subject on the current state, for the placer's filters and
    /// scorers.
    pub fn ctx<'s>(&'s self, subject: &'s Subject) -> Ctx<'s> {
        let mut ctx = Ctx::new(
            self.cluster,
            self.rules,
            &self.state,
            self.placer.options(),
            subject,
        );
        ctx.reserves = self.reserves;
        ctx
    }

    /// [`Self::ranked_targets`], from the shortlist when there is one and the subject has no
    /// soft rule (a preference may favour any node): the first [`SHORT`] open nodes the filters
    /// accept, least loaded first, ranked by the policy. `true` with them when the walk stopped
    /// there (other feasible nodes were not looked at); a walk that finds none falls back to
    /// every node.
    pub fn pick_targets(
        &self,
        subject: &Subject,
        except: &[NodeIdx],
    ) -> Result<(Vec<Ranked>, bool)> {
        let Some(short) = &self.shortlist else {
            return Ok((self.ranked_targets(subject, except)?, false));
        };
        let ctx = self.ctx(subject);
        let soft = !subject.rules.preferences.is_empty()
            || !ctx.prefer_affinity.is_empty()
            || !ctx.prefer_anti_affinity.is_empty();
        if !soft {
            let mut found: Vec<NodeIdx> = Vec::with_capacity(SHORT);
            for n in short.walk().filter(|n| !except.contains(n)) {
                short.count(1);
                if self.placer.feasible(&ctx, n) {
                    found.push(n);
                    if found.len() == SHORT {
                        break;
                    }
                }
            }
            if !found.is_empty() {
                short.count(found.len() as u64);
                let cut = found.len() == SHORT;
                let ranked = self
                    .placer
                    .rank(&ctx, self.target_policy_name(), &found, false)?;
                return Ok((ranked, cut));
            }
        }
        short.count(self.cluster.nodes().len() as u64);
        Ok((self.ranked_targets(subject, except)?, false))
    }

    /// Feasible targets for a subject on the current state, except the given nodes, ranked best
    /// first by the target policy (the placement default unless set).
    pub fn ranked_targets(&self, subject: &Subject, except: &[NodeIdx]) -> Result<Vec<Ranked>> {
        let ctx = self.ctx(subject);
        let feasible: Vec<NodeIdx> = self
            .cluster
            .node_indexes()
            .filter(|n| !except.contains(n) && self.placer.feasible(&ctx, *n))
            .collect();
        self.placer
            .rank(&ctx, self.target_policy_name(), &feasible, false)
    }

    /// Why no node but the given ones takes a subject, condensed.
    pub fn why_nowhere(&self, subject: &Subject, except: &[NodeIdx]) -> String {
        let ctx = self.ctx(subject);
        explain::condensed_failures(
            &ctx,
            self.placer,
            self.cluster.node_indexes().filter(|n| !except.contains(n)),
        )
    }

    /// Whether every node but the given ones refuses a subject for at least one reason `fixed`
    /// accepts (true when there is no other node).
    pub fn refused_by_fixed_rules(
        &self,
        subject: &Subject,
        except: &[NodeIdx],
        fixed: impl Fn(&Reason) -> bool,
    ) -> bool {
        let ctx = self.ctx(subject);
        self.cluster
            .node_indexes()
            .filter(|n| !except.contains(n))
            .all(|n| {
                self.placer
                    .failures(&ctx, n)
                    .iter()
                    .any(|(_, _, reason)| fixed(reason))
            })
    }

    /// Whether a subject may go to a node on the current state.
    pub fn feasible(&self, subject: &Subject, node: NodeIdx) -> bool {
        let ctx = self.ctx(subject);
        self.placer.feasible(&ctx, node)
    }

    /// Applies the migrations of some guests to one node, in the given order, as a new decision
    /// or as part of the previous one (`kind`); guests already there are left alone.
    /// `reason` gets the measure's change appended.
    pub fn apply(
        &mut self,
        members: &[GuestIdx],
        to: NodeIdx,
        purpose: Purpose,
        reason: &str,
        group: Option<&str>,
        kind: Step,
    ) {
        let step = match self.migrations.last() {
            Some(last) if kind == Step::New => last.step + 1,
            Some(last) => last.step,
            None => 0,
        };
        let before = self.objective.measure(self.measure);
        let moving: Vec<GuestIdx> = members
            .iter()
            .copied()
            .filter(|&m| self.state.location(m) != to)
            .collect();
        let bundle: Vec<u32> = if moving.len() > 1 || group.is_some() {
            moving.iter().map(|&m| self.cluster.guest(m).vmid).collect()
        } else {
            Vec::new()
        };
        let first = self.migrations.len();
        for &m in &moving {
            let g = self.cluster.guest(m);
            let from = self.state.location(m);
            self.state.move_guest(self.cluster, m, to);
            if let Some(short) = &mut self.shortlist {
                short.update(self.cluster, &self.state, from);
                short.update(self.cluster, &self.state, to);
            }
            self.objective.refresh_all(self.cluster, &self.state);
            self.moved[m.get()] = true;
            self.migrations.push(Migration {
                vmid: g.vmid,
                kind: g.kind,
                name: g.name.clone(),
                from: self.cluster.node(from).name.clone(),
                to: self.cluster.node(to).name.clone(),
                reason: String::new(),
                purpose,
                online: g.running,
                bytes: g.move_bytes(),
                bundle: bundle.clone(),
                group: group.map(str::to_owned),
                step,
                wave: 0,
                imbalance_after: self.objective.measure(self.measure),
            });
        }
        let after = self.objective.measure(self.measure);
        // The figures close the reason: evacuation restates them in list order.
        let figures = format!(
            "; {} {} → {}",
            self.measure.as_str(),
            self.measure.fmt(before),
            self.measure.fmt(after)
        );
        for (m, &g) in self.migrations[first..].iter_mut().zip(&moving) {
            m.reason = format!("{reason}{}{figures}", how_it_moves(self.cluster.guest(g)));
        }
    }

    /// Drops the migrations after the first `keep` of those planned since `start_len`, when the
    /// state was `start`: the state is rebuilt by replaying the kept ones.
    pub fn rewind(&mut self, start: &State, start_len: usize, keep: usize) {
        let cut = (start_len + keep).min(self.migrations.len());
        for m in &self.migrations[cut..] {
            if let Some(g) = self.cluster.guest_idx(m.vmid) {
                self.moved[g.get()] = false;
            }
        }
        self.migrations.truncate(cut);
        self.state = start.clone();
        for m in &self.migrations[start_len..] {
            if let (Some(g), Some(to)) =
                (self.cluster.guest_idx(m.vmid), self.cluster.node_idx(&m.to))
            {
                self.state.move_guest(self.cluster, g, to);
            }
        }
        self.objective.refresh_all(self.cluster, &self.state);
    }

    /// Records a guest left in place (once per guest).
    pub fn skip(&mut self, guest: GuestIdx, reason: String) {
        let g = self.cluster.guest(guest);
        if !self.noted.0.insert(g.vmid) {
            return;
        }
        self.skipped.push(Skipped {
            vmid: g.vmid,
            name: g.name.clone(),
            node: self.cluster.node(self.state.location(guest)).name.clone(),
            reason,
        });
    }

    /// Records guests that had to move and could not (once per guest).
    pub fn unplaced(&mut self, members: &[GuestIdx], rule: &str, reason: &str) {
        for &m in members {
            let g = self.cluster.guest(m);
            if !self.noted.1.insert(g.vmid) {
                continue;
            }
            self.unplaced.push(Unplaced {
                vmid: g.vmid,
                name: g.name.clone(),
                node: self.cluster.node(self.state.location(m)).name.clone(),
                rule: rule.to_owned(),
                reason: reason.to_owned(),
            });
        }
    }
}

/// What the migration of a guest does beyond moving its memory, for its reason: a running
/// container is restarted on the target (it cannot live-migrate), and local disks are copied.
fn how_it_moves(g: &crate::cluster::Guest) -> String {
    let mut how = String::new();
    if g.running && g.kind == GuestKind::Lxc {
        how.push_str("; a container: stopped, moved and started again on the target");
    }
    if !g.local_disks.is_empty() {
        let disks: Vec<String> = g
            .local_disks
            .iter()
            .map(|d| format!("{} on {}", crate::units::fmt_bytes(d.bytes), d.storage))
            .collect();
        how.push_str(&format!("; copies its local disks ({})", disks.join(", ")));
    }
    how
}

#[cfg(test)]
mod tests {
    // Tests may panic: unwrapping is how they fail.
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::placement::PlacementOptions;
    use crate::testutil::*;

    #[test]
    fn decisions_number_their_steps_and_rewinding_restores_the_state() {
        let c = ClusterBuilder::new()
            .nodes(&["a", "b"])
            .guest(vm(101, "a"))
            .guest(vm(102, "a"))
            .guest(vm(103, "b"))
            .build();
        let rules = Rules::compile(&c);
        let p = Placer::new(PlacementOptions::default(), Vec::new()).unwrap();
        let start = State::new(&c);
        let mut draft = Draft::new(
            &c,
            &rules,
            &p,
            &start,
            LoadKind::Memory,
            Measure::Spread,
            0,
            5,
        );
        let g = |v| c.guest_idx(v).unwrap();
        let (a, b) = (c.node_idx("a").unwrap(), c.node_idx("b").unwrap());
        draft.apply(&[g(101)], b, Purpose::Balance, "one", None, Step::New);
        draft.apply(&[g(102)], b, Purpose::Swap, "two", None, Step::New);
        draft.apply(&[g(103)], a, Purpose::Swap, "two", None, Step::Joined);
        let steps: Vec<u32> = draft.migrations.iter().map(|m| m.step).collect();
        assert_eq!(steps, vec![0, 1, 1]);
        assert_eq!(draft.budget_left(), 2);
        assert!(draft.has_moved(g(103)));
        assert_eq!(draft.migrations[0].reason, "one; spread 3.1 pp → 3.1 pp");
        draft.rewind(&start, 0, 1);
        assert_eq!(draft.migrations.len(), 1);
        assert!(!draft.has_moved(g(102)) && !draft.has_moved(g(103)));
        assert_eq!(draft.state.location(g(101)), b);
        assert_eq!(draft.state.location(g(102)), a);
        assert_eq!(draft.objective.measure(Measure::Spread), 3.125);
    }
}

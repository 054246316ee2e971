//! The order migrations of a plan may start in.
//!
//! Every migration was checked by the planner on the state all earlier ones leave behind. That
//! state only matters on the two nodes a migration touches, so one may start as soon as every
//! earlier migration touching its source or target has ended, whatever happens elsewhere in the
//! zone. Three exceptions let migrations run side by side although they share a node: members of
//! one step (a bundle, the halves of a swap: the planner judged them as one decision), members of
//! one wave (evacuation's waves were planned to run in parallel within the inflow limit), and
//! departures from one node to different targets: a departure only frees room and lifts rules on
//! its source, so two of them commute there, and neither touches the other's target. This keeps
//! each node's arrivals, and its departures relative to its arrivals, in plan order, which is what
//! makes the plan's safety carry over; how many run at once is then up to the [`Limits`].

use flxp_core::balance::Migration;

use crate::limits::{Limits, Slots};

/// Where a migration of the plan stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Not started yet.
    Pending,
    /// Running now.
    Running,
    /// Ended: done, failed or dropped.
    Ended,
}

/// The migrations of the plan being carried out, in plan order, with their status.
#[derive(Debug, Clone, Default)]
pub struct Queue {
    items: Vec<(Migration, Status)>,
}

impl Queue {
    /// A queue of a plan's migrations, all pending.
    pub fn new(migrations: Vec<Migration>) -> Self {
        Self {
            items: migrations
                .into_iter()
                .map(|m| (m, Status::Pending))
                .collect(),
        }
    }

    /// The migration at a position.
    pub fn get(&self, i: usize) -> &Migration {
        &self.items[i].0
    }

    /// Sets the status of the migration at a position.
    pub fn set(&mut self, i: usize, status: Status) {
        self.items[i].1 = status;
    }

    /// Whether nothing is pending.
    pub fn is_drained(&self) -> bool {
        !self.items.iter().any(|(_, s)| *s == Status::Pending)
    }

    /// Pending migrations, in plan order.
    pub fn pending(&self) -> impl Iterator<Item = &Migration> {
        self.items
            .iter()
            .filter(|(_, s)| *s == Status::Pending)
            .map(|(m, _)| m)
    }

    /// Whether the migration at `i` waits for an earlier one (see the module docs).
    fn waits_for_earlier(&self, i: usize) -> bool {
        let m = &self.items[i].0;
        self.items[..i].iter().any(|(e, s)| {
            *s != Status::Ended && e.step != m.step && e.wave != m.wave && conflicts(e, m)
        })
    }

    /// The first pending migration that may start now: no earlier one it waits for, and a free
    /// slot within the limits.
    pub fn next_ready(&self, slots: &Slots, limits: &Limits) -> Option<usize> {
        self.next_ready_where(slots, limits, |_| true)
    }

    /// [`Self::next_ready`] among the pending migrations `keep` accepts.
    pub fn next_ready_where(
        &self,
        slots: &Slots,
        limits: &Limits,
        keep: impl Fn(&Migration) -> bool,
    ) -> Option<usize> {
        (0..self.items.len()).find(|&i| {
            self.items[i].1 == Status::Pending
                && keep(&self.items[i].0)
                && !self.waits_for_earlier(i)
                && slots
                    .admits(limits, &self.items[i].0.from, &self.items[i].0.to)
                    .is_ok()
        })
    }
}

/// Whether `m` must wait for the earlier `e`: they share a node, other than both leaving it.
fn conflicts(e: &Migration, m: &Migration) -> bool {
    e.to == m.to || e.to == m.from || e.from == m.to
}

#[cfg(test)]
mod tests {
    use flxp_core::balance::Purpose;
    use flxp_core::cluster::GuestKind;

    use super::*;

    fn m(vmid: u32, from: &str, to: &str, step: u32, wave: u32) -> Migration {
        Migration {
            vmid,
            kind: GuestKind::Qemu,
            name: format!("vm{vmid}"),
            from: from.into(),
            to: to.into(),
            reason: String::new(),
            purpose: Purpose::Balance,
            online: true,
            bytes: 1 << 30,
            bundle: Vec::new(),
            group: None,
            step,
            wave,
            imbalance_after: 0.0,
        }
    }

    /// Migrations of VMs 1, 2, … along these `(from, to)` moves, each its own step and wave.
    fn chain(moves: &[(&str, &str)]) -> Vec<Migration> {
        (0u32..)
            .zip(moves)
            .map(|(i, (from, to))| m(i + 1, from, to, i, i))
            .collect()
    }

    const WIDE: Limits = Limits {
        parallel: 10,
        per_node_in: 10,
        per_node_out: 10,
    };

    /// A queue and its slots as the executor keeps them, under fixed limits.
    struct Run {
        q: Queue,
        slots: Slots,
        limits: Limits,
    }

    impl Run {
        fn new(migrations: Vec<Migration>, limits: Limits) -> Self {
            Self {
                q: Queue::new(migrations),
                slots: Slots::default(),
                limits,
            }
        }

        /// Starts every migration that may start, in order, and returns their vmids.
        fn start(&mut self) -> Vec<u32> {
            let mut started = Vec::new();
            while let Some(i) = self.q.next_ready(&self.slots, &self.limits) {
                let g = self.q.get(i).clone();
                self.slots.take(&g.from, &g.to);
                self.q.set(i, Status::Running);
                started.push(g.vmid);
            }
            started
        }

        /// Marks the `i`-th migration ended, its slots still taken.
        fn end(&mut self, i: usize) {
            self.q.set(i, Status::Ended);
        }

        /// Gives the `i`-th migration's slots back and marks it ended.
        fn finish(&mut self, i: usize) {
            let g = self.q.get(i).clone();
            self.slots.give(&g.from, &g.to);
            self.end(i);
        }
    }

    #[test]
    fn steps_on_disjoint_nodes_run_side_by_side() {
        let mut r = Run::new(chain(&[("a", "b"), ("c", "d"), ("b", "e")]), WIDE);
        assert_eq!(r.start(), [1, 2]);
        r.end(0);
        assert_eq!(r.start(), [3]);
    }

    #[test]
    fn a_later_step_never_overtakes_a_waiting_one_on_a_shared_node() {
        // 2 waits for 1 (node b); 3 shares node c with 2, which has not run yet: 3 waits too.
        let mut r = Run::new(chain(&[("a", "b"), ("b", "c"), ("c", "d")]), WIDE);
        assert_eq!(r.start(), [1]);
        r.end(0);
        assert_eq!(r.start(), [2]);
        r.end(1);
        assert_eq!(r.start(), [3]);
        assert!(r.q.is_drained());
    }

    #[test]
    fn one_wave_runs_in_parallel_within_the_limits_and_a_node_takes_its_waves_in_order() {
        // Evacuating m: wave 0 sends two guests each to x and y, wave 1 one more to x.
        let limits = Limits {
            parallel: 3,
            per_node_in: 1,
            per_node_out: 4,
        };
        let mut r = Run::new(
            vec![
                m(1, "m", "x", 0, 0),
                m(2, "m", "y", 1, 0),
                m(3, "m", "x", 2, 0),
                m(4, "m", "y", 3, 0),
                m(5, "m", "x", 4, 1),
            ],
            limits,
        );
        assert_eq!(r.start(), [1, 2]);
        r.finish(0);
        assert_eq!(r.start(), [3]);
        r.finish(1);
        assert_eq!(r.start(), [4], "wave 1's arrival at x waits for wave 0's");
        r.finish(2);
        assert_eq!(
            r.start(),
            [5],
            "a departure from m does not wait for another one to y"
        );
    }

    #[test]
    fn departures_from_one_node_overlap_but_an_arrival_there_waits() {
        let mut r = Run::new(
            chain(&[("a", "b"), ("a", "c"), ("d", "a"), ("a", "e")]),
            WIDE,
        );
        assert_eq!(r.start(), [1, 2]);
        for i in [0, 1] {
            r.finish(i);
        }
        assert_eq!(r.start(), [3], "4 leaves a after 3 arrived, as planned");
    }

    #[test]
    fn the_halves_of_a_swap_run_together() {
        let mut r = Run::new(
            vec![m(1, "a", "b", 0, 0), m(2, "b", "a", 0, 1)],
            Limits::default(),
        );
        assert_eq!(r.start(), [1, 2]);
        assert_eq!(r.q.pending().count(), 0);
    }
}

//! Hard filters, one file each defining a [`BuiltinFilter`] (or a
//! [`StatefulFilter`](super::registry::StatefulFilter), with state of its own) as `FILTER`, listed
//! once below; `../registry.rs` serves the list.

#[cfg(doc)]
use super::registry::BuiltinFilter;
use super::{Filter, Reason};

/// Declares each filter module and lists its filter in [`ALL`], one line per module.
macro_rules! filters {
    ($($module:ident :: $filter:ident),* $(,)?) => {
        $(pub mod $module;)*

        /// Every filter, in the order they run and are explained.
        pub static ALL: &[&dyn Filter] = &[$(&$module::$filter),*];

        /// How many there are: [`Ctx`](super::Ctx) keeps their prepared states inline.
        pub(crate) const COUNT: usize = [$(stringify!($module)),*].len();
    };
}

filters! {
    online::FILTER,
    maintenance::FILTER,
    memory::FILTER,
    cpu::FILTER,
    storage::FILTER,
    node_rules::FILTER,
    selector::FILTER,
    taints::FILTER,
    affinity::FILTER,
    anti_affinity::FILTER,
}

/// `Ok` when nothing was `found`, else the reason `refuse` makes of it: for the filters that
/// list what a node lacks or breaks (`selector`, `taints`, `node-rules`).
fn refuse_any<T>(found: Vec<T>, refuse: impl FnOnce(Vec<T>) -> Reason) -> Result<(), Reason> {
    if found.is_empty() {
        Ok(())
    } else {
        Err(refuse(found))
    }
}

/// Judges an optional overcommit cap, for `cpu` and `memory` (their `passes` and `check` both
/// call it, so all compare alike): `Ok` when no cap is set (`ratio` is `None`) or `committed`
/// is not `over` the node's `cap` for the ratio; else the reason `breach` builds from
/// `(committed, cap, ratio)`.
fn judge_cap<T: Copy>(
    ratio: Option<f64>,
    committed: T,
    cap: impl FnOnce(f64) -> T,
    over: impl FnOnce(T, T) -> bool,
    breach: impl FnOnce(T, T, f64) -> Reason,
) -> Result<(), Reason> {
    let Some(ratio) = ratio else {
        return Ok(());
    };
    let cap = cap(ratio);
    if over(committed, cap) {
        Err(breach(committed, cap, ratio))
    } else {
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod testing {
    //! Running one filter on one node of a built cluster.
    use crate::cluster::Cluster;
    use crate::constraints::Rules;
    use crate::placement::{Ctx, Filter, PlacementOptions, PlacementRequest, Reason, Subject};
    use crate::state::State;

    /// A new VM's subject from memory, cores and tags.
    pub fn new_vm(c: &Cluster, memory: u64, cores: impl Into<f64>, tags: &[&str]) -> Subject {
        let rules = Rules::compile(c);
        let req = PlacementRequest {
            memory,
            cores: cores.into(),
            tags: tags.iter().map(|t| (*t).to_owned()).collect(),
            ..PlacementRequest::default()
        };
        Subject::new_vm(c, &rules, &req)
            .map(|(s, _)| s)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// The filter's verdict on `node` for a plain new VM (1 GiB, 1 core, no tags) under the
    /// default options.
    pub fn plain_verdict(f: &dyn Filter, c: &Cluster, node: &str) -> Result<(), Reason> {
        let s = new_vm(c, crate::units::GIB, 1, &[]);
        verdict(f, c, &s, &PlacementOptions::default(), node)
    }

    /// The filter's verdict on a node.
    pub fn verdict(
        f: &dyn Filter,
        c: &Cluster,
        s: &Subject,
        opts: &PlacementOptions,
        node: &str,
    ) -> Result<(), Reason> {
        let rules = Rules::compile(c);
        let state = State::new(c);
        let ctx = Ctx::new(c, &rules, &state, opts, s);
        let idx = c.node_idx(node).unwrap_or_else(|| panic!("no node {node}"));
        f.check(&ctx, &ctx.view(idx))
    }
}

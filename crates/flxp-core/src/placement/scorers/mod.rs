//! Scorers, one file each, listed once below; `../registry.rs` serves the list.
//!
//! A new scorer is its file (the [`super::Scorer`] and [`Registered`] impls) and one line in
//! `scorers!`.

use super::registry::ScorerEntry;

/// A scorer's registration, read by the registry: its name and one line for users.
pub trait Registered {
    /// Stable name, the same as `Scorer::name`.
    const NAME: &'static str;
    /// One line for users (GUIDE, config errors).
    const DOC: &'static str;
}

/// Declares each scorer module and lists its scorers in [`ALL`], one line per module.
macro_rules! scorers {
    ($($module:ident :: { $($scorer:ident),+ $(,)? }),* $(,)?) => {
        $(pub mod $module;)*

        /// Every scorer, in the order listed.
        pub const ALL: &[ScorerEntry] = &[$($(ScorerEntry {
            name: <$module::$scorer as Registered>::NAME,
            doc: <$module::$scorer as Registered>::DOC,
            make: || Box::new($module::$scorer),
        },)+)*];
    };
}

scorers! {
    free_memory::{FreeMemory},
    free_cpu::{FreeCpu},
    least_loaded::{LeastLoaded},
    spread::{Spread},
    pack::{Pack},
    pve_topsis::{PveStatic, PveDynamic},
    prefer_node::{PreferNode},
    prefer_affinity::{PreferAffinity, PreferAntiAffinity},
    prefer_no::{PreferNo},
}

#[cfg(test)]
pub(crate) mod testing {
    //! Running one scorer over all feasible nodes of a built cluster.
    use crate::cluster::Cluster;
    use crate::constraints::Rules;
    use crate::placement::{Ctx, PlacementOptions, Scorer, Subject};
    use crate::state::State;

    /// (node name, normalised score) for every node, or `None` when the scorer does not apply.
    pub fn scores(sc: &dyn Scorer, c: &Cluster, s: &Subject) -> Option<Vec<(String, f64)>> {
        let rules = Rules::compile(c);
        let state = State::new(c);
        let opts = PlacementOptions::default();
        let ctx = Ctx::new(c, &rules, &state, &opts, s);
        if !sc.applies(&ctx) {
            return None;
        }
        let views: Vec<_> = c.node_indexes().map(|n| ctx.view(n)).collect();
        let mut raw = sc.score_all(&ctx, &views);
        sc.normalize(&mut raw);
        Some(
            views
                .iter()
                .zip(raw)
                .map(|(v, s)| (v.node.name.clone(), (s * 1e6).round() / 1e6))
                .collect(),
        )
    }
}

//! Scorers, one file each defining its [`BuiltinScorer`]s, listed once below; `../registry.rs`
//! serves the list. A new scorer is its file and one line in `scorers!`.

use super::registry::BuiltinScorer;

/// Declares each scorer module and lists its scorers in [`ALL`], one line per module.
macro_rules! scorers {
    ($($module:ident :: { $($scorer:ident),+ $(,)? }),* $(,)?) => {
        $(pub mod $module;)*

        /// Every scorer, in the order listed.
        pub static ALL: &[&BuiltinScorer] = &[$($(&$module::$scorer,)+)*];
    };
}

scorers! {
    free_memory::{SCORER},
    free_cpu::{SCORER},
    least_loaded::{SCORER},
    spread::{SCORER},
    pack::{SCORER},
    pve_topsis::{STATIC, DYNAMIC},
    prefer_node::{SCORER},
    prefer_affinity::{AFFINITY, ANTI_AFFINITY},
    prefer_no::{SCORER},
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

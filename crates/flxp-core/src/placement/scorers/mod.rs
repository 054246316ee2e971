//! Scorers, one file each. Registered in `../registry.rs`.

pub mod free_cpu;
pub mod free_memory;
pub mod least_loaded;
pub mod pack;
pub mod prefer_affinity;
pub mod prefer_no;
pub mod prefer_node;
pub mod pve_topsis;
pub mod spread;

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

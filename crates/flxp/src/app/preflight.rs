//! Checks of the config against the live clusters at start, before anything is served: a storage
//! profile naming a storage no zone has, an image whose template does not exist or is not a
//! template. Each mistake is reported with its config key and line, like the file's own checks.
//!
//! A zone that cannot be read at start is not a config mistake: it is logged, `/readyz` reports
//! it, and the checks use the zones that could be read.

use std::collections::BTreeMap;
use std::path::Path;

use flxp_core::Cluster;
use flxp_core::cluster::GuestKind;

use crate::config::{Config, ConfigError};

/// The clusters read at start, by zone.
pub type Clusters<'a> = BTreeMap<&'a str, &'a Cluster>;

/// Checks the catalog against the zones that could be read; the first mistake, placed.
pub fn check(
    config: &Config,
    clusters: &Clusters<'_>,
    text: &str,
    file: &Path,
) -> Result<(), ConfigError> {
    check_catalog(config, clusters)
        .map_err(|(key, message)| ConfigError::at_key(text, file, &key, message))
}

/// The same, with the key and message of the first mistake (pure, for tests).
pub fn check_catalog(config: &Config, clusters: &Clusters<'_>) -> Result<(), (String, String)> {
    if clusters.is_empty() {
        return Ok(());
    }
    for (zone, nodes) in &config.overrides {
        let Some(cluster) = clusters.get(zone.as_str()) else {
            continue;
        };
        for node in nodes.keys() {
            if cluster.node_idx(node).is_none() {
                let names: Vec<&str> = cluster.nodes().iter().map(|n| n.name.as_str()).collect();
                return Err((
                    format!("overrides.{zone}.{node}"),
                    format!(
                        "node {node:?} is not in zone {zone}; nodes: {}",
                        names.join(", ")
                    ),
                ));
            }
        }
    }
    for (id, p) in &config.storage_profiles {
        let found = clusters
            .values()
            .any(|c| c.storages().iter().any(|s| s.storage == p.storage));
        if !found {
            let mut known: Vec<&str> = clusters
                .values()
                .flat_map(|c| c.storages().iter().map(|s| s.storage.as_str()))
                .collect();
            known.sort_unstable();
            known.dedup();
            return Err((
                format!("storage-profiles.{id}.storage"),
                format!(
                    "storage {:?} exists in no zone ({}); storages: {}",
                    p.storage,
                    clusters.keys().copied().collect::<Vec<_>>().join(", "),
                    known.join(", ")
                ),
            ));
        }
    }
    for (id, img) in &config.images {
        if let Some(vmid) = img.template {
            let zones_without: Vec<&str> = clusters
                .iter()
                .filter(|(z, _)| img.zones.get(**z).is_none_or(|iz| iz.template.is_none()))
                .map(|(z, _)| *z)
                .collect();
            let problems: Vec<String> = zones_without
                .iter()
                .filter_map(|z| {
                    template_problem(clusters[z], vmid, None).map(|p| format!("zone {z}: {p}"))
                })
                .collect();
            if !zones_without.is_empty() && problems.len() == zones_without.len() {
                return Err((format!("images.{id}.template"), problems.join("; ")));
            }
            for p in &problems {
                tracing::warn!(image = %id, "{p}; the image cannot be used there");
            }
        }
        for (zone, iz) in &img.zones {
            let Some(cluster) = clusters.get(zone.as_str()) else {
                continue;
            };
            if let Some(vmid) = iz.template {
                if let Some(p) = template_problem(cluster, vmid, None) {
                    return Err((format!("images.{id}.zones.{zone}.template"), p));
                }
            }
            for (node, &vmid) in &iz.nodes {
                if let Some(p) = template_problem(cluster, vmid, Some(node)) {
                    return Err((format!("images.{id}.zones.{zone}.nodes.{node}"), p));
                }
            }
        }
    }
    Ok(())
}

/// Per-node settings naming a node of no zone read (`placement.node-reserve` applies to every
/// zone, so a node missing from one of several zones is normal): one warning per zone, naming
/// the node and the zone. A typo there would otherwise reserve nothing, silently.
pub fn unknown_nodes(config: &Config, clusters: &Clusters<'_>) -> Vec<String> {
    let mut warnings = Vec::new();
    for node in config.placement.node_reserve.keys() {
        if clusters.values().any(|c| c.node_idx(node).is_some()) {
            continue;
        }
        for (zone, cluster) in clusters {
            let names: Vec<&str> = cluster.nodes().iter().map(|n| n.name.as_str()).collect();
            warnings.push(format!(
                "placement.node-reserve names node {node:?}, which is not in zone {zone} (nodes: {})",
                names.join(", ")
            ));
        }
    }
    warnings
}

/// Why `vmid` is not a VM template (on `node`, when given), or `None` when it is.
fn template_problem(cluster: &Cluster, vmid: u32, node: Option<&str>) -> Option<String> {
    let Some(idx) = cluster.guest_idx(vmid) else {
        return Some(format!("template VM {vmid} does not exist"));
    };
    let g = cluster.guest(idx);
    if g.kind != GuestKind::Qemu || !g.template {
        return Some(format!(
            "{} {vmid} ({}) is not a VM template",
            g.kind.as_str(),
            g.name
        ));
    }
    let on = &cluster.node(g.node).name;
    match node {
        Some(n) if n != on => Some(format!("template {vmid} is on node {on}, not on {n}")),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests may panic

    use super::*;

    const ZONE: &str =
        "[zones.lab]\nhosts = [\"pve1\"]\ntoken = \"root@pam!flxp\"\ntoken-secret = \"s\"\n";

    fn demo() -> Cluster {
        Cluster::from_snapshot(&flxp_sim::Scenario::demo().snapshot, &Default::default()).unwrap()
    }

    fn first_mistake(extra: &str) -> Result<(), ConfigError> {
        let text = format!("{ZONE}{extra}");
        let config = Config::parse(&text, Path::new("flxp.toml")).unwrap();
        let c = demo();
        let clusters: Clusters = [("lab", &c)].into_iter().collect();
        check(&config, &clusters, &text, Path::new("flxp.toml"))
    }

    #[test]
    fn a_catalog_matching_the_cluster_passes() {
        first_mistake(
            "[storage-profiles.std]\nstorage = \"ceph\"\ndisk = \"32G\"\n[images.u]\ntemplate = 9000\n",
        )
        .unwrap();
    }

    #[test]
    fn a_node_reserve_for_a_node_of_no_zone_is_a_warning_naming_both() {
        let text =
            format!("{ZONE}[placement]\nnode-reserve = {{ pve1 = \"1G\", pve9 = \"2G\" }}\n");
        let config = Config::parse(&text, Path::new("flxp.toml")).unwrap();
        let c = demo();
        let clusters: Clusters = [("lab", &c)].into_iter().collect();
        assert_eq!(
            unknown_nodes(&config, &clusters),
            [
                "placement.node-reserve names node \"pve9\", which is not in zone lab (nodes: pve1, pve2, pve3, pve4)"
            ]
        );
        assert!(check(&config, &clusters, &text, Path::new("flxp.toml")).is_ok());
    }

    #[test]
    fn live_mistakes_name_their_key_and_line() {
        let cases = [
            (
                "[storage-profiles.fast]\nstorage = \"nvme\"\ndisk = \"32G\"\n",
                6,
                "storage-profiles.fast.storage",
                "storage \"nvme\" exists in no zone (lab); storages: ceph, local, local-lvm",
            ),
            (
                "[images.u]\ntemplate = 4242\n",
                6,
                "images.u.template",
                "zone lab: template VM 4242 does not exist",
            ),
            (
                "[images.u]\ntemplate = 101\n",
                6,
                "images.u.template",
                "zone lab: qemu 101 (web-1) is not a VM template",
            ),
            (
                "[images.u.zones.lab]\ntemplate = 201\n",
                6,
                "images.u.zones.lab.template",
                "lxc 201 (dns-1) is not a VM template",
            ),
            (
                "[images.u.zones.lab.nodes]\npve2 = 9000\n",
                6,
                "images.u.zones.lab.nodes.pve2",
                "template 9000 is on node pve1, not on pve2",
            ),
            (
                "[overrides.lab.pve9]\nmaintenance = true\n",
                5,
                "overrides.lab.pve9",
                "node \"pve9\" is not in zone lab; nodes: pve1, pve2, pve3, pve4",
            ),
        ];
        for (extra, line, key, message) in cases {
            let e = first_mistake(extra).unwrap_err();
            assert_eq!(e.key, key, "{extra}: {e}");
            assert_eq!(e.message, message, "{extra}: {e}");
            assert_eq!(e.place.map(|p| p.line), Some(line), "{extra}: {e}");
            assert!(
                e.to_string()
                    .starts_with(&format!("config file flxp.toml:{line}:")),
                "{e}"
            );
        }
    }
}

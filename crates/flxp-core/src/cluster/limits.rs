//! Upper bounds on the memory and CPU figures of a snapshot, so that no sum the decisions form
//! overflows.
//!
//! Proxmox reports memory in bytes as `u64`. No machine has a pebibyte of RAM, but a broken or
//! hand-edited snapshot may say `18446744073709551615`, and adding two of those overflows. Every
//! figure is held to [`MAX_BYTES`] and the cluster's total to [`MAX_TOTAL_BYTES`]: then any sum of
//! a subset of guests and nodes plus one new VM (itself at most [`MAX_BYTES`]) fits in a `u64`.
//! CPU figures are `f64`: they cannot overflow, but `1e308` cores make an infinite sum and then
//! NaN scores, so they are held to [`MAX_CPUS`]. Checked once here, so the arithmetic of the
//! decisions can stay plain.

use super::{Guest, Node};
use crate::units::fmt_bytes;
use crate::{Error, Result};

/// The largest memory figure accepted for one node or guest: 1 PiB, far beyond any real machine.
pub const MAX_BYTES: u64 = 1 << 50;

/// The largest sum of all memory figures of a cluster: 4 EiB, a quarter of `u64::MAX`.
pub const MAX_TOTAL_BYTES: u64 = 1 << 62;

/// The largest CPU figure accepted: a `maxcpu` of 1 048 576 CPUs, or a `cpu` of that many times
/// the guest's or node's CPUs. Keeps every CPU sum finite (an infinite one turns scores into NaN).
pub const MAX_CPUS: f64 = 1_048_576.0;

/// Refuses a memory figure above [`MAX_BYTES`] or a CPU figure above [`MAX_CPUS`] (naming the entry
/// and field), or a cluster whose memory figures add up beyond [`MAX_TOTAL_BYTES`].
pub(super) fn check(nodes: &[Node], guests: &[(String, Guest)]) -> Result<()> {
    let mut total: u128 = 0;
    let node_figures = nodes.iter().map(|n| {
        let figures = vec![("maxmem", Some(n.maxmem)), ("mem", n.mem)];
        (format!("node/{}", n.name), figures)
    });
    let guest_figures = guests.iter().map(|(_, g)| {
        let figures = vec![
            ("maxmem", Some(g.maxmem)),
            ("mem", Some(g.mem)),
            ("memhost", g.memhost),
        ];
        (g.id(), figures)
    });
    for (entry, figures) in node_figures.chain(guest_figures) {
        for (field, value) in figures {
            let Some(value) = value else { continue };
            if value > MAX_BYTES {
                return Err(Error::Resource {
                    entry,
                    message: format!(
                        "{field} {value} bytes is more than {} (no machine has that much memory)",
                        fmt_bytes(MAX_BYTES)
                    ),
                });
            }
            total += u128::from(value);
        }
    }
    let node_cpus = nodes
        .iter()
        .map(|n| (format!("node/{}", n.name), n.maxcpu, n.cpu));
    let guest_cpus = guests.iter().map(|(_, g)| (g.id(), g.maxcpu, g.cpu));
    for (entry, maxcpu, cpu) in node_cpus.chain(guest_cpus) {
        for (field, value) in [("maxcpu", maxcpu), ("cpu", cpu)] {
            if value > MAX_CPUS {
                return Err(Error::Resource {
                    entry,
                    message: format!(
                        "{field} {value:e} is more than {MAX_CPUS} (no machine has that many CPUs)"
                    ),
                });
            }
        }
    }
    if total > u128::from(MAX_TOTAL_BYTES) {
        return Err(Error::Snapshot {
            path: "resources".into(),
            message: format!(
                "the memory figures of all nodes and guests add up to {total} bytes, more than \
                 4 EiB (no cluster has that much memory)"
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    // Tests may panic on a broken fixture: that is the failure report.
    #![allow(clippy::unwrap_used)]
    use crate::testutil::refusal;
    use crate::{Cluster, Overrides};

    /// Asserts the snapshot is refused with an error starting with `start`.
    fn assert_refused_with(json: &str, start: &str) {
        let e = refusal(json);
        assert!(e.starts_with(start), "{e}");
    }

    #[test]
    fn a_guest_of_u64_max_bytes_is_an_error_naming_it_not_an_overflow() {
        // Two of these used to overflow the node's committed-memory sum (a panic in debug builds,
        // a wrapped, tiny figure in release builds).
        let json = r#"[{"type":"node","node":"a","status":"online","maxmem":68719476736,"mem":1,"maxcpu":8},
            {"id":"qemu/100","type":"qemu","vmid":100,"node":"a","status":"running","maxmem":18446744073709551615,"mem":18446744073709551615},
            {"id":"qemu/101","type":"qemu","vmid":101,"node":"a","status":"running","maxmem":18446744073709551615,"mem":18446744073709551615}]"#;
        let e = refusal(json);
        assert_eq!(
            e,
            "invalid resource qemu/100: maxmem 18446744073709551615 bytes is more than 1.0 PiB \
             (no machine has that much memory)"
        );
    }

    #[test]
    fn node_figures_and_memhost_are_bounded_too() {
        let node =
            r#"[{"type":"node","node":"a","status":"online","maxmem":2251799813685248,"mem":1}]"#;
        assert_refused_with(
            node,
            "invalid resource node/a: maxmem 2251799813685248 bytes",
        );
        let memhost = r#"[{"id":"lxc/7","type":"lxc","vmid":7,"node":"a","status":"running","memhost":1e18}]"#;
        assert_refused_with(
            memhost,
            "invalid resource lxc/7: memhost 1000000000000000000 bytes",
        );
    }

    #[test]
    fn a_cluster_whose_figures_add_up_past_4_eib_is_refused() {
        // 4100 guests of 1 PiB each: every figure is allowed, their sum is not.
        let mut entries =
            vec![r#"{"type":"node","node":"a","status":"online","maxmem":1}"#.to_owned()];
        for vmid in 100..4200 {
            entries.push(format!(
                r#"{{"type":"qemu","vmid":{vmid},"node":"a","status":"running","maxmem":1125899906842624}}"#
            ));
        }
        let e = refusal(&format!("[{}]", entries.join(",")));
        assert!(
            e.contains("add up to") && e.contains("more than 4 EiB"),
            "{e}"
        );
    }

    #[test]
    fn negative_cpu_counts_are_errors_naming_the_entry() {
        let json = r#"[{"id":"node/a","type":"node","node":"a","status":"online","maxmem":1024,"maxcpu":-8}]"#;
        let e = refusal(json);
        assert_eq!(e, "invalid resource node/a: negative maxcpu -8");
        let json = r#"[{"type":"node","node":"a","status":"online","maxmem":1024,"maxcpu":8},
            {"id":"qemu/100","type":"qemu","vmid":100,"node":"a","status":"running","maxcpu":-2}]"#;
        let e = refusal(json);
        assert_eq!(e, "invalid resource qemu/100: negative maxcpu -2");
    }

    #[test]
    fn cpu_figures_of_1e308_are_errors_naming_the_entry_not_nan_scores() {
        // These used to make the free-cpu and pve-dynamic scorers return NaN ("scorer returned
        // NaN, outside 0..=100": a bug report for a bad input).
        let json = r#"[{"type":"node","node":"a","status":"online","maxmem":1024,"maxcpu":8},
            {"id":"qemu/100","type":"qemu","vmid":100,"node":"a","status":"running","maxcpu":2,"cpu":1e308}]"#;
        let e = refusal(json);
        assert_eq!(
            e,
            "invalid resource qemu/100: cpu 1e308 is more than 1048576 (no machine has that many CPUs)"
        );
        let json =
            r#"[{"type":"node","node":"a","status":"online","maxmem":1024,"maxcpu":"1e300"}]"#;
        assert_refused_with(json, "invalid resource node/a: maxcpu 1e300 is more than");
    }

    #[test]
    fn the_largest_real_machines_are_accepted() {
        // 48 TiB, the largest single-system-image server sold today, with a guest of half of it.
        let json = r#"[{"type":"node","node":"a","status":"online","maxmem":52776558133248,"mem":1,"maxcpu":896},
            {"type":"qemu","vmid":100,"node":"a","status":"running","maxmem":26388279066624,"mem":26388279066624}]"#;
        let c = Cluster::from_json(json, &Overrides::default()).unwrap();
        assert_eq!(c.guests[0].maxmem, 26_388_279_066_624);
    }
}

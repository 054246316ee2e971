//! Synthetic scenarios of any size, for benchmarks and load tests: heterogeneous nodes, shared
//! `ceph` plus per-node `local-lvm`, guests of mixed sizes placed so no node is overcommitted,
//! a few flxp tags, some containers and stopped guests. Deterministic for a given seed.

use flxp_core::Snapshot;
use flxp_core::snapshot::raw::Resource;

use super::{Scenario, SimSection};

use flxp_core::units::GIB;

/// A scenario of `nodes` nodes and `guests` guests (VMIDs from 100), the same for equal seeds.
pub fn scenario(nodes: usize, guests: usize, seed: u64) -> Scenario {
    let mut state = seed ^ 0xA076_1D64_78BD_642F;
    let mut next = move || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let sizes = [(64u32, 512u64), (48, 384), (32, 256), (16, 128)];
    let nodes = nodes.max(1);
    let mut res = Vec::new();
    let mut free: Vec<i128> = Vec::new();
    for i in 0..nodes {
        let (cpus, mem) = sizes[i % sizes.len()];
        let name = format!("pve{}", i + 1);
        res.push(Resource {
            id: Some(format!("node/{name}")),
            kind: Some("node".into()),
            node: Some(name.clone()),
            status: Some("online".into()),
            maxcpu: Some(f64::from(cpus)),
            maxmem: Some(mem * GIB),
            maxdisk: Some(100 * GIB),
            disk: Some(10 * GIB),
            uptime: Some(864_000),
            level: Some(String::new()),
            ..Resource::default()
        });
        // Keep a fifth of every node free.
        free.push(i128::from(mem * GIB) * 4 / 5);
    }
    for i in 0..nodes {
        let name = format!("pve{}", i + 1);
        for (id, kind, shared) in [("ceph", "rbd", true), ("local-lvm", "lvmthin", false)] {
            res.push(Resource {
                id: Some(format!("storage/{name}/{id}")),
                kind: Some("storage".into()),
                node: Some(name.clone()),
                storage: Some(id.into()),
                plugintype: Some(kind.into()),
                shared: Some(shared),
                content: Some("images,rootdir".into()),
                maxdisk: Some(if shared { 1 << 50 } else { 8 << 40 }),
                disk: Some(0),
                ..Resource::default()
            });
        }
    }
    let mem_sizes = [1u64, 1, 2, 2, 4, 4, 8];
    let mut cursor = 0usize;
    for i in 0..guests {
        let vmid = 100 + i as u32;
        let mem = mem_sizes[(next() % mem_sizes.len() as u64) as usize] * GIB;
        let running = next() % 10 != 0;
        let cost = if running { i128::from(mem) } else { 0 };
        // Round-robin over nodes with room, so placement is even but never overcommitted.
        let mut node = None;
        for step in 0..nodes {
            let n = (cursor + step) % nodes;
            if free[n] >= cost {
                node = Some(n);
                cursor = n + 1;
                break;
            }
        }
        let Some(n) = node else { continue };
        free[n] -= cost;
        let lxc = i % 7 == 6;
        let tags = match i % 10 {
            0 => Some(format!("flxp.anti-affinity.grp{}", i % 50)),
            3 => Some("flxp.ignore".to_string()),
            5 => Some(format!("app{};web", i % 5)),
            _ => None,
        };
        let cpu = (next() % 1000) as f64 / 1000.0 * 0.6;
        res.push(Resource {
            id: Some(format!("{}/{vmid}", if lxc { "lxc" } else { "qemu" })),
            kind: Some(if lxc { "lxc" } else { "qemu" }.into()),
            vmid: Some(vmid),
            name: Some(format!("guest-{vmid}")),
            node: Some(format!("pve{}", n + 1)),
            status: Some(if running { "running" } else { "stopped" }.into()),
            maxmem: Some(mem),
            mem: running.then_some(mem / 2),
            memhost: (running && !lxc).then_some(mem),
            maxcpu: Some(f64::from(1 + (next() % 4) as u32)),
            cpu: running.then_some(cpu),
            maxdisk: Some(32 * GIB),
            uptime: running.then_some(3600),
            tags,
            template: Some(false),
            ..Resource::default()
        });
    }
    Scenario {
        snapshot: Snapshot {
            resources: res,
            time: Some(1_764_400_000),
            ..Snapshot::default()
        },
        sim: SimSection {
            cluster_name: Some(format!("synthetic-{nodes}x{guests}")),
            ..SimSection::default()
        },
    }
}

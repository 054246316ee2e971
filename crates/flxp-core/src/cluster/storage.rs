//! Storages per node and the guests' local disks: what a migration copies and where it must fit.
//!
//! A storage is local when Proxmox does not report it `shared` (storage.cfg's `shared` flag, set
//! for the inherently shared types); a guest's volumes on a local storage of its node are copied by
//! a migration and need room on the same storage id of the target (flxp sends no `targetstorage`).

use std::collections::HashMap;

use serde::Serialize;

use super::{Guest, LocalDisk, NodeIdx};
use crate::snapshot::{Resource, Snapshot};

/// A storage as seen from one node.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Storage {
    /// Storage id.
    pub storage: String,
    /// Node that sees it.
    pub node: NodeIdx,
    /// Whether all nodes share it.
    pub shared: bool,
    /// Size in bytes.
    pub maxdisk: u64,
    /// Used bytes.
    pub disk: u64,
    /// Content types (`images,rootdir`).
    pub content: String,
    /// Free bytes as `GET /nodes/{node}/storage` reports them (`avail`), when collected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub avail: Option<u64>,
}

impl Storage {
    /// Bytes a copied disk may still take: `avail` when known, else size − used.
    pub fn free(&self) -> u64 {
        self.avail
            .unwrap_or_else(|| self.maxdisk.saturating_sub(self.disk))
    }
}

/// The storage entries of `/cluster/resources` on known nodes, with `avail` from the node extras.
pub(super) fn collect(snapshot: &Snapshot, nodes: &HashMap<String, NodeIdx>) -> Vec<Storage> {
    snapshot
        .resources
        .iter()
        .filter(|r| r.kind.as_deref() == Some("storage"))
        .filter_map(|r: &Resource| {
            let node_name = r.node.as_deref()?;
            let node = *nodes.get(node_name)?;
            let storage = r.storage.clone().unwrap_or_default();
            let avail = snapshot
                .nodes
                .get(node_name)
                .and_then(|x| x.storage_avail.get(&storage).copied());
            Some(Storage {
                storage,
                node,
                shared: r.shared.unwrap_or(false),
                maxdisk: r.maxdisk.unwrap_or(0),
                disk: r.disk.unwrap_or(0),
                content: r.content.clone().unwrap_or_default(),
                avail,
            })
        })
        .collect()
}

/// Indexes of `storages` per node, in their order.
pub(super) fn by_node(storages: &[Storage], nodes: usize) -> Vec<Vec<usize>> {
    let mut out = vec![Vec::new(); nodes];
    for (i, s) in storages.iter().enumerate() {
        out[s.node.get()].push(i);
    }
    out
}

/// Gives each guest its volumes on local storages of the node it is on, summed per storage.
///
/// Volumes of guests on other nodes (leftovers, a copy in flight) and on storages the node
/// reports shared are not the guest's local disks and are left out.
pub(super) fn assign_local_disks(
    snapshot: &Snapshot,
    storages: &[Storage],
    by_node: &[Vec<usize>],
    nodes: &HashMap<String, NodeIdx>,
    guests: &mut [Guest],
    guest_by_vmid: &HashMap<u32, super::GuestIdx>,
) {
    for (name, extra) in &snapshot.nodes {
        let Some(&node) = nodes.get(name) else {
            continue;
        };
        for v in extra.volumes.iter().filter(|v| v.is_guest_disk()) {
            let (Some(vmid), Some(storage)) = (v.vmid, v.storage()) else {
                continue;
            };
            let shared = by_node[node.get()]
                .iter()
                .map(|&i| &storages[i])
                .any(|s| s.storage == storage && s.shared);
            let Some(g) = guest_by_vmid.get(&vmid).map(|g| &mut guests[g.get()]) else {
                continue;
            };
            if shared || g.node != node {
                continue;
            }
            let bytes = v.size.unwrap_or(0);
            match g.local_disks.iter_mut().find(|d| d.storage == storage) {
                Some(d) => d.bytes = d.bytes.saturating_add(bytes),
                None => g.local_disks.push(LocalDisk {
                    storage: storage.to_owned(),
                    bytes,
                }),
            }
        }
    }
    for g in guests.iter_mut() {
        g.local_disks.sort_by(|a, b| a.storage.cmp(&b.storage));
    }
}

#[cfg(test)]
mod tests {
    use crate::cluster::{Cluster, Overrides};

    #[test]
    fn the_snapshot_volumes_give_local_disks_and_avail_gives_free_room() {
        let json = r#"{"resources":[
            {"id":"node/a","type":"node","node":"a","status":"online","maxcpu":4,"maxmem":8589934592},
            {"id":"node/b","type":"node","node":"b","status":"online","maxcpu":4,"maxmem":8589934592},
            {"id":"qemu/104","type":"qemu","node":"a","vmid":104,"status":"running","maxmem":1073741824},
            {"id":"qemu/105","type":"qemu","node":"b","vmid":105,"status":"stopped","maxmem":1073741824},
            {"id":"storage/a/local-lvm","type":"storage","node":"a","storage":"local-lvm","shared":0,"maxdisk":1000,"disk":100},
            {"id":"storage/a/ceph","type":"storage","node":"a","storage":"ceph","shared":1,"maxdisk":1000,"disk":0},
            {"id":"storage/b/local-lvm","type":"storage","node":"b","storage":"local-lvm","shared":0,"maxdisk":1000,"disk":100}],
          "nodes":{
            "a":{"storage_avail":{"local-lvm":850},"volumes":[
              {"volid":"local-lvm:vm-104-disk-0","vmid":104,"size":30,"content":"images"},
              {"volid":"local-lvm:vm-104-disk-1","vmid":104,"size":12,"content":"images"},
              {"volid":"ceph:vm-104-disk-2","vmid":104,"size":500,"content":"images"},
              {"volid":"local-lvm:vm-105-disk-0","vmid":105,"size":7,"content":"images"},
              {"volid":"local:backup/vzdump-qemu-104.vma","vmid":104,"size":9,"content":"backup"}]},
            "b":{"notes":"old form: no storage fields"}}}"#;
        let c = Cluster::from_json(json, &Overrides::default()).unwrap();
        let g104 = c.guest(c.guest_idx(104).unwrap());
        // Shared ceph, a backup, and 105's leftover on a (105 is on b) are not 104's local disks.
        assert_eq!(g104.local_disk_bytes(), 42);
        assert!(c.guest(c.guest_idx(105).unwrap()).local_disks.is_empty());
        let a = c.node_idx("a").unwrap();
        let b = c.node_idx("b").unwrap();
        let on_a = c.storage_on(a, "local-lvm").unwrap();
        let on_b = c.storage_on(b, "local-lvm").unwrap();
        assert_eq!(c.storages[on_a].free(), 850, "avail wins");
        assert_eq!(c.storages[on_b].free(), 900, "size − used without avail");
        assert!(c.has_local_disks());
    }
}

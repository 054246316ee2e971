//! Clone (`POST /nodes/{node}/qemu/{vmid}/clone`): linked clones of templates, full clones of
//! anything, `target` only when every disk is on shared storage. The new VM appears at once,
//! locked `clone`, on the target node; the `qmclone` task (id = the source VMID) unlocks it when
//! the disks are copied.

use std::collections::BTreeMap;

use flxp_core::units::GIB;

use super::{Action, Config, Guest, GuestKind, GuestUsage, World, guest::is_disk_key};
use crate::ApiError;

/// What `POST /nodes/{node}/qemu/{vmid}/clone` asks for.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CloneRequest {
    /// The node in the path.
    pub node: String,
    /// The source VM.
    pub vmid: u32,
    /// The new VMID.
    pub newid: u32,
    /// New name (default `Copy-of-VM-<name>`).
    pub name: Option<String>,
    /// New description.
    pub description: Option<String>,
    /// Target node.
    pub target: Option<String>,
    /// Full clone (default: linked for templates, full otherwise).
    pub full: Option<bool>,
    /// Target storage of a full clone.
    pub storage: Option<String>,
    /// Pool to add the clone to.
    pub pool: Option<String>,
    /// Who asks.
    pub user: String,
}

impl World {
    /// The guests (other than `owner`) whose disks are linked clones of `disk`, a base volume
    /// of `owner`: same storage, `base-...` volume name as their base.
    pub(crate) fn linked_clones_of(&self, owner: u32, disk: &super::Disk) -> Vec<u32> {
        let Some((storage, volname)) = disk.volid.split_once(':') else {
            return Vec::new();
        };
        if !volname.starts_with("base-") || volname.contains('/') {
            return Vec::new();
        }
        self.guests
            .values()
            .filter(|g| g.vmid != owner)
            .filter(|g| {
                g.disks().iter().any(|od| {
                    od.storage.as_deref() == Some(storage) && od.base.as_deref() == Some(volname)
                })
            })
            .map(|g| g.vmid)
            .collect()
    }

    /// `POST .../clone`: the new VM appears at once, locked `clone`, and unlocks when its disks
    /// are copied (full clone) or linked (linked clone).
    pub fn clone_guest(&mut self, req: CloneRequest) -> Result<String, ApiError> {
        let src = self.guest_at(GuestKind::Qemu, &req.node, req.vmid)?.clone();
        if let Some(lock) = src.lock() {
            return Err(ApiError::locked(lock));
        }
        let template = src.is_template();
        let full = req.full.unwrap_or(!template);
        if req.storage.is_some() && !full {
            return Err(ApiError::die(
                "parameter 'storage' not allowed for linked clones",
            ));
        }
        let disks: Vec<_> = src
            .disks()
            .into_iter()
            .filter(|d| !d.cdrom || d.cloudinit)
            .collect();
        if !full && !template {
            if let Some(d) = disks.first() {
                return Err(ApiError::die(format!(
                    "Linked clone feature is not supported for drive '{}'",
                    d.key
                )));
            }
        }
        let target = req.target.clone().filter(|t| *t != req.node);
        if let Some(t) = &target {
            self.node(t)?;
            if let Some(s) = &req.storage {
                if !self.is_shared(s) {
                    return Err(ApiError::die(format!(
                        "can't clone to non-shared storage '{s}'"
                    )));
                }
            }
            let all_shared = disks
                .iter()
                .all(|d| d.storage.as_deref().is_some_and(|s| self.is_shared(s)));
            if !all_shared {
                return Err(ApiError::die(format!(
                    "can't clone VM to node '{t}' (VM uses local storage)"
                )));
            }
        }
        let dest_node = target.clone().unwrap_or_else(|| req.node.clone());
        if let Some(s) = &req.storage {
            match self.storages.get(s) {
                None => return Err(ApiError::die(format!("storage '{s}' does not exist"))),
                Some(st) if !st.available_on(&dest_node) => {
                    return Err(ApiError::die(format!(
                        "storage '{s}' is not available on node '{dest_node}'"
                    )));
                }
                _ => {}
            }
        }
        if self.guests.contains_key(&req.newid) {
            return Err(ApiError::die(format!(
                "unable to create VM {}: config file already exists",
                req.newid
            )));
        }
        if let Some(p) = &req.pool {
            if !self.pools.contains_key(p) {
                return Err(ApiError::die(format!("pool '{p}' does not exist")));
            }
        }

        let now = self.now;
        let task = self.start_task(&req.node, "qmclone", &req.vmid.to_string(), &req.user);
        let mut values = BTreeMap::new();
        let mut copied = 0u64;
        let mut disk_index = 0;
        for (k, v) in &src.config.values {
            if matches!(
                k.as_str(),
                "lock" | "template" | "parent" | "vmstate" | "snaptime" | "digest"
            ) || k.starts_with("unused")
            {
                continue;
            }
            let (prefix, _) = super::guest::split_indexed(k);
            let new = if prefix == "net" {
                let mac = self.new_mac();
                replace_mac(v, &mac)
            } else if k == "smbios1" {
                format!("uuid={}", self.new_uuid())
            } else if k == "vmgenid" {
                self.new_uuid()
            } else if is_disk_key(GuestKind::Qemu, k) {
                let d = super::parse_disk(GuestKind::Qemu, k, v);
                let opts: Vec<&str> = v.split(',').skip(1).collect();
                let rest = if opts.is_empty() {
                    String::new()
                } else {
                    format!(",{}", opts.join(","))
                };
                match &d.storage {
                    Some(storage) if d.cloudinit => {
                        let dest = req
                            .storage
                            .clone()
                            .filter(|_| full)
                            .unwrap_or_else(|| storage.clone());
                        format!("{dest}:vm-{}-cloudinit{rest}", req.newid)
                    }
                    Some(_) if d.cdrom => v.clone(),
                    Some(storage) => {
                        let volname = d.volid.split_once(':').map(|(_, v)| v).unwrap_or_default();
                        let vol = if full {
                            copied = copied.saturating_add(d.size);
                            let dest = req.storage.clone().unwrap_or_else(|| storage.clone());
                            format!("{dest}:vm-{}-disk-{disk_index}", req.newid)
                        } else {
                            format!("{storage}:{volname}/vm-{}-disk-{disk_index}", req.newid)
                        };
                        disk_index += 1;
                        let kind = if full { "full" } else { "linked" };
                        self.tasks.log(
                            task,
                            now,
                            format!("create {kind} clone of drive {k} ({})", d.volid),
                        );
                        format!("{vol}{rest}")
                    }
                    None => v.clone(),
                }
            } else {
                v.clone()
            };
            values.insert(k.clone(), new);
        }
        let name = req
            .name
            .clone()
            .unwrap_or_else(|| format!("Copy-of-VM-{}", src.name().unwrap_or("")));
        values.insert("name".into(), name);
        if let Some(d) = &req.description {
            values.insert("description".into(), d.clone());
        }
        values.insert("lock".into(), "clone".into());
        let guest = Guest {
            vmid: req.newid,
            kind: GuestKind::Qemu,
            node: dest_node,
            running: false,
            config: Config {
                values,
                ..Config::default()
            },
            usage: GuestUsage {
                pressure: Default::default(),
                ..GuestUsage::default()
            },
            started_at: now,
            created_at: now,
            pool: req.pool.clone(),
        };
        self.guests.insert(req.newid, guest);
        let duration = if full {
            (copied as f64 / self.settings.clone_bandwidth).max(1.0)
        } else {
            1.0
        };
        if full && copied > 0 {
            self.tasks.log(
                task,
                now + duration,
                format!(
                    "transferred {:.1} GiB of {:.1} GiB (100.00%)",
                    copied as f64 / GIB as f64,
                    copied as f64 / GIB as f64
                ),
            );
        }
        self.schedule(
            now + duration,
            Action::CloneEnd {
                task,
                newid: req.newid,
            },
        );
        self.record();
        Ok(self.upid(task))
    }

    pub(crate) fn on_clone_end(&mut self, task: usize, newid: u32) {
        let now = self.now;
        if let Some(g) = self.guests.get_mut(&newid) {
            if g.lock() == Some("clone") {
                g.config.values.remove("lock");
            }
            self.tasks.finish(task, now, Ok(()));
            self.note_created(task, newid);
        } else {
            self.tasks
                .finish(task, now, Err(format!("clone failed: VM {newid} vanished")));
        }
    }
}

/// Replaces the MAC of a `net` value (`virtio=AA:..,bridge=vmbr0` or `macaddr=`/`hwaddr=`).
fn replace_mac(value: &str, mac: &str) -> String {
    value
        .split(',')
        .map(|part| match part.split_once('=') {
            Some((k, v)) if is_mac(v) => format!("{k}={mac}"),
            _ => part.to_string(),
        })
        .collect::<Vec<_>>()
        .join(",")
}

fn is_mac(v: &str) -> bool {
    v.len() == 17
        && v.split(':').count() == 6
        && v.split(':')
            .all(|p| p.len() == 2 && p.chars().all(|c| c.is_ascii_hexdigit()))
}

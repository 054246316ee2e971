//! Creating a VM for real: place it, clone its image's template to the chosen node, grow its boot
//! disk to the storage profile's size, shape it (cores, memory, cloud-init, interfaces, tags,
//! backup flag), start it, and follow every task to its end. A profile smaller than the
//! template's boot disk is refused before anything is cloned (disks cannot shrink). If any step
//! after the clone fails, the half-made VM is stopped and deleted (purged), and the error says
//! which step failed and why.
//!
//! The placement decision runs under the zone's lock with the resources of creations in flight
//! reserved ([`crate::reserve`]); the slow Proxmox calls run outside it. VMIDs come from
//! `nextid`, which reserves nothing: the id and the clone call that claims it are serialized in
//! this process, and a collision with anyone else ("already exists") takes a fresh id.
//!
//! - [`VmRequest`]: what to create, resolved from profile and image names by the caller.
//! - [`Creator::create`]: the steps; [`CreateError`] says what failed.

mod config;
mod input;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use flxp_core::placement::{Placement, PlacementRequest, Placer};
use flxp_core::units::fmt_bytes;
use flxp_pve::types::{
    CloneParams, DeleteParams, GuestKind, ResizeParams, StartParams, StopParams, Upid,
};
use flxp_pve::{Pve, TaskWait};
use tracing::{info, warn};

pub use config::{
    ClonePlan, DiskInfo, DiskSize, boot_disk, customize, disk_size, disks, is_disk_key, parse_disk,
    parse_size, plan_clone,
};
pub use input::{ImageSource, MAX_INTERFACES, Nic, VmRequest, check_dns_name, check_ssh_key};

use crate::reserve::{ClusterModel, DiskHold, DiskHolds, Hold, Reservations};

/// The steps of a creation, as errors name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Reading the template's config.
    Template,
    /// Taking a VMID.
    NextId,
    /// Cloning the template.
    Clone,
    /// Growing the boot disk to the storage profile's size.
    Resize,
    /// Setting cores, memory, cloud-init, interfaces, tags and the backup flag.
    Configure,
    /// Starting the VM.
    Start,
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Template => "reading the template",
            Self::NextId => "taking a VMID",
            Self::Clone => "cloning the template",
            Self::Resize => "growing the boot disk",
            Self::Configure => "configuring the VM",
            Self::Start => "starting the VM",
        })
    }
}

/// What happened to the half-made VM after a failed step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cleanup {
    /// Nothing had been created.
    NotNeeded,
    /// It was stopped (if needed) and deleted with purge.
    Removed,
    /// Removing it failed too: it is left behind, and this says why.
    Failed(String),
}

impl fmt::Display for Cleanup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotNeeded => Ok(()),
            Self::Removed => f.write_str("; the half-made VM was removed"),
            Self::Failed(why) => write!(
                f,
                "; removing the half-made VM failed too ({why}): remove it by hand"
            ),
        }
    }
}

/// Why a VM could not be created.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CreateError {
    /// A field of the request is invalid.
    #[error("{field}: {message}")]
    Invalid {
        /// The field (`name`, `sshPublicKey`, `password`, `host`, ...).
        field: String,
        /// What is wrong with it.
        message: String,
    },
    /// The image's template is missing, not a template, or unusable in this zone.
    #[error("image {image:?}: {message}")]
    UnknownImage {
        /// The image id.
        image: String,
        /// What is wrong.
        message: String,
    },
    /// No node can take the VM; every node's reason is listed.
    #[error("no node can take the VM: {}", reasons.join("; "))]
    NoCapacity {
        /// `node: why` for every node.
        reasons: Vec<String>,
        /// The whole decision, for explanations.
        placement: Box<Placement>,
    },
    /// The request is valid but this build cannot carry it out.
    #[error("{0}")]
    Unsupported(String),
    /// The core refused the placement request (an unknown policy, a bad tag) or failed.
    #[error("placement: {0}")]
    Placement(#[from] flxp_core::Error),
    /// A step against Proxmox failed.
    #[error("{step} failed{}{}: {source}{cleanup}", vmid.map(|v| format!(" for VM {v}")).unwrap_or_default(), node.as_ref().map(|n| format!(" on {n}")).unwrap_or_default())]
    Step {
        /// Which step.
        step: Step,
        /// The new VM's id, once taken.
        vmid: Option<u32>,
        /// The node it was being created on.
        node: Option<String>,
        /// What Proxmox answered.
        #[source]
        source: Box<flxp_pve::Error>,
        /// What happened to the half-made VM.
        cleanup: Cleanup,
    },
}

/// A VM that was created and started.
#[derive(Debug, Clone, PartialEq)]
pub struct CreatedVm {
    /// Its VMID.
    pub vmid: u32,
    /// Its name.
    pub name: String,
    /// The node it runs on.
    pub node: String,
    /// The placement decision that chose the node.
    pub placement: Placement,
}

/// Knobs of the creation steps.
#[derive(Debug, Clone)]
pub struct CreateOptions {
    /// How to follow clone, resize, start, stop and delete tasks.
    pub wait: TaskWait,
    /// Always full-clone, never linked.
    pub full_clone: bool,
    /// How many VMIDs to try when others take them first.
    pub nextid_attempts: u32,
}

impl Default for CreateOptions {
    fn default() -> Self {
        Self {
            wait: TaskWait {
                timeout: Some(std::time::Duration::from_secs(900)),
                ..TaskWait::default()
            },
            full_clone: false,
            nextid_attempts: 8,
        }
    }
}

/// The tag a VM carries while flxp creates it (see [`Creator::create`]).
pub const CREATING_TAG: &str = "flxp.creating";

/// Creates VMs in one zone: the API, the placement pipeline and the zone's reservations.
pub struct Creator {
    api: Pve,
    placer: Arc<Placer>,
    reservations: Arc<Reservations>,
    options: CreateOptions,
    /// Serializes "take a VMID, claim it with the clone call" in this process: `nextid` answers
    /// the same id to concurrent callers until one of them has created the VM.
    vmid_lock: tokio::sync::Mutex<()>,
}

impl fmt::Debug for Creator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Creator")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

/// A template usable on some node.
#[derive(Debug, Clone)]
struct Source {
    vmid: u32,
    node: String,
    disks: Vec<DiskInfo>,
    boot: Option<DiskInfo>,
}

impl Source {
    fn new(vmid: u32, node: String, cfg: &flxp_pve::types::GuestConfig) -> Self {
        Self {
            vmid,
            node,
            disks: disks(cfg),
            boot: boot_disk(cfg),
        }
    }
}

impl Creator {
    /// A creator for one zone.
    pub fn new(
        api: Pve,
        placer: Arc<Placer>,
        reservations: Arc<Reservations>,
        options: CreateOptions,
    ) -> Self {
        Self {
            api,
            placer,
            reservations,
            options,
            vmid_lock: tokio::sync::Mutex::new(()),
        }
    }

    /// The zone's reservations.
    pub fn reservations(&self) -> &Arc<Reservations> {
        &self.reservations
    }

    /// Creates and starts a VM on `model` (a snapshot taken after the request arrived).
    #[tracing::instrument(skip_all, fields(name = %req.name))]
    pub async fn create(
        &self,
        model: &ClusterModel,
        req: &VmRequest,
    ) -> Result<CreatedVm, CreateError> {
        req.validate()?;
        let cluster = &model.cluster;
        let storage_nodes: Vec<String> = cluster
            .storages
            .iter()
            .filter(|s| s.storage == req.storage)
            .map(|s| cluster.node(s.node).name.clone())
            .collect();
        if storage_nodes.is_empty() {
            return Err(CreateError::Invalid {
                field: "storageProfile".into(),
                message: format!("storage {:?} does not exist in this zone", req.storage),
            });
        }
        let is_shared = |s: &str| cluster.storages.iter().any(|x| x.storage == s && x.shared);

        // Where the image can be cloned to, read before deciding so the decision only picks
        // nodes the VM can really land on.
        let per_node: BTreeMap<String, u32> = req
            .image
            .per_node
            .iter()
            .filter(|(node, vmid)| template_node(model, **vmid).as_deref() == Some(node.as_str()))
            .map(|(n, v)| (n.clone(), *v))
            .collect();
        let shared = match req.image.template {
            Some(vmid) => {
                let node = template_node(model, vmid).ok_or_else(|| CreateError::UnknownImage {
                    image: req.image.id.clone(),
                    message: template_problem(model, vmid),
                })?;
                let cfg = self
                    .api
                    .guest_config(&node, GuestKind::Qemu, vmid)
                    .await
                    .map_err(|e| {
                        step_err(Step::Template, None, Some(&node), e, Cleanup::NotNeeded)
                    })?;
                Some(Source::new(vmid, node, &cfg))
            }
            None => None,
        };
        if shared.is_none() && per_node.is_empty() {
            return Err(CreateError::UnknownImage {
                image: req.image.id.clone(),
                message: format!(
                    "none of its per-node templates is a template on its node ({})",
                    req.image
                        .per_node
                        .iter()
                        .map(|(n, v)| format!("{n}: {}", template_problem(model, *v)))
                        .collect::<Vec<_>>()
                        .join("; ")
                ),
            });
        }
        let landing = |node: &str, held: &DiskHolds| -> Result<(), Unfit> {
            if !storage_nodes.iter().any(|n| n == node) {
                return Err(Unfit::Cannot(format!(
                    "storage {:?} is not available there",
                    req.storage
                )));
            }
            // A storage reporting no size (inactive, or not reported) is not judged here: the
            // clone itself says whether it fits.
            if let Some(free) = storage_free(cluster, &req.storage, node) {
                // Disks of creations in flight are not in the snapshot's figures yet.
                let free =
                    free.saturating_sub(held.on(&req.storage, node, is_shared(&req.storage)));
                if free < req.disk_bytes {
                    return Err(Unfit::NoRoom(format!(
                        "storage {:?} has {} free, the disk needs {}",
                        req.storage,
                        fmt_bytes(free),
                        fmt_bytes(req.disk_bytes)
                    )));
                }
            }
            if per_node.contains_key(node) {
                return Ok(());
            }
            match &shared {
                Some(s) => plan_clone(
                    s.vmid,
                    &s.node,
                    &s.disks,
                    node,
                    &req.storage,
                    self.options.full_clone,
                    is_shared,
                )
                .map(|_| ())
                .map_err(Unfit::Cannot),
                None => Err(Unfit::Cannot(format!(
                    "image {:?} has no template there",
                    req.image.id
                ))),
            }
        };

        let request = PlacementRequest {
            memory: req.memory,
            cores: req.cores.saturating_mul(req.sockets),
            tags: req.tags.clone(),
            host: req.host.clone(),
            policy: req.policy.clone(),
        };
        let hold_cores = f64::from(request.cores);
        let (placement, ticket) =
            self.reservations
                .decide(cluster, model.taken, &model.state, |state, held| {
                    let p = self.placer.place(cluster, &model.rules, state, &request)?;
                    let node = choose(&p, req, &|n: &str| landing(n, held))?;
                    let shared = is_shared(&req.storage);
                    let hold = Hold {
                        node: node.clone(),
                        memory: req.memory,
                        cores: hold_cores,
                        disk: Some(DiskHold {
                            storage: req.storage.clone(),
                            node: (!shared).then(|| node.clone()),
                            bytes: req.disk_bytes,
                        }),
                    };
                    Ok::<_, CreateError>(((p, node), Some(hold)))
                })?;
        let (placement, node) = placement;
        let Some(ticket) = ticket else {
            return Err(CreateError::Unsupported("no reservation was made".into()));
        };
        info!(node = %node, policy = %placement.policy, "placed");

        // The template for that node: its own, else the shared one.
        let source = match per_node.get(&node) {
            Some(&vmid) => {
                let cfg = self
                    .api
                    .guest_config(&node, GuestKind::Qemu, vmid)
                    .await
                    .map_err(|e| {
                        step_err(Step::Template, None, Some(&node), e, Cleanup::NotNeeded)
                    })?;
                Source::new(vmid, node.clone(), &cfg)
            }
            None => shared.clone().ok_or_else(|| CreateError::UnknownImage {
                image: req.image.id.clone(),
                message: format!("has no template for node {node}"),
            })?,
        };
        let plan = plan_clone(
            source.vmid,
            &source.node,
            &source.disks,
            &node,
            &req.storage,
            self.options.full_clone,
            is_shared,
        )
        .map_err(|m| CreateError::UnknownImage {
            image: req.image.id.clone(),
            message: m,
        })?;
        // Disks only grow: a profile below the template's boot disk is refused before cloning.
        let grow = match &source.boot {
            None => {
                return Err(CreateError::UnknownImage {
                    image: req.image.id.clone(),
                    message: format!(
                        "template {} has no boot disk to give the storage profile's {}",
                        source.vmid,
                        fmt_bytes(req.disk_bytes)
                    ),
                });
            }
            // Proxmox always writes `size=`; without it, the resize itself refuses a shrink.
            Some(DiskInfo { size: None, .. }) => true,
            Some(DiskInfo {
                size: Some(current),
                ..
            }) => match disk_size(*current, req.disk_bytes) {
                Ok(DiskSize::Keep) => false,
                Ok(DiskSize::Grow(_)) => true,
                Err(m) => {
                    return Err(CreateError::Invalid {
                        field: "storageProfile".into(),
                        message: m,
                    });
                }
            },
        };

        let (vmid, clone_upid) = self.clone_with_fresh_id(&plan, req, &node).await?;
        ticket.set_vmid(vmid);
        info!(vmid, node = %node, template = plan.template, full = plan.full, "clone started");

        if let Err(e) = self.api.wait_task(&clone_upid, &self.options.wait).await {
            let cleanup = self.remove(&node, vmid, false).await;
            return Err(step_err(Step::Clone, Some(vmid), Some(&node), e, cleanup));
        }
        self.mark_creating(&node, vmid).await;
        if grow {
            if let Err(e) = self.grow_boot_disk(&node, vmid, req.disk_bytes).await {
                let cleanup = self.remove(&node, vmid, false).await;
                return Err(step_err(Step::Resize, Some(vmid), Some(&node), e, cleanup));
            }
        }
        if let Err(e) = self.configure(&node, vmid, req).await {
            let cleanup = self.remove(&node, vmid, false).await;
            return Err(step_err(
                Step::Configure,
                Some(vmid),
                Some(&node),
                e,
                cleanup,
            ));
        }
        let started = match self
            .api
            .start_guest(&node, GuestKind::Qemu, vmid, &StartParams::default())
            .await
        {
            Ok(upid) => self
                .api
                .wait_task(&upid, &self.options.wait)
                .await
                .map(|_| ()),
            Err(e) => Err(e),
        };
        if let Err(e) = started {
            let cleanup = self.remove(&node, vmid, true).await;
            return Err(step_err(Step::Start, Some(vmid), Some(&node), e, cleanup));
        }
        ticket.complete();
        info!(vmid, node = %node, "VM created and started");
        Ok(CreatedVm {
            vmid,
            name: req.name.clone(),
            node,
            placement,
        })
    }

    /// Takes a VMID and claims it with the clone call, retrying when someone else took it.
    async fn clone_with_fresh_id(
        &self,
        plan: &ClonePlan,
        req: &VmRequest,
        node: &str,
    ) -> Result<(u32, Upid), CreateError> {
        let _claim = self.vmid_lock.lock().await;
        let mut last = None;
        for _ in 0..self.options.nextid_attempts.max(1) {
            let vmid = self
                .api
                .next_id(None)
                .await
                .map_err(|e| step_err(Step::NextId, None, Some(node), e, Cleanup::NotNeeded))?;
            let params = CloneParams {
                newid: vmid,
                name: Some(req.name.clone()),
                target: plan.target.clone(),
                full: Some(plan.full),
                storage: plan.storage.clone(),
                description: Some(format!("created by flxp from image {}", req.image.id)),
                ..CloneParams::default()
            };
            match self
                .api
                .clone_qemu(&plan.source_node, plan.template, &params)
                .await
            {
                Ok(upid) => return Ok((vmid, upid)),
                Err(e) if e.is_already_exists() => {
                    warn!(vmid, "VMID taken by someone else meanwhile; taking another");
                    last = Some(e);
                }
                Err(e) => {
                    // An answer that never came may still have created the VM.
                    let cleanup = if e.may_have_been_applied() {
                        self.remove(node, vmid, false).await
                    } else {
                        Cleanup::NotNeeded
                    };
                    return Err(step_err(Step::Clone, Some(vmid), Some(node), e, cleanup));
                }
            }
        }
        Err(match last {
            Some(e) => step_err(Step::NextId, None, Some(node), e, Cleanup::NotNeeded),
            None => CreateError::Unsupported("no VMID attempt was made".into()),
        })
    }

    /// Grows the clone's boot disk to `bytes` and follows the resize to its end.
    ///
    /// The size is read from the clone, not the template: a full clone onto another storage may
    /// come out a little larger, and asking for less would be a shrink Proxmox refuses. The size
    /// is absolute and the call carries the digest just read, so it grows exactly that disk.
    async fn grow_boot_disk(&self, node: &str, vmid: u32, bytes: u64) -> flxp_pve::Result<()> {
        let cloned = self.api.guest_config(node, GuestKind::Qemu, vmid).await?;
        let Some(boot) = boot_disk(&cloned) else {
            return Err(flxp_pve::Error::BadResponse {
                endpoint: format!("/nodes/{node}/qemu/{vmid}/config"),
                message: "the clone has no boot disk, although its template had one".into(),
            });
        };
        if boot.size.is_some_and(|current| current >= bytes) {
            tracing::debug!(vmid, disk = %boot.key, "the clone's boot disk already has the size");
            return Ok(());
        }
        let mut params = ResizeParams::to_size(boot.key.clone(), bytes);
        params.digest = cloned.digest;
        // PVE 8 and later answer a task; earlier releases resized before answering.
        if let Some(upid) = self.api.resize_disk(node, vmid, &params).await? {
            self.api.wait_task(&upid, &self.options.wait).await?;
        }
        info!(vmid, disk = %boot.key, size = %fmt_bytes(bytes), "boot disk grown");
        Ok(())
    }

    /// Reads the clone's config and writes the requested shape onto it (digest-guarded).
    /// Tags the fresh clone `flxp.creating` until `configure` writes its final tags, so that a
    /// creation cut short (flxp killed) leaves a VM every snapshot points out. Best effort: a
    /// failure here only loses that marker.
    async fn mark_creating(&self, node: &str, vmid: u32) {
        let marked = async {
            let cfg = self.api.guest_config(node, GuestKind::Qemu, vmid).await?;
            let mut tags: Vec<String> = cfg
                .get("tags")
                .map(|t| flxp_core::cluster::split_tags(&t))
                .unwrap_or_default();
            tags.push(CREATING_TAG.to_owned());
            let mut update = flxp_pve::types::ConfigUpdate::new().with("tags", tags.join(";"));
            update.digest = cfg.digest.clone();
            self.api
                .update_guest_config(node, GuestKind::Qemu, vmid, &update)
                .await
        };
        if let Err(e) = marked.await {
            warn!(vmid, error = %e, "could not tag the new VM flxp.creating");
        }
    }

    async fn configure(&self, node: &str, vmid: u32, req: &VmRequest) -> flxp_pve::Result<()> {
        let cloned = self.api.guest_config(node, GuestKind::Qemu, vmid).await?;
        let mut update = customize(&cloned, req);
        update.digest = cloned.digest.clone();
        self.api
            .update_guest_config(node, GuestKind::Qemu, vmid, &update)
            .await
    }

    /// Stops (if it may run) and deletes a half-made VM; a VM that is already gone is fine.
    async fn remove(&self, node: &str, vmid: u32, may_run: bool) -> Cleanup {
        if may_run {
            let stop = self
                .api
                .stop_guest(node, GuestKind::Qemu, vmid, &StopParams::default())
                .await;
            match stop {
                Ok(upid) => {
                    if let Err(e) = self.api.wait_task(&upid, &self.options.wait).await {
                        // A VM that never started has nothing to stop: go on to the delete.
                        warn!(vmid, error = %e, "stopping the half-made VM failed");
                    }
                }
                Err(e) if e.is_not_found() => return Cleanup::Removed,
                Err(e) => warn!(vmid, error = %e, "cannot stop the half-made VM"),
            }
        }
        let params = DeleteParams {
            purge: Some(true),
            destroy_unreferenced_disks: Some(true),
        };
        // A clone still holding its lock (a timed-out task) refuses deletion for a while.
        let mut last = String::new();
        for attempt in 0..5u32 {
            if attempt > 0 {
                tokio::time::sleep(self.options.wait.interval).await;
            }
            match self
                .api
                .delete_guest(node, GuestKind::Qemu, vmid, &params)
                .await
            {
                Ok(upid) => match self.api.wait_task(&upid, &self.options.wait).await {
                    Ok(_) => {
                        info!(vmid, node, "half-made VM removed");
                        return Cleanup::Removed;
                    }
                    Err(e) => last = e.to_string(),
                },
                Err(e) if e.is_not_found() => return Cleanup::Removed,
                Err(e) if e.is_locked() => last = e.to_string(),
                Err(e) => {
                    last = e.to_string();
                    break;
                }
            }
        }
        tracing::error!(vmid, node, error = %last, "the half-made VM could not be removed");
        Cleanup::Failed(last)
    }
}

fn step_err(
    step: Step,
    vmid: Option<u32>,
    node: Option<&str>,
    source: flxp_pve::Error,
    cleanup: Cleanup,
) -> CreateError {
    CreateError::Step {
        step,
        vmid,
        node: node.map(str::to_owned),
        source: Box::new(source),
        cleanup,
    }
}

/// The node of a template VM, if `vmid` is a template in the snapshot.
fn template_node(model: &ClusterModel, vmid: u32) -> Option<String> {
    let idx = model.cluster.guest_idx(vmid)?;
    let g = model.cluster.guest(idx);
    (g.template && g.kind == flxp_core::cluster::GuestKind::Qemu)
        .then(|| model.cluster.node(g.node).name.clone())
}

/// Why `vmid` cannot serve as a template.
fn template_problem(model: &ClusterModel, vmid: u32) -> String {
    match model.cluster.guest_idx(vmid) {
        None => format!("template VM {vmid} does not exist"),
        Some(idx) => {
            let g = model.cluster.guest(idx);
            if g.template {
                format!(
                    "{} {vmid} is a container template, not a VM template",
                    g.kind.as_str()
                )
            } else {
                format!("VM {vmid} ({}) is not a template", g.name)
            }
        }
    }
}

/// Free bytes of `storage` as `node` sees it, when the snapshot reports its size.
fn storage_free(cluster: &flxp_core::cluster::Cluster, storage: &str, node: &str) -> Option<u64> {
    cluster
        .storages
        .iter()
        .find(|s| s.storage == storage && cluster.node(s.node).name == node && s.maxdisk > 0)
        .map(|s| s.maxdisk.saturating_sub(s.disk))
}

/// Why a node the placement allows cannot take the VM after all.
enum Unfit {
    /// Not enough room (storage space): a capacity problem.
    NoRoom(String),
    /// The image or storage cannot be used there at all.
    Cannot(String),
}

impl Unfit {
    fn message(&self) -> &str {
        match self {
            Unfit::NoRoom(m) | Unfit::Cannot(m) => m,
        }
    }
}

/// The node the VM goes to: the named host (after the resource check), else the best feasible
/// candidate the image and storage can land on.
fn choose(
    p: &Placement,
    req: &VmRequest,
    landing: &impl Fn(&str) -> Result<(), Unfit>,
) -> Result<String, CreateError> {
    let no_capacity = |reasons: Vec<String>| CreateError::NoCapacity {
        reasons,
        placement: Box::new(p.clone()),
    };
    if let Some(host) = &req.host {
        return match &p.node {
            Some(node) => landing(node).map(|()| node.clone()).map_err(|u| match u {
                Unfit::NoRoom(m) => no_capacity(vec![format!("{node}: {m}")]),
                Unfit::Cannot(m) => CreateError::Invalid {
                    field: "host".into(),
                    message: format!("{node}: {m}"),
                },
            }),
            None => Err(no_capacity(
                p.candidates
                    .iter()
                    .map(|c| format!("{}: {}", c.node, c.reasons.join(", ")))
                    .collect::<Vec<_>>()
                    .into_iter()
                    .chain(
                        p.candidates
                            .is_empty()
                            .then(|| format!("{host}: not usable")),
                    )
                    .collect(),
            )),
        };
    }
    let mut reasons = Vec::new();
    for c in &p.candidates {
        if !c.feasible {
            reasons.push(format!("{}: {}", c.node, c.reasons.join(", ")));
            continue;
        }
        match landing(&c.node) {
            Ok(()) => return Ok(c.node.clone()),
            Err(u) => reasons.push(format!("{}: {}", c.node, u.message())),
        }
    }
    if reasons.is_empty() {
        reasons.push("the zone has no nodes".into());
    }
    Err(no_capacity(reasons))
}

#[cfg(test)]
mod tests;

//! The steps of a creation, each a named function, and the runner that carries them out in
//! order: [`validate`], [`template`], [`reserve`] (which runs [`decide`], the Choose step, under
//! the zone's lock on the blocking pool), [`source`] (the chosen node's template, still the
//! Template step), [`clone_with_fresh_id`], [`clone`], [`resize`], [`configure`], [`start`],
//! [`unmark`]. The runner records which steps succeeded, in the order they ran; when one fails
//! after the clone was asked for, it runs [`clean_up`] (stop if it may run, delete with purge),
//! and the error names the failed step ([`CreateError::step`]).
//!
//! Steps before the clone change nothing in Proxmox: their errors need no cleanup, and dropping
//! the reservation's ticket frees the room they booked.

use std::collections::BTreeMap;
use std::sync::Arc;

use flxp_core::State;
use flxp_core::cluster::Cluster;
use flxp_core::placement::{Placement, PlacementRequest, Placer};
use flxp_core::units::{fmt_bytes, fmt_bytes_apart};
use flxp_pve::types::{
    CloneParams, DeleteParams, GuestKind, ResizeParams, StartParams, StopParams, Upid,
};
use tracing::{info, warn};

use super::{
    CREATING_SINCE_PREFIX, CREATING_TAG, Cleanup, ClonePlan, CreateError, CreateStep, CreatedVm,
    Creator, DiskInfo, DiskSize, VmRequest, boot_disk, customize, disk_size, disks,
    is_creating_tag, plan_clone,
};
use crate::reserve::{ClusterModel, DiskHold, HeldGroup, Holds, NodeHold, Ticket};

/// Carries out the steps for `req` on `model`; see the module docs.
pub(super) async fn run(
    creator: &Creator,
    model: &Arc<ClusterModel>,
    req: &VmRequest,
) -> Result<CreatedVm, CreateError> {
    let mut runner = Runner {
        creator,
        done: Vec::new(),
    };
    let result = runner.steps(model, req).await;
    if let Err(e) = &result {
        warn!(step = %e.step(), done = ?runner.done, error = %e, "creation failed");
    }
    result
}

/// The VM a clone made (or may have made): what [`clean_up`] removes.
struct Made {
    node: String,
    vmid: u32,
}

/// The state of one creation: its creator and the steps that succeeded.
struct Runner<'c> {
    creator: &'c Creator,
    done: Vec<CreateStep>,
}

impl Runner<'_> {
    async fn steps(
        &mut self,
        model: &Arc<ClusterModel>,
        req: &VmRequest,
    ) -> Result<CreatedVm, CreateError> {
        let c = self.creator;
        let mut target = validate(model, req, c.options.full_clone)?;
        self.done.push(CreateStep::Validate);
        target.shared = template(c, &target).await?;
        self.done.push(CreateStep::Template);
        let target = Arc::new(target);
        let (placement, node, ticket) = reserve(c, &target).await?;
        self.done.push(CreateStep::Choose);
        self.done.push(CreateStep::Reserve);
        info!(node = %node, policy = %placement.policy, "placed");
        // The chosen node's own template, read now: part of the Template step, recorded once.
        let (plan, grow) = source(c, &target, &node).await?;

        let (vmid, upid) = match clone_with_fresh_id(c, &plan, req, &node).await {
            Ok(claimed) => claimed,
            Err(Unclaimed::Refused(e)) => return Err(e),
            Err(Unclaimed::MayExist { vmid, error }) => {
                let made = Made { node, vmid };
                return Err(self
                    .failed_after_clone(CreateStep::Clone, &made, error)
                    .await);
            }
        };
        ticket.set_vmid(vmid);
        info!(vmid, node = %node, template = plan.template, full = plan.full, "clone started");
        let made = Made { node, vmid };
        self.after_clone(CreateStep::Clone, &made, clone(c, &upid).await)
            .await?;
        // Best effort, right after the clone (see `mark_creating`); removed by `unmark` last.
        mark_creating(c, &made.node, vmid).await;
        if grow {
            let grown = resize(c, &made.node, vmid, req.disk_bytes).await;
            self.after_clone(CreateStep::Resize, &made, grown).await?;
        }
        let configured = configure(c, &made.node, vmid, req).await;
        self.after_clone(CreateStep::Configure, &made, configured)
            .await?;
        let started = start(c, &made.node, vmid).await;
        self.after_clone(CreateStep::Start, &made, started).await?;
        ticket.complete();
        let mut warnings = Vec::new();
        match unmark(c, &made.node, vmid).await {
            Ok(()) => self.done.push(CreateStep::Unmark),
            // The VM is complete and running: deleting it over a tag would destroy what the
            // caller asked for. A marked VM is pointed out by every snapshot, and the daemon's
            // stale-marker cleanup takes the tag off a running VM without deleting it.
            Err(e) => {
                warn!(vmid, error = %e, "the VM is complete but still carries flxp.creating");
                warnings.push(format!(
                    "VM {vmid} is complete but still carries the tag {CREATING_TAG}: removing it failed ({e})"
                ));
            }
        }
        info!(vmid, node = %made.node, "VM created and started");
        Ok(CreatedVm {
            vmid,
            name: req.name.clone(),
            node: made.node,
            placement,
            warnings,
            clone_task: upid.as_str().to_owned(),
        })
    }

    /// Books a step on the clone; a failed one is cleaned up (a VM that may have started is
    /// stopped first) and reported with what the cleanup did.
    async fn after_clone(
        &mut self,
        step: CreateStep,
        made: &Made,
        result: flxp_pve::Result<()>,
    ) -> Result<(), CreateError> {
        match result {
            Ok(()) => {
                self.done.push(step);
                Ok(())
            }
            Err(e) => Err(self.failed_after_clone(step, made, e).await),
        }
    }

    /// Cleans up after `step` failed with `error` on a VM that exists or may exist (a VM that may
    /// have started is stopped first): the error, with what the cleanup did.
    async fn failed_after_clone(
        &mut self,
        step: CreateStep,
        made: &Made,
        error: flxp_pve::Error,
    ) -> CreateError {
        let may_run = step == CreateStep::Start;
        let cleanup = clean_up(self.creator, &made.node, made.vmid, may_run).await;
        if cleanup == Cleanup::Removed {
            self.done.push(CreateStep::CleanUp);
        }
        step_err(step, Some(made.vmid), Some(&made.node), error, cleanup)
    }
}

/// What a request needs of the zone, as the snapshot shows it. It owns its data (the model
/// shared, the request copied) so that the decision can run on the blocking pool.
struct Target {
    model: Arc<ClusterModel>,
    req: VmRequest,
    /// Nodes that have the storage.
    storage_nodes: Vec<String>,
    /// The image's per-node templates that are templates on their node.
    per_node: BTreeMap<String, u32>,
    /// The image's shared template and its node, when it has one.
    shared_at: Option<(u32, String)>,
    /// The shared template, once [`template`] has read it.
    shared: Option<Source>,
    full_clone: bool,
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
    /// Reads template `vmid`'s config on `node`: its disks decide where it can be cloned to.
    async fn read(c: &Creator, vmid: u32, node: &str) -> Result<Self, CreateError> {
        let cfg = c
            .api
            .guest_config(node, GuestKind::Qemu, vmid)
            .await
            .map_err(|e| {
                step_err(
                    CreateStep::Template,
                    None,
                    Some(node),
                    e,
                    Cleanup::NotNeeded,
                )
            })?;
        Ok(Self {
            vmid,
            node: node.to_owned(),
            disks: disks(&cfg),
            boot: boot_disk(&cfg),
        })
    }
}

/// Checks the request and finds its storage and templates in the snapshot.
fn validate(
    model: &Arc<ClusterModel>,
    req: &VmRequest,
    full_clone: bool,
) -> Result<Target, CreateError> {
    req.validate()?;
    let cluster = &model.cluster;
    let storage_nodes: Vec<String> = cluster
        .storages()
        .iter()
        .filter(|s| s.storage == req.storage)
        .map(|s| cluster.node(s.node).name.clone())
        .collect();
    if storage_nodes.is_empty() {
        return Err(CreateError::Invalid {
            field: "storageProfile".into(),
            message: format!("storage {:?} does not exist in this zone", req.storage),
            step: CreateStep::Validate,
        });
    }
    // Where the image can be cloned to, found before deciding so the decision only picks nodes
    // the VM can really land on.
    let per_node: BTreeMap<String, u32> = req
        .image
        .per_node
        .iter()
        .filter(|(node, vmid)| template_node(model, **vmid).as_deref() == Some(node.as_str()))
        .map(|(n, v)| (n.clone(), *v))
        .collect();
    let shared_at = match req.image.template {
        Some(vmid) => {
            let node = template_node(model, vmid).ok_or_else(|| CreateError::UnknownImage {
                image: req.image.id.clone(),
                message: template_problem(model, vmid),
                step: CreateStep::Validate,
            })?;
            Some((vmid, node))
        }
        None => None,
    };
    if shared_at.is_none() && per_node.is_empty() {
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
            step: CreateStep::Validate,
        });
    }
    Ok(Target {
        model: Arc::clone(model),
        req: req.clone(),
        storage_nodes,
        per_node,
        shared_at,
        shared: None,
        full_clone,
    })
}

/// Reads the shared template's config (its disks decide where it can be cloned to).
async fn template(c: &Creator, target: &Target) -> Result<Option<Source>, CreateError> {
    let Some((vmid, node)) = &target.shared_at else {
        return Ok(None);
    };
    Source::read(c, *vmid, node).await.map(Some)
}

impl Target {
    fn cluster(&self) -> &Cluster {
        &self.model.cluster
    }

    fn is_shared(&self, storage: &str) -> bool {
        self.cluster()
            .storages()
            .iter()
            .any(|x| x.storage == storage && x.shared)
    }

    /// Whether the VM can land on `node`: storage there with room (beyond the disks `held` for
    /// creations in flight) and a template that can be cloned there.
    fn landing(&self, node: &str, held: &Holds) -> Result<(), Unfit> {
        let req = &self.req;
        if !self.storage_nodes.iter().any(|n| n == node) {
            return Err(Unfit::Cannot(format!(
                "storage {:?} is not available there",
                req.storage
            )));
        }
        // A storage reporting no size (inactive, or not reported) is not judged here: the clone
        // itself says whether it fits.
        if let Some(free) = storage_free(self.cluster(), &req.storage, node) {
            // Disks of creations in flight are not in the snapshot's figures yet.
            let free =
                free.saturating_sub(held.on(&req.storage, node, self.is_shared(&req.storage)));
            if free < req.disk_bytes {
                let (free, need) = fmt_bytes_apart(free, req.disk_bytes);
                return Err(Unfit::NoRoom(format!(
                    "storage {:?} has {free} free, the disk needs {need}",
                    req.storage
                )));
            }
        }
        if self.per_node.contains_key(node) {
            return Ok(());
        }
        match &self.shared {
            Some(s) => plan_clone(
                s.vmid,
                &s.node,
                &s.disks,
                node,
                &req.storage,
                self.full_clone,
                |st| self.is_shared(st),
            )
            .map(|_| ())
            .map_err(|e| Unfit::Cannot(e.to_string())),
            None => Err(Unfit::Cannot(format!(
                "image {:?} has no template there",
                req.image.id
            ))),
        }
    }
}

/// Runs [`decide`] under the zone's lock, with creations in flight counted, and books the VM's
/// memory, cores and disk on the node it chose: the ticket holds the room until the VM shows in a
/// snapshot. Placement runs every filter and scorer over every node, so all of it runs on the
/// blocking pool, never on an async worker.
async fn reserve(
    c: &Creator,
    target: &Arc<Target>,
) -> Result<(Placement, String, Ticket), CreateError> {
    let reservations = Arc::clone(&c.reservations);
    let placer = Arc::clone(&c.placer);
    let target = Arc::clone(target);
    let decided = crate::blocking::run("placing the VM", move || {
        let model = &target.model;
        reservations.decide(&model.cluster, model.taken, &model.state, |state, held| {
            decide(&placer, &target, state, held).map(|(p, node, hold)| ((p, node), Some(hold)))
        })
    })
    .await
    .map_err(|e| CreateError::Internal {
        step: CreateStep::Choose,
        message: e.to_string(),
    })?;
    let ((placement, node), ticket) = decided?;
    let Some(ticket) = ticket else {
        return Err(CreateError::Internal {
            step: CreateStep::Reserve,
            message: "the decision booked no room".into(),
        });
    };
    Ok((placement, node, ticket))
}

/// The Choose step: places the VM on `state` (the snapshot's, plus creations in flight), picks
/// the node it can land on beside the disks `held` ([`choose`]), and says what to hold there.
fn decide(
    placer: &Placer,
    target: &Target,
    state: &State,
    held: &Holds,
) -> Result<(Placement, String, NodeHold), CreateError> {
    let req = &target.req;
    let request = PlacementRequest {
        memory: req.memory,
        cores: f64::from(req.cores.saturating_mul(req.sockets)),
        tags: req.tags.clone(),
        host: req.host.clone(),
        policy: req.policy.clone(),
    };
    let model = &target.model;
    let p = placer.place(&model.cluster, &model.rules, state, &request)?;
    let groups = hard_groups(&req.tags);
    let node = choose(&p, req, &|n: &str| {
        beside_creations(&groups, held, n)?;
        target.landing(n, held)
    })?;
    let shared = target.is_shared(&req.storage);
    let hold = NodeHold {
        node: node.clone(),
        memory: req.memory,
        cores: request.cores,
        disk: Some(DiskHold {
            storage: req.storage.clone(),
            node: (!shared).then(|| node.clone()),
            bytes: req.disk_bytes,
        }),
        groups,
    };
    Ok((p, node, hold))
}

/// The hard affinity and anti-affinity groups the VM's tags join.
fn hard_groups(tags: &[String]) -> Vec<HeldGroup> {
    use flxp_core::cluster::tags::{GuestToken, TagParse, parse_guest_tag};
    tags.iter()
        .filter_map(|t| match parse_guest_tag(&t.to_ascii_lowercase()) {
            TagParse::Token(GuestToken::AntiAffinity { group, hard: true }) => Some(HeldGroup {
                name: group,
                apart: true,
            }),
            TagParse::Token(GuestToken::Affinity { group, hard: true }) => Some(HeldGroup {
                name: group,
                apart: false,
            }),
            _ => None,
        })
        .collect()
}

/// Whether `node` keeps the VM's hard groups beside the creations in flight, which the snapshot
/// does not show yet: no other new member of an anti-affinity group there, and the node every new
/// member of an affinity group goes to.
fn beside_creations(groups: &[HeldGroup], held: &Holds, node: &str) -> Result<(), Unfit> {
    for g in groups {
        if g.apart && held.group_nodes(g).any(|n| n == node) {
            return Err(Unfit::NoRoom(format!(
                "a VM of {} being created goes there",
                g.name
            )));
        }
        if !g.apart
            && let Some(other) = held.group_nodes(g).find(|n| *n != node)
        {
            return Err(Unfit::NoRoom(format!(
                "the VMs of {} being created go to {other}",
                g.name
            )));
        }
    }
    Ok(())
}

/// The template for the chosen node (its own, else the shared one), how to clone it there, and
/// whether the boot disk must grow. Disks only grow: a storage profile below the template's boot
/// disk is refused here, before anything is cloned.
async fn source(
    c: &Creator,
    target: &Target,
    node: &str,
) -> Result<(ClonePlan, bool), CreateError> {
    let req = &target.req;
    let unknown = |message: String| CreateError::UnknownImage {
        image: req.image.id.clone(),
        message,
        step: CreateStep::Template,
    };
    let source = match target.per_node.get(node) {
        Some(&vmid) => Source::read(c, vmid, node).await?,
        None => target
            .shared
            .clone()
            .ok_or_else(|| unknown(format!("has no template for node {node}")))?,
    };
    let plan = plan_clone(
        source.vmid,
        &source.node,
        &source.disks,
        node,
        &req.storage,
        target.full_clone,
        |st| target.is_shared(st),
    )
    .map_err(|e| unknown(e.to_string()))?;
    let grow = match &source.boot {
        None => {
            return Err(unknown(format!(
                "template {} has no boot disk to give the storage profile's {}",
                source.vmid,
                fmt_bytes(req.disk_bytes)
            )));
        }
        // Proxmox always writes `size=`; without it, the resize itself refuses a shrink.
        Some(DiskInfo { size: None, .. }) => true,
        Some(DiskInfo {
            size: Some(current),
            ..
        }) => match disk_size(*current, req.disk_bytes) {
            Ok(DiskSize::Keep) => false,
            Ok(DiskSize::Grow(_)) => true,
            Err(e) => {
                return Err(CreateError::Invalid {
                    field: "storageProfile".into(),
                    message: e.to_string(),
                    step: CreateStep::Template,
                });
            }
        },
    };
    Ok((plan, grow))
}

/// Why no clone was started.
enum Unclaimed {
    /// Nothing was made: the error says why.
    Refused(CreateError),
    /// The clone call for `vmid` failed, but it may have been applied: the runner removes the VM.
    MayExist {
        /// The VMID the clone call asked for.
        vmid: u32,
        /// Why the call failed.
        error: flxp_pve::Error,
    },
}

/// Takes a VMID and claims it with the clone call, retrying when someone else took it. A clone
/// call whose answer never came may still have created the VM: the runner cleans that up.
async fn clone_with_fresh_id(
    c: &Creator,
    plan: &ClonePlan,
    req: &VmRequest,
    node: &str,
) -> Result<(u32, Upid), Unclaimed> {
    let _claim = c.vmid_lock.lock().await;
    let mut last = None;
    for _ in 0..c.options.nextid_attempts.max(1) {
        let vmid = c.api.next_id(None).await.map_err(|e| {
            Unclaimed::Refused(step_err(
                CreateStep::NextId,
                None,
                Some(node),
                e,
                Cleanup::NotNeeded,
            ))
        })?;
        let params = CloneParams {
            newid: vmid,
            name: Some(req.name.clone()),
            target: plan.target.clone(),
            full: Some(plan.full),
            storage: plan.storage.clone(),
            description: Some(format!("created by flxp from image {}", req.image.id)),
            ..CloneParams::default()
        };
        match c
            .api
            .clone_qemu(&plan.source_node, plan.template, &params)
            .await
        {
            Ok(upid) => return Ok((vmid, upid)),
            Err(e) if e.is_already_exists() => {
                warn!(vmid, "VMID taken by someone else meanwhile; taking another");
                last = Some(e);
            }
            Err(e) if e.may_have_been_applied() => {
                return Err(Unclaimed::MayExist { vmid, error: e });
            }
            Err(e) => {
                return Err(Unclaimed::Refused(step_err(
                    CreateStep::Clone,
                    Some(vmid),
                    Some(node),
                    e,
                    Cleanup::NotNeeded,
                )));
            }
        }
    }
    Err(Unclaimed::Refused(match last {
        Some(e) => step_err(CreateStep::NextId, None, Some(node), e, Cleanup::NotNeeded),
        None => CreateError::Internal {
            step: CreateStep::NextId,
            message: "no VMID attempt was made".into(),
        },
    }))
}

/// Follows the clone task to its end.
async fn clone(c: &Creator, upid: &Upid) -> flxp_pve::Result<()> {
    c.api.wait_task(upid, &c.options.wait).await.map(|_| ())
}

/// Grows the clone's boot disk to `bytes` and follows the resize to its end.
///
/// The size is read from the clone, not the template: a full clone onto another storage may come
/// out a little larger, and asking for less would be a shrink Proxmox refuses. The size is
/// absolute and the call carries the digest just read, so it grows exactly that disk.
async fn resize(c: &Creator, node: &str, vmid: u32, bytes: u64) -> flxp_pve::Result<()> {
    let cloned = c.api.guest_config(node, GuestKind::Qemu, vmid).await?;
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
    if let Some(upid) = c.api.resize_disk(node, vmid, &params).await? {
        c.api.wait_task(&upid, &c.options.wait).await?;
    }
    info!(vmid, disk = %boot.key, size = %fmt_bytes(bytes), "boot disk grown");
    Ok(())
}

/// Tags the fresh clone `flxp.creating` and `flxp.creating-since.<now>` until [`unmark`] takes
/// them off as the last step, so that a creation cut short (flxp killed during the resize, the
/// configuration or the start) leaves a VM every snapshot points out and the daemon's cleanup
/// can judge by age ([`crate::stale`]). Best effort: a failure here only loses that marker.
async fn mark_creating(c: &Creator, node: &str, vmid: u32) {
    let marked = async {
        let cfg = c.api.guest_config(node, GuestKind::Qemu, vmid).await?;
        let mut tags: Vec<String> = cfg
            .get("tags")
            .map(|t| flxp_core::cluster::split_tags(&t))
            .unwrap_or_default();
        tags.retain(|t| !is_marker_tag(t));
        tags.push(CREATING_TAG.to_owned());
        tags.push(format!("{CREATING_SINCE_PREFIX}{}", crate::epoch_now()));
        let mut update = flxp_pve::types::ConfigUpdate::new().with("tags", tags.join(";"));
        update.digest = cfg.digest.clone();
        c.api
            .update_guest_config(node, GuestKind::Qemu, vmid, &update)
            .await
    };
    if let Err(e) = marked.await {
        warn!(vmid, error = %e, "could not tag the new VM flxp.creating");
    }
}

/// Takes the creation marker (both tags) off a VM with its own digest-guarded config update.
pub(crate) async fn unmark(c: &Creator, node: &str, vmid: u32) -> flxp_pve::Result<()> {
    remove_marker(&c.api, node, vmid).await
}

/// Removes `flxp.creating` and `flxp.creating-since.*` from a VM's tags (nothing to do without).
pub(crate) async fn remove_marker(
    api: &flxp_pve::Pve,
    node: &str,
    vmid: u32,
) -> flxp_pve::Result<()> {
    let cfg = api.guest_config(node, GuestKind::Qemu, vmid).await?;
    let tags: Vec<String> = cfg
        .get("tags")
        .map(|t| flxp_core::cluster::split_tags(&t))
        .unwrap_or_default();
    let kept: Vec<String> = tags.iter().filter(|t| !is_marker_tag(t)).cloned().collect();
    if kept.len() == tags.len() {
        return Ok(());
    }
    let update = flxp_pve::types::ConfigUpdate::new();
    let mut update = if kept.is_empty() {
        update.with_delete("tags")
    } else {
        update.with("tags", kept.join(";"))
    };
    update.digest = cfg.digest.clone();
    api.update_guest_config(node, GuestKind::Qemu, vmid, &update)
        .await
}

/// Whether a tag is part of the creation marker: [`CREATING_TAG`], or any tag with the
/// `creating-since` prefix (a malformed one too: it only ever comes from the marker).
fn is_marker_tag(tag: &str) -> bool {
    is_creating_tag(tag) || tag.to_ascii_lowercase().starts_with(CREATING_SINCE_PREFIX)
}

/// Reads the clone's config and writes the requested shape onto it (digest-guarded).
async fn configure(c: &Creator, node: &str, vmid: u32, req: &VmRequest) -> flxp_pve::Result<()> {
    let cloned = c.api.guest_config(node, GuestKind::Qemu, vmid).await?;
    let mut update = customize(&cloned, req);
    update.digest = cloned.digest.clone();
    c.api
        .update_guest_config(node, GuestKind::Qemu, vmid, &update)
        .await
}

/// Starts the VM and follows the start task to its end.
async fn start(c: &Creator, node: &str, vmid: u32) -> flxp_pve::Result<()> {
    let upid = c
        .api
        .start_guest(node, GuestKind::Qemu, vmid, &StartParams::default())
        .await?;
    c.api.wait_task(&upid, &c.options.wait).await.map(|_| ())
}

/// Stops (if it may run) and deletes a half-made VM; a VM that is already gone is fine.
async fn clean_up(c: &Creator, node: &str, vmid: u32, may_run: bool) -> Cleanup {
    if may_run {
        let stop = c
            .api
            .stop_guest(node, GuestKind::Qemu, vmid, &StopParams::default())
            .await;
        match stop {
            Ok(upid) => {
                if let Err(e) = c.api.wait_task(&upid, &c.options.wait).await {
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
            tokio::time::sleep(c.options.wait.interval).await;
        }
        match c
            .api
            .delete_guest(node, GuestKind::Qemu, vmid, &params)
            .await
        {
            Ok(upid) => match c.api.wait_task(&upid, &c.options.wait).await {
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

fn step_err(
    step: CreateStep,
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
fn storage_free(cluster: &Cluster, storage: &str, node: &str) -> Option<u64> {
    cluster
        .storages()
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
                    step: CreateStep::Choose,
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

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
//! - [`Creator::create`]: the steps ([`CreateStep`], run by `steps.rs`); [`CreateError`] says
//!   what failed and [`CreateError::step`] in which step.

mod config;
mod input;
mod steps;

pub(crate) use steps::remove_marker;

use std::fmt;
use std::sync::Arc;

use flxp_core::Scheduler;
use flxp_core::constraints::tags::{GuestToken, TagParse, parse_guest_tag};
use flxp_core::placement::{Placement, Placer};
use flxp_pve::{Pve, TaskWait};

pub use config::{
    CloneError, ClonePlan, DiskInfo, DiskSize, ShrinkError, boot_disk, customize, disk_size, disks,
    is_disk_key, parse_disk, parse_size, plan_clone,
};
pub use input::{
    DnsNameError, ImageSource, MAX_INTERFACES, MIN_DISK_BYTES, Nic, SshKeyError, VmRequest,
    check_dns_name, check_ssh_key,
};

use crate::reserve::{ClusterModel, Reservations};

/// The steps of a creation, as errors name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CreateStep {
    /// Checking the request against the snapshot: fields, storage, the image's templates.
    Validate,
    /// Reading the template's config and checking it fits the storage profile.
    Template,
    /// Choosing the node (placement, storage room, where the template can be cloned to).
    Choose,
    /// Booking the VM's room on the chosen node for the creation's time.
    Reserve,
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
    /// Taking the `flxp.creating` marker off the complete VM (a failure is a warning).
    Unmark,
    /// Removing the half-made VM after a failed step.
    CleanUp,
}

impl fmt::Display for CreateStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Validate => "checking the request",
            Self::Template => "reading the template",
            Self::Choose => "choosing a node",
            Self::Reserve => "reserving room on the node",
            Self::NextId => "taking a VMID",
            Self::Clone => "cloning the template",
            Self::Resize => "growing the boot disk",
            Self::Configure => "configuring the VM",
            Self::Start => "starting the VM",
            Self::Unmark => "removing the flxp.creating marker",
            Self::CleanUp => "removing the half-made VM",
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
        /// The step that found it.
        step: CreateStep,
    },
    /// The image's template is missing, not a template, or unusable in this zone.
    #[error("image {image:?}: {message}")]
    UnknownImage {
        /// The image id.
        image: String,
        /// What is wrong.
        message: String,
        /// The step that found it.
        step: CreateStep,
    },
    /// No node can take the VM; every node's reason is listed.
    #[error("no node can take the VM: {}", reasons.join("; "))]
    NoCapacity {
        /// `node: why` for every node.
        reasons: Vec<String>,
        /// The whole decision, for explanations.
        placement: Box<Placement>,
    },
    /// The core refused the placement request (an unknown policy, a bad tag) or failed.
    #[error("placement: {0}")]
    Placement(#[from] flxp_core::Error),
    /// A step against Proxmox failed.
    #[error("{step} failed{}{}: {source}{cleanup}", vmid.map(|v| format!(" for VM {v}")).unwrap_or_default(), node.as_ref().map(|n| format!(" on {n}")).unwrap_or_default())]
    Step {
        /// Which step.
        step: CreateStep,
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
    /// A fault of flxp itself, not of the request or of Proxmox: a bug to report.
    #[error("{step} failed: internal error: {message}")]
    Internal {
        /// The step it happened in.
        step: CreateStep,
        /// What went wrong.
        message: String,
    },
}

impl CreateError {
    /// The step that failed.
    pub fn step(&self) -> CreateStep {
        match self {
            Self::Invalid { step, .. }
            | Self::UnknownImage { step, .. }
            | Self::Step { step, .. }
            | Self::Internal { step, .. } => *step,
            Self::NoCapacity { .. } | Self::Placement(_) => CreateStep::Choose,
        }
    }
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
    /// What went wrong after the VM was complete (the marker could not be removed).
    pub warnings: Vec<String>,
    /// The UPID of the clone task that made it: Proxmox's task names only the template.
    pub clone_task: String,
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

/// The tag a VM carries while flxp creates it, from the clone until it is complete (see
/// [`Creator::create`]); the core's tag grammar reads it as [`GuestToken::Creating`].
pub use flxp_core::constraints::tags::CREATING_TAG;

/// The prefix of the tag that says since when (epoch seconds) a VM carries [`CREATING_TAG`].
pub const CREATING_SINCE_PREFIX: &str = "flxp.creating-since.";

/// Whether `tag` (any case) is [`CREATING_TAG`], read with the core's tag grammar.
pub fn is_creating_tag(tag: &str) -> bool {
    matches!(
        parse_guest_tag(&tag.to_ascii_lowercase()),
        TagParse::Token(GuestToken::Creating)
    )
}

/// The epoch seconds of a `flxp.creating-since.<epoch>` tag (any case), read with the core's tag
/// grammar; `None` for any other tag.
pub fn creating_since(tag: &str) -> Option<i64> {
    match parse_guest_tag(&tag.to_ascii_lowercase()) {
        TagParse::Token(GuestToken::CreatingSince(t)) => Some(t),
        _ => None,
    }
}

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

impl Creator {
    /// A creator for `zone`, placing with `scheduler`'s pipeline for it.
    pub fn new(
        api: Pve,
        scheduler: &Scheduler,
        zone: &str,
        reservations: Arc<Reservations>,
        options: CreateOptions,
    ) -> Self {
        Self {
            api,
            placer: scheduler.placer(Some(zone)),
            reservations,
            options,
            vmid_lock: tokio::sync::Mutex::new(()),
        }
    }

    /// The zone's reservations.
    pub fn reservations(&self) -> &Arc<Reservations> {
        &self.reservations
    }

    /// Creates and starts a VM on `model` (a snapshot taken after the request arrived): the
    /// steps of [`CreateStep`], in order; see the module docs.
    #[tracing::instrument(skip_all, fields(name = %req.name))]
    pub async fn create(
        &self,
        model: &Arc<ClusterModel>,
        req: &VmRequest,
    ) -> Result<CreatedVm, CreateError> {
        steps::run(self, model, req).await
    }
}

#[cfg(test)]
mod fixtures;
#[cfg(test)]
mod steps_tests;
#[cfg(test)]
mod tests;

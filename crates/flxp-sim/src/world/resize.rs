//! Disk resize (`PUT /nodes/{node}/qemu/{vmid}/resize`), as qemu-server does it.
//!
//! Since PVE 8 the call forks a `resize` task whose worker does every check (config, digest,
//! lock, disk, CD-ROM, shrinking) and the resize, so failures come back as the task's exit
//! status. Earlier releases did the same before answering: failures are 500s and the answer is
//! `null`. Either way the only synchronous refusal is `skiplock` from anyone but `root@pam`.
//! The new size lands in the disk's `size=` option (so the digest changes and `maxdisk` follows
//! when it is the boot disk) when the task ends.

use flxp_pve::types::{SizeSpec, format_size};

use super::guest::disk_size;
use super::{Action, GuestKind, World};
use crate::ApiError;

/// Simulated seconds a resize takes (the storage grows the volume, QEMU is told the new size).
const RESIZE_SECS: f64 = 1.0;

/// What `PUT /nodes/{node}/qemu/{vmid}/resize` asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct ResizeRequest {
    /// The node in the path.
    pub node: String,
    /// The VM.
    pub vmid: u32,
    /// The drive's config key (`scsi0`; the schema already checked it is a drive name).
    pub disk: String,
    /// The new size.
    pub size: SizeSpec,
    /// The digest the caller read, if any.
    pub digest: Option<String>,
    /// Ignore the config lock.
    pub skiplock: bool,
    /// Who asks (`root@pam`, `user@realm!token`).
    pub user: String,
}

/// A resize that passed its checks: the disk and the size it gets.
struct Planned {
    disk: String,
    bytes: u64,
}

impl World {
    /// `PUT .../resize`: a `resize` task's UPID (PVE 8 and later), or `None` once done (earlier).
    pub fn resize_disk(&mut self, req: ResizeRequest) -> Result<Option<String>, ApiError> {
        if req.skiplock && req.user != "root@pam" {
            return Err(ApiError::param(
                "skiplock",
                "Only root may use this option.",
            ));
        }
        if !self.resize_forks_a_task() {
            if let Some(p) = self.check_resize(&req)? {
                self.set_disk_size(req.vmid, &p.disk, p.bytes)?;
            }
            return Ok(None);
        }
        let now = self.now;
        let task = self.start_task(&req.node, "resize", &req.vmid.to_string(), &req.user);
        match self.check_resize(&req) {
            Err(e) => self.tasks.finish(task, now, Err(e.message)),
            // The size is already right: the worker returns at once.
            Ok(None) => self.tasks.finish(task, now, Ok(())),
            Ok(Some(p)) => self.schedule(
                now + RESIZE_SECS,
                Action::ResizeEnd {
                    task,
                    vmid: req.vmid,
                    disk: p.disk,
                    bytes: p.bytes,
                },
            ),
        }
        Ok(Some(self.upid(task)))
    }

    /// Whether this release runs resizes as a task (pve-manager 8 and later).
    fn resize_forks_a_task(&self) -> bool {
        self.settings
            .version
            .split('.')
            .next()
            .and_then(|major| major.parse::<u32>().ok())
            .is_none_or(|major| major >= 8)
    }

    /// The worker's checks, in qemu-server's order; `None` when the disk already has the size.
    fn check_resize(&self, req: &ResizeRequest) -> Result<Option<Planned>, ApiError> {
        let g = self.guest_at(GuestKind::Qemu, &req.node, req.vmid)?;
        if let Some(d) = &req.digest {
            if *d != g.config.digest() {
                return Err(ApiError::die(
                    "checksum mismatch (file change by other user?)",
                ));
            }
        }
        if let Some(lock) = g.lock().filter(|_| !req.skiplock) {
            return Err(ApiError::locked(lock));
        }
        let value = g
            .config
            .get(&req.disk)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| ApiError::die(format!("disk '{}' does not exist", req.disk)))?;
        if flxp_pve::types::is_cdrom_drive(value) {
            return Err(ApiError::die("you can't resize a cdrom"));
        }
        let current = disk_size(value);
        let bytes = req
            .size
            .target(current)
            .ok_or_else(|| ApiError::die(format!("size {} is too large", req.size)))?;
        if bytes < current {
            return Err(ApiError::die("shrinking disks is not supported"));
        }
        Ok((bytes != current).then(|| Planned {
            disk: req.disk.clone(),
            bytes,
        }))
    }

    /// Writes `size=` of a drive, as the worker's config write does.
    fn set_disk_size(&mut self, vmid: u32, disk: &str, bytes: u64) -> Result<(), ApiError> {
        let g = self.guest_mut(vmid)?;
        let value = g
            .config
            .values
            .get(disk)
            .cloned()
            .ok_or_else(|| ApiError::die(format!("disk '{disk}' does not exist")))?;
        g.config
            .values
            .insert(disk.to_string(), with_size(&value, bytes));
        Ok(())
    }

    pub(crate) fn on_resize_end(&mut self, task: usize, vmid: u32, disk: &str, bytes: u64) {
        let now = self.now;
        let result = self.set_disk_size(vmid, disk, bytes).map_err(|e| e.message);
        self.tasks.finish(task, now, result);
    }
}

/// A drive value with `size=` set to `bytes`, in place (appended when it had none).
fn with_size(value: &str, bytes: u64) -> String {
    let size = format!("size={}", format_size(bytes));
    let mut replaced = false;
    let mut parts: Vec<&str> = value
        .split(',')
        .map(|p| {
            if p.starts_with("size=") {
                replaced = true;
                size.as_str()
            } else {
                p
            }
        })
        .collect();
    if !replaced {
        parts.push(&size);
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_size_option_is_replaced_in_place_or_appended() {
        assert_eq!(
            with_size("ceph:vm-1-disk-0,iothread=1,size=32G,ssd=1", 64 << 30),
            "ceph:vm-1-disk-0,iothread=1,size=64G,ssd=1"
        );
        assert_eq!(
            with_size("local-lvm:vm-1-disk-0", (1 << 30) + (512 << 20)),
            "local-lvm:vm-1-disk-0,size=1536M"
        );
    }
}

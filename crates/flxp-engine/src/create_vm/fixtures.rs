//! Requests the creation tests start from: each test states only what it changes.

use super::{ImageSource, Nic, VmRequest};

/// A real ed25519 public key (its private half was deleted right after generation).
pub const KEY: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDFkLyOVoSrwEOe/Cu8ginHKAlfTmvX5GwdqB8dB9MYm flxp@test";

/// `web-server`: 4 GiB, 2 cores, one socket, template 9000 (`ubuntu-2404`), 32 GiB on `ceph`;
/// no login, interfaces or tags.
pub fn request() -> VmRequest {
    VmRequest {
        name: "web-server".into(),
        memory: 4 << 30,
        cores: 2,
        sockets: 1,
        image: ImageSource {
            id: "ubuntu-2404".into(),
            template: Some(9000),
            per_node: Default::default(),
        },
        storage: "ceph".into(),
        disk_bytes: 32 << 30,
        ..VmRequest::default()
    }
}

/// Network `100`: bridge `vmbr0`, VLAN 100, the default model.
pub fn nic(firewall: bool) -> Nic {
    Nic {
        network: "100".into(),
        bridge: "vmbr0".into(),
        vlan: Some(100),
        model: None,
        firewall,
    }
}

//! The names a new VM is given by — compute and storage profiles, an image, networks — looked up
//! in the config: the one place `createVM`, the `placement` query and `flxp place --profile`
//! turn them into sizes, a template and interfaces.

use std::fmt;

use flxp_engine::VmRequest;
use flxp_engine::create_vm::{ImageSource, Nic};

use super::Config;

/// What kind of configured thing a name stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Catalog {
    /// `[compute-profiles.<id>]`.
    ComputeProfile,
    /// `[storage-profiles.<id>]`.
    StorageProfile,
    /// `[images.<id>]`.
    Image,
    /// `[networks.<id>]`.
    Network,
}

impl Catalog {
    /// The kind in words, for messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ComputeProfile => "compute profile",
            Self::StorageProfile => "storage profile",
            Self::Image => "image",
            Self::Network => "network",
        }
    }
}

impl fmt::Display for Catalog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name the config does not have, with the ones it has.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} {id:?} is not configured; configured: {}", configured(.known))]
pub struct NotConfigured {
    /// What the name was to stand for.
    pub kind: Catalog,
    /// The name given.
    pub id: String,
    /// The configured names of that kind, in order.
    pub known: Vec<String>,
}

/// The configured names listed, or `none`.
fn configured(known: &[String]) -> String {
    if known.is_empty() {
        "none".to_owned()
    } else {
        known.join(", ")
    }
}

/// The parts of a new VM, by configured name.
#[derive(Debug, Clone, Copy)]
pub struct VmParts<'a> {
    /// A compute profile (cores, sockets, memory).
    pub compute_profile: &'a str,
    /// A storage profile (storage, disk size).
    pub storage_profile: &'a str,
    /// An image (the template to clone).
    pub image: &'a str,
    /// Networks, one per interface, `net0` first.
    pub networks: &'a [String],
}

/// `id` in `map`, or [`NotConfigured`] listing the map's names.
fn lookup<'a, T>(
    map: &'a std::collections::BTreeMap<String, T>,
    kind: Catalog,
    id: &str,
) -> Result<&'a T, NotConfigured> {
    map.get(id).ok_or_else(|| NotConfigured {
        kind,
        id: id.to_owned(),
        known: map.keys().cloned().collect(),
    })
}

impl Config {
    /// A compute profile's size for a placement: memory in bytes and vCPUs (cores × sockets).
    pub fn profile_size(&self, id: &str) -> Result<(u64, f64), NotConfigured> {
        let p = lookup(&self.compute_profiles, Catalog::ComputeProfile, id)?;
        Ok((
            p.memory.0,
            f64::from(p.cores.saturating_mul(p.sockets.unwrap_or(1))),
        ))
    }

    /// A request for a VM in `zone` built from configured parts: sizes, storage, the zone's
    /// template and the interfaces filled in, the rest (name, host, cloud-init, backup, tags,
    /// policy) left at their defaults for the caller to set.
    pub fn vm_request(&self, zone: &str, parts: &VmParts<'_>) -> Result<VmRequest, NotConfigured> {
        let compute = lookup(
            &self.compute_profiles,
            Catalog::ComputeProfile,
            parts.compute_profile,
        )?;
        let storage = lookup(
            &self.storage_profiles,
            Catalog::StorageProfile,
            parts.storage_profile,
        )?;
        let image = lookup(&self.images, Catalog::Image, parts.image)?;
        let per_zone = image.zones.get(zone);
        let interfaces = parts
            .networks
            .iter()
            .map(|id| {
                let n = lookup(&self.networks, Catalog::Network, id)?;
                Ok(Nic {
                    network: id.clone(),
                    bridge: n.bridge.clone(),
                    vlan: n.vlan,
                    model: n.model.clone(),
                    firewall: n.firewall,
                })
            })
            .collect::<Result<Vec<_>, NotConfigured>>()?;
        Ok(VmRequest {
            memory: compute.memory.0,
            cores: compute.cores,
            sockets: compute.sockets.unwrap_or(1),
            image: ImageSource {
                id: parts.image.to_owned(),
                template: per_zone.and_then(|p| p.template).or(image.template),
                per_node: per_zone.map(|p| p.nodes.clone()).unwrap_or_default(),
            },
            storage: storage.storage.clone(),
            disk_bytes: storage.disk.0,
            interfaces,
            ..VmRequest::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: &str = r#"
[zones.lab]
hosts = ["pve1:8006"]
token = "root@pam!flxp"
token-secret = "s3cret"

[compute-profiles.small]
cores = 2
sockets = 2
memory = "4GiB"

[storage-profiles.std]
storage = "ceph"
disk = "32GiB"

[images.ubuntu]
template = 9000
[images.ubuntu.zones.lab]
nodes = { pve1 = 9001 }

[networks.100]
bridge = "vmbr0"
vlan = 100
firewall = true
"#;

    fn config() -> Config {
        Config::parse(CONFIG, std::path::Path::new("flxp.toml")).unwrap()
    }

    fn parts<'a>(networks: &'a [String]) -> VmParts<'a> {
        VmParts {
            compute_profile: "small",
            storage_profile: "std",
            image: "ubuntu",
            networks,
        }
    }

    #[test]
    fn a_request_takes_sizes_template_and_interfaces_from_the_config() {
        let networks = vec!["100".to_owned()];
        let r = config().vm_request("lab", &parts(&networks)).unwrap();
        assert_eq!((r.memory, r.cores, r.sockets), (4 << 30, 2, 2));
        assert_eq!((r.storage.as_str(), r.disk_bytes), ("ceph", 32 << 30));
        assert_eq!(
            r.image,
            ImageSource {
                id: "ubuntu".to_owned(),
                template: Some(9000),
                per_node: [("pve1".to_owned(), 9001)].into(),
            }
        );
        assert_eq!(
            r.interfaces,
            [Nic {
                network: "100".to_owned(),
                bridge: "vmbr0".to_owned(),
                vlan: Some(100),
                model: None,
                firewall: true,
            }]
        );
        // Another zone has no per-node templates: the image's own template only.
        let r = config().vm_request("dc2", &parts(&[])).unwrap();
        assert_eq!(r.image.per_node, std::collections::BTreeMap::new());
        assert_eq!(r.interfaces, []);
    }

    #[test]
    fn an_unknown_name_says_what_is_configured() {
        let networks = vec!["100".to_owned(), "200".to_owned()];
        let e = config().vm_request("lab", &parts(&networks)).unwrap_err();
        assert_eq!(e.kind, Catalog::Network);
        assert_eq!(
            e.to_string(),
            r#"network "200" is not configured; configured: 100"#
        );
        let e = config().profile_size("large").unwrap_err();
        assert_eq!(
            e.to_string(),
            r#"compute profile "large" is not configured; configured: small"#
        );
        let e = Config::parse("", std::path::Path::new("flxp.toml"))
            .unwrap()
            .profile_size("x")
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            r#"compute profile "x" is not configured; configured: none"#
        );
    }

    #[test]
    fn a_profile_size_counts_every_socket() {
        assert_eq!(config().profile_size("small"), Ok((4 << 30, 4.0)));
    }
}

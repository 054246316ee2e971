//! What a VM creation asks for, resolved from names to values, and the checks on it that need no
//! cluster: the name is a DNS name, the SSH key is an OpenSSH public key, a user has a password,
//! sizes and tags are possible. Pure: no I/O.

use std::collections::BTreeMap;

use flxp_core::units::{GIB, MIB};
use flxp_pve::Secret;

use super::{CreateError, CreateStep};

/// A new VM, with every profile, image and network already resolved by the caller.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct VmRequest {
    /// The VM's name (a DNS name).
    pub name: String,
    /// A node named by the caller: skips scoring, not the online and resource checks.
    pub host: Option<String>,
    /// Memory in bytes (compute profile).
    pub memory: u64,
    /// Cores per socket (compute profile).
    pub cores: u32,
    /// Sockets (compute profile; default 1).
    pub sockets: u32,
    /// The template to clone.
    pub image: ImageSource,
    /// Storage of the VM's disks (storage profile).
    pub storage: String,
    /// Size of the boot disk in bytes (storage profile).
    pub disk_bytes: u64,
    /// An OpenSSH public key for cloud-init.
    pub ssh_public_key: Option<String>,
    /// Cloud-init user.
    pub user: Option<String>,
    /// Cloud-init password (never logged: redacting `Debug`).
    pub password: Option<Secret>,
    /// Network interfaces, `net0` first.
    pub interfaces: Vec<Nic>,
    /// Whether Proxmox backup jobs include the VM's disks.
    pub backup: bool,
    /// Tags the VM carries (flxp constraint tags among them).
    pub tags: Vec<String>,
    /// Placement policy; the configured default when absent.
    pub policy: Option<String>,
}

/// Where an image's template is in one zone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImageSource {
    /// The image's id, for messages.
    pub id: String,
    /// A template on shared storage, cloned to any node with `target`.
    pub template: Option<u32>,
    /// Per-node templates (templates on local storage), by node name.
    pub per_node: BTreeMap<String, u32>,
}

/// One network interface: the bridge and VLAN of a configured network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nic {
    /// The network's id, for messages.
    pub network: String,
    /// Linux bridge (`vmbr0`).
    pub bridge: String,
    /// VLAN tag, 1..=4094.
    pub vlan: Option<u16>,
    /// NIC model (default `virtio`).
    pub model: Option<String>,
    /// Proxmox firewall on the interface.
    pub firewall: bool,
}

/// Most interfaces a VM can have (`net0`..`net31`).
pub const MAX_INTERFACES: usize = 32;

/// The smallest boot disk a VM (and a storage profile) may ask for.
pub const MIN_DISK_BYTES: u64 = GIB;

fn invalid(field: &str, message: impl Into<String>) -> CreateError {
    CreateError::Invalid {
        field: field.to_owned(),
        message: message.into(),
        step: CreateStep::Validate,
    }
}

impl VmRequest {
    /// Every check that needs no cluster; the error names the field.
    pub fn validate(&self) -> Result<(), CreateError> {
        check_dns_name(&self.name).map_err(|e| invalid("name", e.to_string()))?;
        if self.memory < 16 * MIB {
            return Err(invalid("memory", "must be at least 16 MiB"));
        }
        if self.cores == 0 || self.sockets == 0 {
            return Err(invalid("cores", "cores and sockets must be at least 1"));
        }
        if self.storage.is_empty() {
            return Err(invalid("storage", "names no storage"));
        }
        if self.disk_bytes < MIN_DISK_BYTES {
            return Err(invalid("disk", "must be at least 1 GiB"));
        }
        if let Some(key) = &self.ssh_public_key {
            check_ssh_key(key).map_err(|e| invalid("sshPublicKey", e.to_string()))?;
        }
        if let Some(user) = &self.user {
            check_user(user).map_err(|e| invalid("user", e.to_string()))?;
            if self.password.as_ref().is_none_or(Secret::is_empty) {
                return Err(invalid(
                    "password",
                    format!("user {user:?} needs an initial password"),
                ));
            }
        }
        if let Some(p) = &self.password {
            if p.expose().contains(['\n', '\r']) {
                return Err(invalid("password", "must be one line"));
            }
            // Checked before cloning: Proxmox refuses oversized config writes only after the
            // clone exists, and a password has no reason to be this long.
            if p.expose().len() > MAX_PASSWORD {
                return Err(invalid(
                    "password",
                    format!("is longer than {MAX_PASSWORD} bytes"),
                ));
            }
        }
        if self.interfaces.len() > MAX_INTERFACES {
            return Err(invalid(
                "interfaces",
                format!("at most {MAX_INTERFACES} interfaces (net0..net31)"),
            ));
        }
        for (i, nic) in self.interfaces.iter().enumerate() {
            if nic.vlan.is_some_and(|v| !(1..=4094).contains(&v)) {
                return Err(invalid(
                    &format!("interfaces[{i}]"),
                    format!("network {:?} has VLAN outside 1..4094", nic.network),
                ));
            }
        }
        // flxp reads at most this many per guest and warns about the rest on every read: a
        // request for more would make a VM it warns about forever.
        let max_tags = flxp_core::cluster::tags::MAX_GUEST_TAGS;
        if self.tags.len() > max_tags {
            return Err(invalid(
                "tags",
                format!("{} tags; at most {max_tags} per VM", self.tags.len()),
            ));
        }
        for t in &self.tags {
            // Only flxp marks a VM in creation: a request carrying the marker would make a
            // complete VM look half-made, or hide a half-made one.
            if t.to_ascii_lowercase().starts_with(super::CREATING_TAG) {
                return Err(invalid(
                    "tags",
                    format!(
                        "{t:?} is flxp's own marker of a VM in creation and cannot be requested"
                    ),
                ));
            }
            if !flxp_core::constraints::tags::is_valid_tag_text(t) {
                return Err(invalid(
                    "tags",
                    format!(
                        "{t:?} is not a valid Proxmox tag (letters, digits, _ + . - only, not starting with + . -)"
                    ),
                ));
            }
        }
        if self.image.template.is_none() && self.image.per_node.is_empty() {
            return Err(CreateError::UnknownImage {
                image: self.image.id.clone(),
                message: "names no template in this zone".into(),
                step: CreateStep::Validate,
            });
        }
        Ok(())
    }
}

/// Why a VM name is not a DNS name; the message is shown to users after the field name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DnsNameError {
    /// The name is empty.
    #[error("must not be empty")]
    Empty,
    /// The name is longer than 253 bytes (not echoed: it may be kilobytes long).
    #[error("is {0} bytes long; a DNS name has at most 253 characters")]
    TooLong(usize),
    /// A label is empty, too long, or holds other characters than letters, digits and inner hyphens.
    #[error(
        "{0:?} is not a DNS name: use letters, digits and hyphens (not at the start or end of a label), labels of 1-63 characters separated by dots"
    )]
    BadLabel(String),
}

/// Checks a VM name as Proxmox's `dns-name` format does: dot-separated labels of letters, digits
/// and inner hyphens; at most 63 characters per label and 253 in all.
pub fn check_dns_name(name: &str) -> Result<(), DnsNameError> {
    if name.is_empty() {
        return Err(DnsNameError::Empty);
    }
    if name.len() > 253 {
        return Err(DnsNameError::TooLong(name.len()));
    }
    for label in name.split('.') {
        let ok = !label.is_empty()
            && label.len() <= 63
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !label.starts_with('-')
            && !label.ends_with('-');
        if !ok {
            return Err(DnsNameError::BadLabel(name.to_owned()));
        }
    }
    Ok(())
}

/// The longest cloud-init password accepted.
const MAX_PASSWORD: usize = 1024;

/// The longest SSH public key line accepted (a 16384-bit RSA key is about 2.8 KiB).
const MAX_SSH_KEY: usize = 16 << 10;

/// Why an SSH key is not one OpenSSH public key line; the message follows the field name.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SshKeyError {
    /// Nothing but white space.
    #[error("is empty")]
    Empty,
    /// Longer than 16 KiB, more than any OpenSSH public key line.
    #[error("is {0} bytes long; an OpenSSH public key line is at most {MAX_SSH_KEY}")]
    TooLong(usize),
    /// More than one line.
    #[error("give one OpenSSH public key on one line")]
    Lines,
    /// A PEM block, most likely the private key.
    #[error("is a private key or PEM block; give the public key (the .pub file)")]
    Private,
    /// The line does not parse as a public key.
    #[error("is not an OpenSSH public key (expected e.g. \"ssh-ed25519 AAAA... user@host\"): {0}")]
    Parse(ssh_key::Error),
}

/// Checks an OpenSSH public key line (`ssh-ed25519 AAAA... comment`): one key, parsed fully.
pub fn check_ssh_key(key: &str) -> Result<(), SshKeyError> {
    let key = key.trim();
    if key.is_empty() {
        return Err(SshKeyError::Empty);
    }
    if key.len() > MAX_SSH_KEY {
        return Err(SshKeyError::TooLong(key.len()));
    }
    if key.contains(['\n', '\r']) {
        return Err(SshKeyError::Lines);
    }
    if key.starts_with("-----BEGIN") {
        return Err(SshKeyError::Private);
    }
    ssh_key::PublicKey::from_openssh(key)
        .map(|_| ())
        .map_err(SshKeyError::Parse)
}

/// A cloud-init user name that `useradd` would refuse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a valid user name (letters, digits, _ - ., at most 32, not starting with -)")]
struct UserError(String);

/// Checks a cloud-init user name: what `useradd` accepts.
fn check_user(user: &str) -> Result<(), UserError> {
    let ok = !user.is_empty()
        && user.len() <= 32
        && user
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b))
        && !user.starts_with('-');
    if ok {
        Ok(())
    } else {
        Err(UserError(user.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    // Tests may panic on malformed fixtures: that is the failure report.
    #![allow(clippy::unwrap_used)]

    use super::*;

    use super::super::fixtures::{self, KEY};

    fn request() -> VmRequest {
        VmRequest {
            ssh_public_key: Some(KEY.into()),
            user: Some("admin".into()),
            password: Some(Secret::new("pw")),
            ..fixtures::request()
        }
    }

    fn field_of(r: &VmRequest) -> String {
        match r.validate().unwrap_err() {
            CreateError::Invalid { field, .. } => field,
            other => format!("{other:?}"),
        }
    }

    #[test]
    fn a_complete_request_passes() {
        request().validate().unwrap();
    }

    #[test]
    fn dns_names() {
        for ok in ["web", "web-1", "a.b.c", "X9", &"a".repeat(63)] {
            check_dns_name(ok).unwrap();
        }
        for bad in [
            "",
            "-web",
            "web-",
            "we_b",
            "a..b",
            "web server",
            &"a".repeat(64),
            "ü",
        ] {
            assert!(check_dns_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_10_kb_name_is_refused_without_being_echoed() {
        let e = check_dns_name(&"a".repeat(10 * 1024)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "is 10240 bytes long; a DNS name has at most 253 characters"
        );
    }

    #[test]
    fn ssh_keys_must_parse_as_openssh_public_keys() {
        check_ssh_key(KEY).unwrap();
        check_ssh_key(&format!("  {KEY}\n")).unwrap();
        let no_comment = KEY.rsplit_once(' ').unwrap().0;
        check_ssh_key(no_comment).unwrap();
        for bad in [
            "ssh-ed25519 AAAA",
            "ssh-ed25519 notbase64!!",
            "hello",
            "ssh-rsa AAAAC3NzaC1lZDI1NTE5AAAAIDFkLyOVoSrwEOe/Cu8ginHKAlfTmvX5GwdqB8dB9MYm",
            "-----BEGIN OPENSSH PRIVATE KEY-----",
        ] {
            assert!(check_ssh_key(bad).is_err(), "{bad}");
        }
        let two = format!("{KEY}\n{KEY}");
        assert!(
            check_ssh_key(&two)
                .unwrap_err()
                .to_string()
                .contains("one line")
        );
    }

    #[test]
    fn each_mistake_names_its_field() {
        let mut r = request();
        r.name = "web_1".into();
        assert_eq!(field_of(&r), "name");
        let mut r = request();
        r.ssh_public_key = Some("ssh-ed25519 AAAA".into());
        assert_eq!(field_of(&r), "sshPublicKey");
        let mut r = request();
        r.password = None;
        assert_eq!(field_of(&r), "password");
        let mut r = request();
        r.tags = vec!["flxp/affinity=web".into()];
        assert_eq!(field_of(&r), "tags");
        let mut r = request();
        r.user = Some("-x".into());
        assert_eq!(field_of(&r), "user");
        let mut r = request();
        r.tags = (0..1001).map(|i| format!("t{i}")).collect();
        assert_eq!(
            r.validate().map_err(|e| e.to_string()),
            Err("tags: 1001 tags; at most 1000 per VM".to_owned())
        );
        r.tags.pop();
        assert!(r.validate().is_ok());
        let mut r = request();
        r.password = Some(Secret::new("p".repeat(900_000)));
        assert_eq!(field_of(&r), "password");
        let mut r = request();
        r.ssh_public_key = Some(format!("ssh-ed25519 {}", "A".repeat(20_000)));
        assert_eq!(field_of(&r), "sshPublicKey");
        let mut r = request();
        r.interfaces = vec![
            Nic {
                network: "n".into(),
                bridge: "vmbr0".into(),
                vlan: None,
                model: None,
                firewall: false,
            };
            33
        ];
        assert_eq!(field_of(&r), "interfaces");
        let mut r = request();
        r.image.template = None;
        assert!(matches!(
            r.validate().unwrap_err(),
            CreateError::UnknownImage { .. }
        ));
    }

    #[test]
    fn the_password_never_shows_in_debug_output() {
        let mut r = request();
        r.password = Some(Secret::new("hunter2-secret"));
        assert!(!format!("{r:?}").contains("hunter2"));
    }
}

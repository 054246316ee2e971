//! The Proxmox privileges flxp needs, per feature: the one definition that `flxp config check`
//! verifies, `flxp setup token` turns into `pveum` commands, and GUIDE.md lists.
//!
//! Each entry names the endpoints that check it, as Proxmox's API schema (`permissions`) and
//! qemu-server's `check_vm_modify_config_perm` / `check_storage_access` do (PVE 8). flxp grants
//! them on `/` (propagated), so one role on one ACL covers every node, guest, storage and bridge.

use std::collections::BTreeSet;

/// What a zone is used for; each needs its own privileges on top of [`Feature::Read`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Feature {
    /// Status, plans, snapshots, `place` (nothing is changed).
    Read,
    /// Rebalancing and evacuation: live migrations.
    Balance,
    /// `createVM`: clone a template, configure, resize, start (and clean up a failed one).
    Create,
}

impl Feature {
    /// Every feature, in the order they build on each other.
    pub const ALL: [Feature; 3] = [Feature::Read, Feature::Balance, Feature::Create];

    /// The name used on the command line and in messages.
    pub fn name(self) -> &'static str {
        match self {
            Feature::Read => "read",
            Feature::Balance => "balance",
            Feature::Create => "create",
        }
    }

    /// Parses `read`, `balance` or `create`.
    pub fn parse(name: &str) -> Option<Feature> {
        Self::ALL.into_iter().find(|f| f.name() == name)
    }
}

/// One privilege flxp needs, where Proxmox checks it, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Requirement {
    /// The feature that needs it.
    pub feature: Feature,
    /// The Proxmox privilege (`VM.Migrate`).
    pub privilege: &'static str,
    /// The ACL path it is checked on, as asked of `GET /access/permissions` (`/vms`).
    pub path: &'static str,
    /// The calls that check it.
    pub why: &'static str,
}

const fn req(
    feature: Feature,
    privilege: &'static str,
    path: &'static str,
    why: &'static str,
) -> Requirement {
    Requirement {
        feature,
        privilege,
        path,
        why,
    }
}

/// Every privilege flxp needs, by feature.
pub const REQUIREMENTS: &[Requirement] = &[
    req(
        Feature::Read,
        "Sys.Audit",
        "/",
        "node status, config (notes) and rrddata; cluster options and HA state; nodes in /cluster/resources",
    ),
    req(
        Feature::Read,
        "VM.Audit",
        "/vms",
        "guests in /cluster/resources and guest configs (without it Proxmox hides the guests)",
    ),
    req(
        Feature::Read,
        "Datastore.Audit",
        "/storage",
        "storages in /cluster/resources and the migration target's storage list",
    ),
    req(
        Feature::Balance,
        "VM.Migrate",
        "/vms",
        "GET and POST /nodes/{node}/{qemu,lxc}/{vmid}/migrate",
    ),
    req(
        Feature::Balance,
        "Sys.Modify",
        "/nodes",
        "PUT /nodes/{node}/config: the flxp.maintenance mark an evacuation leaves, and the replica lease",
    ),
    req(
        Feature::Balance,
        "Sys.PowerMgmt",
        "/nodes",
        "POST /nodes/{node}/status and /nodes/{node}/wakeonlan: `flxp consolidate` switching freed nodes off and waking them",
    ),
    req(
        Feature::Create,
        "VM.Clone",
        "/vms",
        "POST /nodes/{node}/qemu/{template}/clone",
    ),
    req(
        Feature::Create,
        "VM.Allocate",
        "/vms",
        "the clone's new VMID; DELETE of a half-made VM",
    ),
    req(
        Feature::Create,
        "Datastore.AllocateSpace",
        "/storage",
        "the clone's disks, the cloud-init drive, growing the boot disk",
    ),
    req(
        Feature::Create,
        "VM.Config.CPU",
        "/vms",
        "cores and sockets of the new VM",
    ),
    req(
        Feature::Create,
        "VM.Config.Memory",
        "/vms",
        "memory of the new VM",
    ),
    req(
        Feature::Create,
        "VM.Config.Disk",
        "/vms",
        "PUT /nodes/{node}/qemu/{vmid}/resize, the cloud-init drive, disk backup flags",
    ),
    req(
        Feature::Create,
        "VM.Config.Network",
        "/vms",
        "net0.. of the new VM",
    ),
    req(
        Feature::Create,
        "VM.Config.Cloudinit",
        "/vms",
        "ciuser, cipassword, sshkeys",
    ),
    req(
        Feature::Create,
        "VM.Config.Options",
        "/vms",
        "tags of the new VM",
    ),
    req(
        Feature::Create,
        "VM.PowerMgmt",
        "/vms",
        "starting the new VM; stopping a half-made one",
    ),
    req(
        Feature::Create,
        "SDN.Use",
        "/sdn/zones",
        "the bridges the new VM's interfaces join (/sdn/zones/localnetwork/{bridge})",
    ),
];

/// The requirements of a set of features (read is always part of it), in definition order.
pub fn requirements(features: &BTreeSet<Feature>) -> Vec<Requirement> {
    REQUIREMENTS
        .iter()
        .filter(|r| r.feature == Feature::Read || features.contains(&r.feature))
        .copied()
        .collect()
}

/// The privilege names of a set of features, each once, in definition order.
pub fn privilege_names(features: &BTreeSet<Feature>) -> Vec<&'static str> {
    let mut seen = BTreeSet::new();
    requirements(features)
        .into_iter()
        .map(|r| r.privilege)
        .filter(|p| seen.insert(*p))
        .collect()
}

/// The role name for a set of features: `FlxpRead`, `FlxpBalance`, `FlxpBalanceCreate`.
pub fn role_name(features: &BTreeSet<Feature>) -> String {
    let mut name = String::from("Flxp");
    let beyond_read: Vec<Feature> = features
        .iter()
        .copied()
        .filter(|f| *f != Feature::Read)
        .collect();
    if beyond_read.is_empty() {
        name.push_str("Read");
    }
    for f in beyond_read {
        let n = f.name();
        name.push_str(&n[..1].to_ascii_uppercase());
        name.push_str(&n[1..]);
    }
    name
}

/// The `pveum` commands that create a user, a role with exactly these privileges, an ACL on `/`
/// and an API token (`--privsep 0`: the token has the user's privileges, one ACL to keep).
pub fn pveum_commands(features: &BTreeSet<Feature>, user: &str, token_name: &str) -> Vec<String> {
    let role = role_name(features);
    let privs = privilege_names(features).join(" ");
    vec![
        format!("pveum user add {user} --comment \"flxp scheduler\""),
        format!("pveum role add {role} -privs \"{privs}\""),
        format!("pveum acl modify / -user {user} -role {role}"),
        format!("pveum user token add {user} {token_name} --privsep 0"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(fs: &[Feature]) -> BTreeSet<Feature> {
        fs.iter().copied().collect()
    }

    #[test]
    fn read_is_always_included_and_roles_are_named_after_features() {
        let balance = set(&[Feature::Balance]);
        assert_eq!(
            privilege_names(&balance),
            [
                "Sys.Audit",
                "VM.Audit",
                "Datastore.Audit",
                "VM.Migrate",
                "Sys.Modify",
                "Sys.PowerMgmt"
            ]
        );
        assert_eq!(role_name(&balance), "FlxpBalance");
        assert_eq!(role_name(&set(&[Feature::Read])), "FlxpRead");
        assert_eq!(
            role_name(&set(&[Feature::Read, Feature::Create, Feature::Balance])),
            "FlxpBalanceCreate"
        );
        let create = privilege_names(&set(&[Feature::Create]));
        assert!(create.contains(&"SDN.Use") && !create.contains(&"VM.Migrate"));
        assert_eq!(Feature::parse("create"), Some(Feature::Create));
        assert_eq!(Feature::parse("all"), None);
    }

    #[test]
    fn pveum_commands_create_user_role_acl_and_token() {
        let cmds = pveum_commands(&set(&[Feature::Read]), "flxp@pve", "flxp");
        assert_eq!(
            cmds[1],
            "pveum role add FlxpRead -privs \"Sys.Audit VM.Audit Datastore.Audit\""
        );
        assert_eq!(cmds[2], "pveum acl modify / -user flxp@pve -role FlxpRead");
        assert_eq!(cmds[3], "pveum user token add flxp@pve flxp --privsep 0");
    }
}

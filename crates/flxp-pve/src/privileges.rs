//! The Proxmox privileges flxp needs, per feature: the one definition that `flxp config check`
//! verifies, `flxp setup token` turns into `pveum` commands, and GUIDE.md lists.
//!
//! Each entry names the endpoints that check it, as Proxmox's API schema (`permissions`) and
//! qemu-server's `check_vm_modify_config_perm` / `check_storage_access` do (PVE 8), and the
//! narrowest ACL path covering every place it is checked (`/nodes` for `/nodes/{node}`). Each
//! path gets its own role and ACL ([`acls`]): in Proxmox an ACL on a deeper path replaces what a
//! user inherits from above (pve-access-control `PVE::AccessControl::permission`), so a role
//! holds every privilege checked under its path.

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
    /// Consolidation switching freed nodes off and waking them (needs [`Feature::Balance`]).
    Power,
}

impl Feature {
    /// Every feature, in the order they build on each other.
    pub const ALL: [Feature; 4] = [
        Feature::Read,
        Feature::Balance,
        Feature::Create,
        Feature::Power,
    ];

    /// The name used on the command line and in messages.
    pub fn name(self) -> &'static str {
        match self {
            Feature::Read => "read",
            Feature::Balance => "balance",
            Feature::Create => "create",
            Feature::Power => "power",
        }
    }

    /// The features this one cannot work without (power switches off nodes a consolidation
    /// emptied by migration).
    pub fn implies(self) -> &'static [Feature] {
        match self {
            Feature::Power => &[Feature::Balance],
            _ => &[],
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
        "cluster options (/cluster/options) and HA state (/cluster/ha/*), checked on / itself",
    ),
    req(
        Feature::Read,
        "Sys.Audit",
        "/nodes",
        "node status, config (notes) and rrddata; nodes in /cluster/resources",
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
        "Sys.Console",
        "/",
        "POST /cluster/ha/resources/{sid}/migrate: migrating HA-managed guests (checked on / itself)",
    ),
    req(
        Feature::Balance,
        "Sys.Modify",
        "/nodes",
        "PUT /nodes/{node}/config: the flxp.maintenance mark an evacuation leaves, and the replica lease",
    ),
    req(
        Feature::Power,
        "Sys.PowerMgmt",
        "/nodes",
        "POST /nodes/{node}/status and /nodes/{node}/wakeonlan: consolidation switching freed nodes off and waking them",
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

/// The features a set stands for: read always, and what each feature implies.
pub fn with_implied(features: &BTreeSet<Feature>) -> BTreeSet<Feature> {
    let mut all = BTreeSet::from([Feature::Read]);
    for f in features {
        all.insert(*f);
        all.extend(f.implies().iter().copied());
    }
    all
}

/// The requirements of a set of features (read and implied ones always part of it), in
/// definition order.
pub fn requirements(features: &BTreeSet<Feature>) -> Vec<Requirement> {
    let all = with_implied(features);
    REQUIREMENTS
        .iter()
        .filter(|r| all.contains(&r.feature))
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
    let beyond_read: Vec<Feature> = with_implied(features)
        .into_iter()
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

/// One ACL entry `flxp setup token` creates: a role with `privileges` on `path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acl {
    /// The ACL path (`/nodes`).
    pub path: &'static str,
    /// The role's name (`FlxpBalanceNodes`).
    pub role: String,
    /// The role's privileges, in definition order.
    pub privileges: Vec<&'static str>,
    /// Whether it reaches the paths below. `/` does not: every subtree flxp needs has its own
    /// ACL, and the rest of the tree (users, pools, mappings) stays out of reach.
    pub propagate: bool,
}

/// The ACLs for a set of features: one per path a requirement names, in definition order.
pub fn acls(features: &BTreeSet<Feature>) -> Vec<Acl> {
    let base = role_name(features);
    let needed = requirements(features);
    let mut out: Vec<Acl> = Vec::new();
    for r in &needed {
        if let Some(acl) = out.iter_mut().find(|a| a.path == r.path) {
            if !acl.privileges.contains(&r.privilege) {
                acl.privileges.push(r.privilege);
            }
            continue;
        }
        let suffix = match r.path.trim_start_matches('/').split('/').next() {
            Some("") | None => "Root".to_owned(),
            Some("vms") => "VMs".to_owned(),
            Some("sdn") => "SDN".to_owned(),
            Some(seg) => format!("{}{}", seg[..1].to_ascii_uppercase(), &seg[1..]),
        };
        out.push(Acl {
            path: r.path,
            role: format!("{base}{suffix}"),
            privileges: vec![r.privilege],
            propagate: r.path != "/",
        });
    }
    out
}

/// Whether `path` is `ancestor` or below it (`/nodes/pve1` is below `/nodes`; `/nodesx` is not).
pub fn is_within(path: &str, ancestor: &str) -> bool {
    ancestor == "/"
        || path == ancestor
        || path
            .strip_prefix(ancestor)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// The privileges these ACLs give on `path`, as Proxmox computes them: walking from `/` down, the
/// ACL of each level on the way replaces what was inherited when it propagates or is the
/// path's own (pve-access-control `PVE::AccessControl::permission`).
pub fn granted(acls: &[Acl], path: &str) -> BTreeSet<&'static str> {
    let mut on_the_way: Vec<&Acl> = acls.iter().filter(|a| is_within(path, a.path)).collect();
    on_the_way.sort_by_key(|a| a.path.len());
    let mut held = BTreeSet::new();
    for a in on_the_way {
        if a.propagate || a.path == path {
            held = a.privileges.iter().copied().collect();
        }
    }
    held
}

/// The `pveum` commands that create a user, one role per ACL path with exactly the privileges
/// checked under it, the ACLs, and an API token (`--privsep 0`: the token has the user's
/// privileges, one set of ACLs to keep).
pub fn pveum_commands(features: &BTreeSet<Feature>, user: &str, token_name: &str) -> Vec<String> {
    let mut cmds = vec![format!(
        "pveum user add {user} --comment \"flxp scheduler\""
    )];
    for acl in acls(features) {
        cmds.push(format!(
            "pveum role add {} -privs \"{}\"",
            acl.role,
            acl.privileges.join(" ")
        ));
        let propagate = if acl.propagate { "" } else { " -propagate 0" };
        cmds.push(format!(
            "pveum acl modify {} -user {user} -role {}{propagate}",
            acl.path, acl.role
        ));
    }
    cmds.push(format!(
        "pveum user token add {user} {token_name} --privsep 0"
    ));
    cmds
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(fs: &[Feature]) -> BTreeSet<Feature> {
        fs.iter().copied().collect()
    }

    #[test]
    fn read_is_always_included_and_power_only_with_its_feature() {
        let balance = set(&[Feature::Balance]);
        assert_eq!(
            privilege_names(&balance),
            [
                "Sys.Audit",
                "VM.Audit",
                "Datastore.Audit",
                "VM.Migrate",
                "Sys.Console",
                "Sys.Modify"
            ]
        );
        assert_eq!(role_name(&balance), "FlxpBalance");
        assert_eq!(role_name(&set(&[Feature::Read])), "FlxpRead");
        assert_eq!(
            role_name(&set(&[Feature::Read, Feature::Create, Feature::Balance])),
            "FlxpBalanceCreate"
        );
        // Power switches off nodes a consolidation emptied: it brings balance with it.
        let power = set(&[Feature::Power]);
        assert_eq!(role_name(&power), "FlxpBalancePower");
        assert_eq!(
            privilege_names(&power),
            [
                "Sys.Audit",
                "VM.Audit",
                "Datastore.Audit",
                "VM.Migrate",
                "Sys.Console",
                "Sys.Modify",
                "Sys.PowerMgmt"
            ]
        );
        let create = privilege_names(&set(&[Feature::Create]));
        assert!(create.contains(&"SDN.Use") && !create.contains(&"VM.Migrate"));
        assert!(!create.contains(&"Sys.PowerMgmt"));
        assert_eq!(Feature::parse("create"), Some(Feature::Create));
        assert_eq!(Feature::parse("power"), Some(Feature::Power));
        assert_eq!(Feature::parse("all"), None);
    }

    #[test]
    fn pveum_commands_grant_each_role_on_its_narrowest_path() {
        let cmds = pveum_commands(&set(&[Feature::Balance]), "flxp@pve", "flxp");
        assert_eq!(
            cmds,
            [
                "pveum user add flxp@pve --comment \"flxp scheduler\"",
                "pveum role add FlxpBalanceRoot -privs \"Sys.Audit Sys.Console\"",
                "pveum acl modify / -user flxp@pve -role FlxpBalanceRoot -propagate 0",
                "pveum role add FlxpBalanceNodes -privs \"Sys.Audit Sys.Modify\"",
                "pveum acl modify /nodes -user flxp@pve -role FlxpBalanceNodes",
                "pveum role add FlxpBalanceVMs -privs \"VM.Audit VM.Migrate\"",
                "pveum acl modify /vms -user flxp@pve -role FlxpBalanceVMs",
                "pveum role add FlxpBalanceStorage -privs \"Datastore.Audit\"",
                "pveum acl modify /storage -user flxp@pve -role FlxpBalanceStorage",
                "pveum user token add flxp@pve flxp --privsep 0",
            ]
        );
    }

    #[test]
    fn granted_follows_proxmox_inheritance() {
        let balance = acls(&set(&[Feature::Balance]));
        let at = |p: &str| granted(&balance, p).into_iter().collect::<Vec<_>>();
        assert_eq!(at("/"), ["Sys.Audit", "Sys.Console"]);
        // `/` does not propagate: the user tree, pools, mappings and node consoles stay out of
        // reach.
        assert!(at("/access/users").is_empty());
        assert!(at("/pool/prod").is_empty());
        // A deeper ACL replaces what is inherited, so /nodes repeats Sys.Audit.
        assert_eq!(at("/nodes/pve1"), ["Sys.Audit", "Sys.Modify"]);
        assert_eq!(at("/vms/100"), ["VM.Audit", "VM.Migrate"]);
        assert_eq!(at("/storage/local"), ["Datastore.Audit"]);
        assert!(at("/sdn/zones/localnetwork/vmbr0").is_empty());
        let create = acls(&set(&[Feature::Create]));
        assert_eq!(
            granted(&create, "/sdn/zones/localnetwork/vmbr0")
                .into_iter()
                .collect::<Vec<_>>(),
            ["SDN.Use"]
        );
        assert!(is_within("/nodes/pve1", "/nodes") && !is_within("/nodesx", "/nodes"));
    }
}

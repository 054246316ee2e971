//! Per-token privilege checks, as Proxmox makes them: the endpoint's schema `permissions.check`
//! (`perm`, `and`, `or`, `any`, `require_param`) plus the checks qemu-server makes in code
//! (per config key in `check_vm_modify_config_perm`, storage and bridge access of new disks and
//! interfaces, clone and resize storage). A refusal is Proxmox's
//! `403 Permission check failed (/vms/100, VM.Migrate)`.
//!
//! Privileges are granted on `/` and propagate, so a check only asks whether the token holds the
//! privilege; the path is the one Proxmox would name.

use std::collections::BTreeSet;

use serde_json::Value;

use super::params::Params;
use crate::ApiError;
use crate::schema::scalar_text;

/// Privilege names a principal holds.
pub type Privs = BTreeSet<String>;

/// Checks one request of a principal holding `privs` against endpoint `key` (`PUT /nodes/...`).
pub fn check(key: &str, entry: &Value, params: &Params, privs: &Privs) -> Result<(), ApiError> {
    let template = key.split_once(' ').map_or(key, |(_, t)| t);
    let method = key.split_once(' ').map_or("", |(m, _)| m);
    let is_config_write = matches!(method, "PUT" | "POST")
        && template.starts_with("/nodes/{node}/qemu/{vmid}/config");
    if is_config_write {
        // qemu-server replaces the schema's "any VM.Config.*" check with one check per key.
        return config_keys(params, privs);
    }
    if let Some(c) = entry.get("permissions").and_then(|p| p.get("check")) {
        if let Err((path, privilege)) = eval(c, params, privs) {
            return Err(ApiError::permission(&path, &privilege));
        }
    }
    let vm_path = || format!("/vms/{}", params.text("vmid").unwrap_or_default());
    match (method, template) {
        ("POST", "/nodes/{node}/qemu/{vmid}/clone") => {
            let storage = params
                .text("storage")
                .map_or("/storage".to_owned(), |s| format!("/storage/{s}"));
            need(privs, &storage, "Datastore.AllocateSpace")
        }
        ("PUT", "/nodes/{node}/qemu/{vmid}/resize") => {
            need(privs, "/storage", "Datastore.AllocateSpace")
        }
        ("POST", "/nodes/{node}/qemu") => need(privs, &vm_path(), "VM.Allocate"),
        _ => Ok(()),
    }
}

fn need(privs: &Privs, path: &str, privilege: &str) -> Result<(), ApiError> {
    if privs.contains(privilege) {
        Ok(())
    } else {
        Err(ApiError::permission(path, privilege))
    }
}

/// Evaluates a schema check; the error is the first failing `(path, privilege)`.
fn eval(check: &Value, params: &Params, privs: &Privs) -> Result<(), (String, String)> {
    let Some(items) = check.as_array() else {
        return Ok(());
    };
    match items.first().and_then(Value::as_str) {
        Some("perm") => perm(items, params, privs),
        Some("and") => items[1..].iter().try_for_each(|c| eval(c, params, privs)),
        Some("or") => {
            let mut first_err = None;
            for c in &items[1..] {
                match eval(c, params, privs) {
                    Ok(()) => return Ok(()),
                    Err(e) => {
                        first_err.get_or_insert(e);
                    }
                }
            }
            first_err.map_or(Ok(()), Err)
        }
        // Checks flxp never meets (`userid-group`, `admin`): only the full privilege set passes.
        _ => need_owned(privs, "/", "Sys.Modify"),
    }
}

fn need_owned(privs: &Privs, path: &str, privilege: &str) -> Result<(), (String, String)> {
    if privs.contains(privilege) {
        Ok(())
    } else {
        Err((path.to_owned(), privilege.to_owned()))
    }
}

/// `["perm", "/vms/{vmid}", ["VM.Audit", ...], "any", 1, "require_param", "pool"]`.
fn perm(items: &[Value], params: &Params, privs: &Privs) -> Result<(), (String, String)> {
    let mut path = items
        .get(1)
        .and_then(Value::as_str)
        .unwrap_or("/")
        .to_owned();
    let wanted: Vec<&str> = items
        .get(2)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let opts: Vec<&Value> = items.iter().skip(3).collect();
    let opt = |name: &str| {
        opts.iter()
            .position(|v| v.as_str() == Some(name))
            .and_then(|i| opts.get(i + 1))
    };
    if let Some(p) = opt("require_param").and_then(|v| v.as_str()) {
        if params.text(p).is_none() {
            return Err((path, wanted.first().copied().unwrap_or("").to_owned()));
        }
    }
    for (k, v) in &params.0 {
        path = path.replace(&format!("{{{k}}}"), &scalar_text(v));
    }
    let any = opt("any").is_some_and(|v| v.as_i64() == Some(1) || v.as_str() == Some("1"));
    let missing: Vec<&&str> = wanted.iter().filter(|p| !privs.contains(**p)).collect();
    let ok = if any {
        missing.len() < wanted.len()
    } else {
        missing.is_empty()
    };
    match (ok, missing.first()) {
        (false, Some(p)) => Err((path, (**p).to_owned())),
        _ => Ok(()),
    }
}

/// The privilege qemu-server checks for setting or deleting one config key.
fn config_key_privilege(key: &str, value: Option<&str>) -> &'static str {
    let numbered = |prefix: &str| {
        key.strip_prefix(prefix)
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    match key {
        "cores" | "sockets" | "cpu" | "vcpus" | "cpulimit" | "cpuunits" | "affinity" | "numa" => {
            "VM.Config.CPU"
        }
        "memory" | "balloon" | "shares" => "VM.Config.Memory",
        "ciuser" | "cipassword" | "citype" | "cicustom" | "nameserver" | "searchdomain"
        | "sshkeys" | "ciupgrade" => "VM.Config.Cloudinit",
        "boot" | "bootdisk" | "vmstatestorage" => "VM.Config.Disk",
        "acpi" | "hotplug" | "kvm" | "machine" | "scsihw" | "smbios1" | "tablet" | "vga"
        | "watchdog" => "VM.Config.HWType",
        _ if numbered("ipconfig") => "VM.Config.Cloudinit",
        _ if numbered("net") => "VM.Config.Network",
        _ if is_drive(key) => {
            if value.is_some_and(|v| v.contains("media=cdrom")) {
                "VM.Config.CDROM"
            } else {
                "VM.Config.Disk"
            }
        }
        _ => "VM.Config.Options",
    }
}

fn is_drive(key: &str) -> bool {
    [
        "ide", "sata", "scsi", "virtio", "efidisk", "tpmstate", "unused",
    ]
    .iter()
    .any(|p| {
        key.strip_prefix(p)
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    })
}

/// `PUT/POST /nodes/{node}/qemu/{vmid}/config`: one check per key set or deleted, plus the
/// storage of a newly allocated volume (`STORAGE:SIZE`, `STORAGE:cloudinit`) and the bridge of
/// an interface (`SDN.Use` on `/sdn/zones/localnetwork/BRIDGE`, PVE 8).
fn config_keys(params: &Params, privs: &Privs) -> Result<(), ApiError> {
    let vm = format!("/vms/{}", params.text("vmid").unwrap_or_default());
    const NOT_CONFIG: [&str; 7] = [
        "node",
        "vmid",
        "digest",
        "delete",
        "revert",
        "skiplock",
        "background_delay",
    ];
    for (key, value) in &params.0 {
        if NOT_CONFIG.contains(&key.as_str()) {
            continue;
        }
        let text = scalar_text(value);
        need(privs, &vm, config_key_privilege(key, Some(&text)))?;
        if is_drive(key) {
            if let Some((storage, rest)) = text.split(',').next().and_then(|v| v.split_once(':')) {
                let new_volume =
                    rest == "cloudinit" || rest.parse::<f64>().is_ok() || storage.is_empty();
                if new_volume && !storage.is_empty() {
                    need(
                        privs,
                        &format!("/storage/{storage}"),
                        "Datastore.AllocateSpace",
                    )?;
                }
            }
        }
        if key.starts_with("net") {
            if let Some(bridge) = text.split(',').find_map(|p| p.strip_prefix("bridge=")) {
                need(
                    privs,
                    &format!("/sdn/zones/localnetwork/{bridge}"),
                    "SDN.Use",
                )?;
            }
        }
    }
    if let Some(deleted) = params.text("delete") {
        for key in deleted.split([',', ';', ' ']).filter(|k| !k.is_empty()) {
            need(privs, &vm, config_key_privilege(key, None))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests may panic

    use serde_json::json;

    use super::*;

    fn params(v: Value) -> Params {
        Params(v.as_object().unwrap().clone())
    }

    fn privs(list: &[&str]) -> Privs {
        list.iter().map(|p| p.to_string()).collect()
    }

    #[test]
    fn schema_checks_name_the_path_and_privilege() {
        let entry = json!({"permissions": {"check": ["perm", "/vms/{vmid}", ["VM.Migrate"]]}});
        let p = params(json!({"node": "pve1", "vmid": "100"}));
        let key = "POST /nodes/{node}/qemu/{vmid}/migrate";
        let e = check(key, &entry, &p, &privs(&["VM.Audit"])).unwrap_err();
        assert_eq!(e.status, 403);
        assert_eq!(e.reason(), "Permission check failed (/vms/100, VM.Migrate)");
        assert!(check(key, &entry, &p, &privs(&["VM.Migrate"])).is_ok());
    }

    #[test]
    fn and_or_and_require_param_follow_proxmox() {
        let entry = json!({"permissions": {"check": ["and", ["perm", "/vms/{vmid}", ["VM.Clone"]],
            ["or", ["perm", "/vms/{newid}", ["VM.Allocate"]],
                   ["perm", "/pool/{pool}", ["VM.Allocate"], "require_param", "pool"]]]}});
        let p = params(json!({"node": "a", "vmid": "9000", "newid": "120"}));
        let key = "POST /nodes/{node}/qemu/{vmid}/clone";
        let e = check(key, &entry, &p, &privs(&["VM.Clone"])).unwrap_err();
        assert_eq!(
            e.reason(),
            "Permission check failed (/vms/120, VM.Allocate)"
        );
        let e = check(key, &entry, &p, &privs(&["VM.Clone", "VM.Allocate"])).unwrap_err();
        assert_eq!(
            e.reason(),
            "Permission check failed (/storage, Datastore.AllocateSpace)"
        );
        let all = privs(&["VM.Clone", "VM.Allocate", "Datastore.AllocateSpace"]);
        assert!(check(key, &entry, &p, &all).is_ok());
    }

    #[test]
    fn config_writes_are_checked_per_key_storage_and_bridge() {
        let key = "PUT /nodes/{node}/qemu/{vmid}/config";
        let entry = json!({});
        let p = params(
            json!({"node": "a", "vmid": "120", "cores": "2", "memory": "2048",
            "net0": "virtio=BC:24:11:00:00:01,bridge=vmbr0", "ide2": "local-lvm:cloudinit",
            "tags": "web", "ciuser": "ops", "delete": "net1"}),
        );
        let mut have = privs(&[
            "VM.Config.CPU",
            "VM.Config.Memory",
            "VM.Config.Network",
            "VM.Config.Disk",
            "VM.Config.Options",
            "VM.Config.Cloudinit",
            "Datastore.AllocateSpace",
            "SDN.Use",
        ]);
        assert!(check(key, &entry, &p, &have).is_ok());
        have.remove("SDN.Use");
        let e = check(key, &entry, &p, &have).unwrap_err();
        assert_eq!(
            e.reason(),
            "Permission check failed (/sdn/zones/localnetwork/vmbr0, SDN.Use)"
        );
        have.insert("SDN.Use".into());
        have.remove("VM.Config.Cloudinit");
        let e = check(key, &entry, &p, &have).unwrap_err();
        assert_eq!(
            e.reason(),
            "Permission check failed (/vms/120, VM.Config.Cloudinit)"
        );
    }
}

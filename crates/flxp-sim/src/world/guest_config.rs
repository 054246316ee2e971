//! Guests of a scenario: their generated configuration (name, memory, cores, `net0` on `vmbr0`,
//! a boot disk on a shared storage when the node has one) with the scenario's overrides, checked
//! key by key against the schema, and their usage from the snapshot's figures.

use std::collections::BTreeMap;

use flxp_core::snapshot::raw::Resource;
use serde_json::Value;

use super::{Config, Guest, GuestKind, GuestUsage, Storage, World};
use crate::scenario::GuestSpec;
use crate::schema::{ApiSchema, Errors, Mode, family_schema};
use crate::tags;
use crate::{Error, Result};

use flxp_core::units::{GIB, MIB};

impl World {
    pub(crate) fn guest_from_resource(
        &mut self,
        kind: GuestKind,
        vmid: u32,
        node: &str,
        r: &Resource,
        spec: &GuestSpec,
        at: &str,
    ) -> Result<Guest> {
        let running = matches!(
            r.status.as_deref(),
            Some("running" | "paused" | "prelaunch" | "suspended" | "inmigrate" | "postmigrate")
        );
        let template = r.template.unwrap_or(false);
        if template && running {
            // Proxmox refuses to start a template, so no dump can show one running.
            return Err(Error::scenario(
                format!("{at}.status"),
                format!("guest {vmid} is a template and cannot be running"),
            ));
        }
        check_bytes(r.maxmem, &format!("{at}.maxmem"))?;
        check_bytes(r.mem, &format!("{at}.mem"))?;
        check_bytes(r.memhost, &format!("{at}.memhost"))?;
        let spec_at = format!("sim.guests.{vmid}");
        check_bytes(spec.mem, &format!("{spec_at}.mem"))?;
        check_bytes(spec.memhost, &format!("{spec_at}.memhost"))?;
        if let Some(cpu) = spec.cpu {
            check_fraction(cpu, &format!("{spec_at}.cpu"))?;
        }
        let mem_mib = r.maxmem.map(|m| m.div_ceil(MIB)).unwrap_or(2048).max(16);
        let cores = r.maxcpu.map(|c| c.round() as u32).unwrap_or(1).max(1);
        let disk_gib = r
            .maxdisk
            .filter(|d| *d > 0)
            .map(|d| d.div_ceil(GIB))
            .unwrap_or(match kind {
                GuestKind::Qemu => 32,
                GuestKind::Lxc => 8,
            });
        let storage = self.default_storage(node, kind);
        let mac = self.new_mac();
        let disk_prefix = if template { "base" } else { "vm" };
        let mut values: BTreeMap<String, String> = BTreeMap::new();
        let mut set = |k: &str, v: String| {
            values.insert(k.to_string(), v);
        };
        match kind {
            GuestKind::Qemu => {
                set(
                    "name",
                    r.name.clone().unwrap_or_else(|| format!("vm{vmid}")),
                );
                set("memory", mem_mib.to_string());
                set("cores", cores.to_string());
                set("sockets", "1".into());
                set("cpu", "x86-64-v2-AES".into());
                set("ostype", "l26".into());
                set("scsihw", "virtio-scsi-single".into());
                set("boot", "order=scsi0;net0".into());
                set("net0", format!("virtio={mac},bridge=vmbr0,firewall=1"));
                set(
                    "scsi0",
                    format!("{storage}:{disk_prefix}-{vmid}-disk-0,iothread=1,size={disk_gib}G"),
                );
                set("smbios1", format!("uuid={}", self.new_uuid()));
                set("vmgenid", self.new_uuid());
            }
            GuestKind::Lxc => {
                set(
                    "hostname",
                    r.name.clone().unwrap_or_else(|| format!("ct{vmid}")),
                );
                set("memory", mem_mib.to_string());
                set("swap", "512".into());
                set("cores", cores.to_string());
                set("ostype", "debian".into());
                set("arch", "amd64".into());
                set("unprivileged", "1".into());
                set(
                    "rootfs",
                    format!("{storage}:{disk_prefix}-{vmid}-disk-0,size={disk_gib}G"),
                );
                set(
                    "net0",
                    format!("name=eth0,bridge=vmbr0,hwaddr={mac},ip=dhcp,type=veth"),
                );
            }
        }
        if template {
            values.insert("template".into(), "1".into());
        }
        if let Some(lock) = r.lock.clone().filter(|l| !l.is_empty()) {
            values.insert("lock".into(), lock);
        }
        if let Some(t) = r.tags.as_deref().filter(|t| !t.is_empty()) {
            check_tags(t, &format!("{at}.tags"))?;
            values.insert("tags".into(), tags::normalize(t, self.settings.tag_style));
        }
        for (k, v) in &spec.config {
            let key_at = format!("sim.guests.{vmid}.config.{k}");
            match v {
                Value::Null => {
                    values.remove(k);
                }
                Value::String(s) => {
                    values.insert(k.clone(), s.clone());
                }
                Value::Number(n) => {
                    values.insert(k.clone(), n.to_string());
                }
                Value::Bool(b) => {
                    values.insert(k.clone(), if *b { "1" } else { "0" }.into());
                }
                other => {
                    return Err(Error::scenario(
                        key_at,
                        format!("expected a string or number, got {other}"),
                    ));
                }
            }
            if k == "tags" {
                let t = values.get("tags").cloned().unwrap_or_default();
                check_tags(&t, &key_at)?;
                values.insert("tags".into(), tags::normalize(&t, self.settings.tag_style));
            }
        }
        // Keys the scenario set are named under `sim.guests`; generated ones under the resource
        // entry they came from.
        check_config(kind, &values, |k| {
            if spec.config.contains_key(k) {
                format!("sim.guests.{vmid}.config.{k}")
            } else {
                match k {
                    "name" | "hostname" => format!("{at}.name"),
                    "tags" | "lock" | "template" => format!("{at}.{k}"),
                    _ => at.to_string(),
                }
            }
        })?;
        let probe = Guest {
            vmid,
            kind,
            node: node.to_string(),
            running,
            config: Config {
                values: values.clone(),
                ..Config::default()
            },
            usage: GuestUsage::default(),
            started_at: 0.0,
            created_at: f64::NEG_INFINITY,
            pool: None,
        };
        for d in probe.disks() {
            if let Some(s) = &d.storage {
                match self.storages.get(s) {
                    None => {
                        return Err(Error::scenario(
                            format!("sim.guests.{vmid}.config.{}", d.key),
                            format!("no such storage '{s}'"),
                        ));
                    }
                    Some(st) if !st.available_on(node) => {
                        return Err(Error::scenario(
                            format!("sim.guests.{vmid}.config.{}", d.key),
                            format!("storage '{s}' is not available on node '{node}'"),
                        ));
                    }
                    _ => {}
                }
            }
        }
        let uptime = if running { r.uptime.unwrap_or(3600) } else { 0 };
        let rate = |counter: Option<u64>| match (counter, uptime) {
            (Some(c), u) if u > 0 => c as f64 / u as f64,
            _ => 0.0,
        };
        let maxmem = mem_mib.saturating_mul(MIB);
        let usage = GuestUsage {
            // A dump's own `cpu` may read a little over 1 (sampling), so it is clamped; the
            // `sim` value was checked above.
            cpu: spec.cpu.or(r.cpu).unwrap_or(0.0).clamp(0.0, 1.0),
            mem: spec
                .mem
                .or(r.mem)
                .unwrap_or(if running { maxmem / 2 } else { 0 }),
            memhost: spec.memhost.or(r.memhost),
            disk: r.disk.unwrap_or(0),
            netin_rate: spec.netin_rate.unwrap_or_else(|| rate(r.netin)),
            netout_rate: spec.netout_rate.unwrap_or_else(|| rate(r.netout)),
            diskread_rate: spec.diskread_rate.unwrap_or_else(|| rate(r.diskread)),
            diskwrite_rate: spec.diskwrite_rate.unwrap_or_else(|| rate(r.diskwrite)),
            pressure: spec.pressure.unwrap_or_default(),
        };
        Ok(Guest {
            vmid,
            kind,
            node: node.to_string(),
            running,
            config: Config {
                values,
                ..Config::default()
            },
            usage,
            started_at: self.now - uptime as f64,
            created_at: f64::NEG_INFINITY,
            pool: r.pool.clone().filter(|p| !p.is_empty()),
        })
    }

    /// The storage a generated disk goes to: shared storage with the right content if any,
    /// else the first local one.
    pub(crate) fn default_storage(&self, node: &str, kind: GuestKind) -> String {
        let content = match kind {
            GuestKind::Qemu => "images",
            GuestKind::Lxc => "rootdir",
        };
        let usable: Vec<&Storage> = self
            .storages
            .values()
            .filter(|s| s.available_on(node) && s.has_content(content))
            .collect();
        usable
            .iter()
            .find(|s| s.shared)
            .or_else(|| usable.first())
            .map(|s| s.id.clone())
            .unwrap_or_else(|| "local-lvm".into())
    }
}

fn check_tags(text: &str, at: &str) -> Result<()> {
    for t in tags::split_list(text) {
        if !tags::is_valid_tag(t) {
            return Err(Error::scenario(
                at,
                format!("invalid characters in tag '{t}'"),
            ));
        }
    }
    Ok(())
}

/// Checks each config key against the schema of `GET .../config` (property strings included).
pub(crate) fn check_config(
    kind: GuestKind,
    values: &BTreeMap<String, String>,
    at: impl Fn(&str) -> String,
) -> Result<()> {
    let schema = ApiSchema::embedded();
    let key = match kind {
        GuestKind::Qemu => "GET /nodes/{node}/qemu/{vmid}/config",
        GuestKind::Lxc => "GET /nodes/{node}/lxc/{vmid}/config",
    };
    let Some(props) = schema
        .endpoint(key)
        .and_then(|e| e.get("returns"))
        .and_then(|r| r.get("properties"))
        .and_then(Value::as_object)
    else {
        return Ok(());
    };
    let validator = schema.validator(Mode::Perl);
    for (k, v) in values {
        let Some(prop) = props.get(k).or_else(|| family_schema(props, k)) else {
            return Err(Error::scenario(
                at(k),
                format!("unknown {} config key '{k}'", kind.as_str()),
            ));
        };
        let mut errors = Errors::new();
        validator.check_prop(Some(&Value::String(v.clone())), prop, k, &mut errors);
        if let Some((_, msg)) = errors.into_iter().next() {
            return Err(Error::scenario(at(k), format!("{k}: {}", msg.trim_end())));
        }
    }
    Ok(())
}

/// Refuses a CPU figure that is not a fraction of the guest's vCPUs, as
/// `POST /_sim/guests/{vmid}/usage` does.
pub(crate) fn check_fraction(value: f64, at: &str) -> Result<()> {
    if (0.0..=1.0).contains(&value) {
        return Ok(());
    }
    Err(Error::scenario(
        at,
        format!("must be a fraction 0..1 of the guest's vCPUs, got {value}"),
    ))
}

/// Refuses a memory figure flxp would refuse too (more than 1 PiB): it names the field.
pub(crate) fn check_bytes(value: Option<u64>, at: &str) -> Result<()> {
    match value {
        Some(v) if v > flxp_core::cluster::MAX_BYTES => Err(Error::scenario(
            at,
            format!("{v} bytes is more than 1 PiB (no machine has that much memory)"),
        )),
        _ => Ok(()),
    }
}

//! `/nodes` and per-node endpoints: the node list, status, config (notes), rrddata, storage.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use flxp_core::lenient;

use super::quirks::{string_list, string_required};

/// One entry of `GET /nodes`.
#[serde_with::apply(Option => #[serde(default, with = "lenient::opt")])]
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeListEntry {
    /// Node name.
    #[serde(deserialize_with = "string_required")]
    pub node: String,
    /// `online`, `offline` or `unknown`.
    #[serialize_always]
    pub status: Option<String>,
    /// `node/<name>`.
    pub id: Option<String>,
    /// Always `node`.
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// CPU load as a fraction of all logical CPUs.
    pub cpu: Option<f64>,
    /// Logical CPUs.
    #[serde(default, with = "lenient::whole")]
    #[serde_with(skip_apply)]
    pub maxcpu: Option<f64>,
    /// Used memory in bytes (total − available).
    pub mem: Option<u64>,
    /// Total memory in bytes.
    pub maxmem: Option<u64>,
    /// Root file system used, in bytes.
    pub disk: Option<u64>,
    /// Root file system size, in bytes.
    pub maxdisk: Option<u64>,
    /// Seconds since boot.
    pub uptime: Option<u64>,
    /// Subscription level.
    pub level: Option<String>,
    /// SHA-256 fingerprint of the node's certificate (`AA:BB:...`).
    pub ssl_fingerprint: Option<String>,
}

/// `cpuinfo` of `GET /nodes/{node}/status`.
#[serde_with::apply(Option => #[serde(with = "lenient::opt")])]
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CpuInfo {
    /// CPU model name.
    pub model: Option<String>,
    /// Physical sockets.
    pub sockets: Option<u64>,
    /// Physical cores in all sockets.
    pub cores: Option<u64>,
    /// Logical CPUs.
    pub cpus: Option<u64>,
    /// Clock in MHz, sent as a string.
    pub mhz: Option<String>,
    /// Kernel clock ticks per second.
    pub user_hz: Option<u64>,
    /// CPU vendor.
    pub vendor: Option<String>,
    /// CPU flags, space-separated.
    pub flags: Option<String>,
    /// Whether hardware virtualisation is available.
    pub hvm: Option<bool>,
}

/// A byte-count block of `GET /nodes/{node}/status` (`memory`, `swap`, `rootfs`).
#[serde_with::apply(Option => #[serde(with = "lenient::opt")])]
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ByteUsage {
    /// Total bytes.
    pub total: Option<u64>,
    /// Used bytes (memory: total − available in PVE 9).
    pub used: Option<u64>,
    /// Free bytes.
    pub free: Option<u64>,
    /// Available memory (MemAvailable), in bytes (`memory` only).
    pub available: Option<u64>,
    /// Space available to unprivileged users, in bytes (`rootfs` only).
    pub avail: Option<u64>,
}

/// `GET /nodes/{node}/status`: hardware, memory, load; the extra fields Proxmox sends beyond its
/// schema are kept in `other`.
#[serde_with::apply(Option => #[serde(with = "lenient::opt")])]
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct NodeStatus {
    /// CPU load as a fraction of all logical CPUs.
    pub cpu: Option<f64>,
    /// iowait as a fraction.
    pub wait: Option<f64>,
    /// CPU facts.
    #[serde_with(skip_apply)]
    pub cpuinfo: Option<CpuInfo>,
    /// Load averages over 1, 5 and 15 minutes, as three strings.
    #[serde(
        deserialize_with = "string_list",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub loadavg: Vec<String>,
    /// Memory in bytes.
    #[serde_with(skip_apply)]
    pub memory: Option<ByteUsage>,
    /// Swap in bytes.
    #[serde_with(skip_apply)]
    pub swap: Option<ByteUsage>,
    /// Root file system in bytes.
    #[serde_with(skip_apply)]
    pub rootfs: Option<ByteUsage>,
    /// Seconds since boot.
    pub uptime: Option<u64>,
    /// `pve-manager/9.2.11/<repoid>`.
    pub pveversion: Option<String>,
    /// Kernel version line.
    pub kversion: Option<String>,
    /// Everything else (`ksm`, `current-kernel`, `boot-info`, `idle`, ...), as sent.
    #[serde(flatten)]
    pub other: BTreeMap<String, serde_json::Value>,
}

/// `GET /nodes/{node}/config`: the node's notes (`description`) and other options.
#[serde_with::apply(Option => #[serde(with = "lenient::opt")])]
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct NodeConfig {
    /// The notes, holding flxp's node tokens (`flxp.label.ssd`, `flxp.maintenance`).
    pub description: Option<String>,
    /// SHA-1 of the node config file.
    pub digest: Option<String>,
    /// Other options (`wakeonlan`, `startall-onboot-delay`, ...), as sent.
    #[serde(flatten)]
    pub other: BTreeMap<String, serde_json::Value>,
}

/// Body of `PUT /nodes/{node}/config`: new notes, deletions, optimistic-lock digest.
#[serde_with::apply(Option => #[serde(with = "lenient::opt")])]
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct NodeConfigUpdate {
    /// New notes.
    pub description: Option<String>,
    /// Comma-separated option names to delete.
    pub delete: Option<String>,
    /// Refuse the change if the config's digest differs.
    pub digest: Option<String>,
}

/// What `POST /nodes/{node}/status` does to the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeCommand {
    /// Power off (`poweroff` two seconds later; `pve-guests` stops its guests on the way).
    Shutdown,
    /// Reboot.
    Reboot,
}

/// Body of `POST /nodes/{node}/status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeCommandParams {
    /// The command.
    pub command: NodeCommand,
}

/// The `timeframe` of an `rrddata` query (PVE 9: hour = 60 rows of 60 s).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RrdTimeframe {
    /// 60 s steps over an hour.
    Hour,
    /// 60 s steps over a day.
    Day,
    /// 30 min steps over a week.
    Week,
    /// 30 min steps over a month.
    Month,
    /// 6 h steps over a year.
    Year,
    /// 1 week steps over ten years (nodes and storages only).
    Decade,
}

impl RrdTimeframe {
    /// The time frame a `timeframe` parameter names (`hour`, `day`, ...), if any.
    pub fn parse(name: &str) -> Option<Self> {
        use serde::de::{IntoDeserializer, value::Error};
        Self::deserialize(IntoDeserializer::<Error>::into_deserializer(name)).ok()
    }

    /// (step seconds, number of rows) of the PVE 9 RRD format behind it.
    pub fn resolution(self) -> (i64, usize) {
        match self {
            Self::Hour => (60, 60),
            Self::Day => (60, 1440),
            Self::Week => (1800, 336),
            Self::Month => (1800, 1440),
            Self::Year => (21600, 1440),
            Self::Decade => (604_800, 570),
        }
    }
}

/// The consolidation function of an `rrddata` query.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum RrdCf {
    /// Averages (the default).
    Average,
    /// Maxima.
    Max,
}

/// Query of `GET /nodes/{node}/rrddata` and guest `rrddata`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RrdQuery {
    /// Which range and resolution (required by Proxmox).
    pub timeframe: RrdTimeframe,
    /// Averages or maxima.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cf: Option<RrdCf>,
}

/// One entry of `GET /nodes/{node}/storage`.
#[serde_with::apply(Option => #[serde(default, with = "lenient::opt")])]
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StorageEntry {
    /// Storage id.
    #[serde(deserialize_with = "string_required")]
    pub storage: String,
    /// Plugin type (`dir`, `lvmthin`, `zfspool`, `rbd`, ...).
    #[serde(rename = "type")]
    #[serialize_always]
    pub kind: Option<String>,
    /// Content types (`images,rootdir`).
    #[serialize_always]
    pub content: Option<String>,
    /// Whether it is shared between nodes.
    pub shared: Option<bool>,
    /// Whether it is active on this node.
    pub active: Option<bool>,
    /// Whether it is enabled.
    pub enabled: Option<bool>,
    /// Size in bytes.
    pub total: Option<u64>,
    /// Used bytes.
    pub used: Option<u64>,
    /// Available bytes: what a clone or migration target needs.
    pub avail: Option<u64>,
    /// Used as a fraction of total.
    pub used_fraction: Option<f64>,
}

/// Query of `GET /nodes/{node}/storage/{storage}/content`.
#[serde_with::apply(Option => #[serde(with = "lenient::opt")])]
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ContentQuery {
    /// Only volumes of this content type (`images`, `rootdir`).
    pub content: Option<String>,
    /// Only volumes of this guest.
    pub vmid: Option<u32>,
}

/// Query of `GET /nodes/{node}/storage`.
#[serde_with::apply(Option => #[serde(with = "lenient::opt")])]
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct StorageQuery {
    /// Only storages holding these content types (`images`).
    pub content: Option<String>,
    /// Only enabled storages.
    pub enabled: Option<bool>,
    /// Only this storage.
    pub storage: Option<String>,
    /// Only storages also usable on this node.
    pub target: Option<String>,
}

#[cfg(test)]
mod tests {
    // Tests may panic on malformed fixtures: that is the failure report.
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::types::RrdRow;
    use crate::types::form::to_form;

    #[test]
    fn node_list_reads_strings_and_writes_numbers() {
        let n: Vec<NodeListEntry> = serde_json::from_str(
            r#"[{"node":"pve1","status":"online","cpu":"0.125","maxcpu":"32","mem":"34359738368",
                 "maxmem":68719476736,"uptime":86400,"level":"","ssl_fingerprint":"AA:BB",
                 "id":"node/pve1","type":"node"}]"#,
        )
        .unwrap();
        assert_eq!(n[0].cpu, Some(0.125));
        assert_eq!(n[0].mem, Some(32 << 30));
        let back = serde_json::to_value(&n[0]).unwrap();
        assert_eq!(back["maxcpu"], serde_json::json!(32));
        assert_eq!(back["mem"], serde_json::json!(34_359_738_368_u64));
        assert!(back.get("disk").is_none(), "absent, not null: {back}");
    }

    #[test]
    fn a_node_list_entry_needs_its_node_and_writes_its_status() {
        let e = serde_json::from_str::<NodeListEntry>(r#"{"status":"online"}"#).unwrap_err();
        assert!(e.to_string().contains("missing field `node`"), "{e}");
        let n: NodeListEntry = serde_json::from_str(r#"{"node":"pve1"}"#).unwrap();
        let back = serde_json::to_string(&n).unwrap();
        assert_eq!(back, r#"{"node":"pve1","status":null}"#);
    }

    #[test]
    fn node_status_reads_the_reference_shape_with_extras() {
        let s: NodeStatus = serde_json::from_str(
            r##"{"cpu":0.0312,"wait":0.001,"loadavg":["0.52","0.58","0.59"],
                "cpuinfo":{"cores":16,"cpus":32,"model":"AMD EPYC","sockets":1,"mhz":"2994.374",
                           "user_hz":100,"hvm":"1","flags":"fpu vme"},
                "memory":{"total":68719476736,"used":"17179869184","free":1073741824,"available":51539607552},
                "rootfs":{"total":100,"used":40,"free":60,"avail":55},
                "swap":{"total":0,"used":0,"free":0},"ksm":{"shared":0},
                "uptime":86400,"idle":0,"kversion":"Linux 6.14",
                "pveversion":"pve-manager/9.2.11/3a6b1f0c",
                "current-kernel":{"sysname":"Linux","release":"6.14.8-2-pve","version":"#1","machine":"x86_64"},
                "boot-info":{"mode":"efi","secureboot":0}}"##,
        )
        .unwrap();
        assert_eq!(s.loadavg, ["0.52", "0.58", "0.59"]);
        assert_eq!(s.memory.as_ref().unwrap().used, Some(16 << 30));
        assert_eq!(s.cpuinfo.as_ref().unwrap().hvm, Some(true));
        assert_eq!(s.other["ksm"]["shared"], 0);
        assert_eq!(s.other["boot-info"]["mode"], "efi");
        let back = serde_json::to_value(&s).unwrap();
        assert_eq!(back["loadavg"], serde_json::json!(["0.52", "0.58", "0.59"]));
        assert_eq!(back["cpuinfo"]["hvm"], 1);
    }

    #[test]
    fn node_config_holds_the_notes() {
        let c: NodeConfig = serde_json::from_str(
            r#"{"description":"flxp.label.ssd flxp.taint.gpu\n","digest":"1f2e","wakeonlan":"aa:bb:cc:dd:ee:ff"}"#,
        )
        .unwrap();
        assert_eq!(
            c.description.as_deref(),
            Some("flxp.label.ssd flxp.taint.gpu\n")
        );
        assert_eq!(c.other["wakeonlan"], "aa:bb:cc:dd:ee:ff");
        let u = NodeConfigUpdate {
            description: Some("flxp.maintenance".into()),
            delete: None,
            digest: Some("1f2e".into()),
        };
        assert_eq!(
            to_form(&u).unwrap(),
            "description=flxp.maintenance&digest=1f2e"
        );
    }

    #[test]
    fn rrd_query_and_rows() {
        let q = RrdQuery {
            timeframe: RrdTimeframe::Hour,
            cf: Some(RrdCf::Average),
        };
        assert_eq!(to_form(&q).unwrap(), "timeframe=hour&cf=AVERAGE");
        let rows: Vec<RrdRow> = serde_json::from_str(
            r#"[{"time":1764399900,"cpu":0.05,"memused":"1234","pressurememorysome":0.5},
                {"time":1764399960}]"#,
        )
        .unwrap();
        assert_eq!(rows[0].get("memused"), Some(1234.0));
        assert_eq!(rows[0].get("pressurememorysome"), Some(0.5));
        assert_eq!(rows[1].0.len(), 1);
    }

    #[test]
    fn storage_entries_read_perl_booleans() {
        let s: Vec<StorageEntry> = serde_json::from_str(
            r#"[{"storage":"local-lvm","type":"lvmthin","content":"images,rootdir","shared":0,
                 "active":1,"enabled":"1","total":"1000","used":400,"avail":600,"used_fraction":0.4}]"#,
        )
        .unwrap();
        assert_eq!(s[0].shared, Some(false));
        assert_eq!(s[0].enabled, Some(true));
        assert_eq!(s[0].total, Some(1000));
        let back = serde_json::to_string(&s[0]).unwrap();
        assert!(
            back.contains(r#""shared":0,"active":1,"enabled":1"#),
            "{back}"
        );
        let q = StorageQuery {
            content: Some("images".into()),
            enabled: Some(true),
            ..Default::default()
        };
        assert_eq!(to_form(&q).unwrap(), "content=images&enabled=1");
    }
}

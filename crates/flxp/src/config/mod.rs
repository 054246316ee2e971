//! The config file (`--config F`, else `FLXP_CONFIG`, else `/etc/flxp/flxp.toml`).
//!
//! One TOML file holds the zones (Proxmox clusters), placement and balancing settings, limits on
//! migrations, the daemon, the API, node overrides, and what `createVM` needs (compute and storage
//! profiles, images, networks). [`Config::load`] reads and checks all of it at start, before
//! anything runs: every mistake is reported with its line and column and the key's dotted path.
//!
//! ```toml
//! [zones.eu-central]
//! hosts = ["pve1.example.com", "pve2.example.com"]
//! token = "flxp@pve!scheduler"
//! token-secret-file = "/etc/flxp/eu-central.token"
//! fingerprint = "AA:BB:…"
//!
//! [placement]
//! policy = "free-memory"
//! reserve = "2GiB"
//!
//! [balance]
//! max-migrations = 10
//! [balance.trigger]
//! threshold = 10
//!
//! [compute-profiles.medium]
//! cores = 2
//! memory = "4GiB"
//! ```

pub mod catalog;
mod locate;
pub mod reference;
mod sections;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

use flxp_core::Overrides;
use flxp_core::balance::{BalanceOptions, EvacuateOptions, RawBalanceOptions, Registry};
use flxp_core::placement::{PlacementOptions, Policy};
use flxp_engine::create_vm::MIN_DISK_BYTES;
use flxp_pve::ZoneConfig;
use serde::Deserialize;

pub use locate::Place;
pub use sections::CreateVmSection;
#[cfg(test)]
use sections::Size;
pub use sections::{
    ApiSection, AuditSection, ComputeProfile, ConsolidateSection, DaemonSection, Image,
    LeaseSection, MigrationSection, Network, NodeOverride, PlacementSection, PluginSection, Role,
    RollingSection, StorageProfile, WebhookSection,
};

/// Where the config file is when neither `--config` nor `FLXP_CONFIG` says.
pub const DEFAULT_PATH: &str = "/etc/flxp/flxp.toml";

/// The whole config file, its names checked: what [`Config::load`] returns.
pub type Config = ConfigOf<BalanceOptions>;

/// The config file as serde reads it: the balancing method still a name (stage 1 of
/// [`Config::parse`]; [`RawConfig::resolve`] is stage 2).
pub type RawConfig = ConfigOf<RawBalanceOptions>;

/// The whole config file, with the `[balance]` section held as `B`: the method as written
/// ([`RawConfig`]) or checked against the balancing methods' registry ([`Config`]).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "kebab-case", deny_unknown_fields)]
pub struct ConfigOf<B> {
    /// Proxmox clusters by zone name.
    pub zones: BTreeMap<String, ZoneConfig>,
    /// Placement filters' knobs and the default policy.
    pub placement: PlacementSection,
    /// Configured policies: name → scorer → weight.
    pub policies: BTreeMap<String, BTreeMap<String, f64>>,
    /// Rebalancing planner and trigger.
    pub balance: B,
    /// Evacuation planner.
    pub evacuate: EvacuateOptions,
    /// Consolidation (power saving): limits of `flxp consolidate` and whether it switches nodes off.
    pub consolidate: ConsolidateSection,
    /// Limits on carrying out migrations.
    pub migration: MigrationSection,
    /// Rolling maintenance: the hook, nodes out at a time, the boot timeout.
    pub rolling: RollingSection,
    /// The periodic loop.
    pub daemon: DaemonSection,
    /// The API server.
    pub api: ApiSection,
    /// Per zone, per node overrides of notes and maintenance.
    pub overrides: BTreeMap<String, BTreeMap<String, NodeOverride>>,
    /// VM sizes for `createVM`.
    pub compute_profiles: BTreeMap<String, ComputeProfile>,
    /// Disk placements for `createVM`.
    pub storage_profiles: BTreeMap<String, StorageProfile>,
    /// Templates for `createVM`.
    pub images: BTreeMap<String, Image>,
    /// Networks for `createVM` interfaces.
    pub networks: BTreeMap<String, Network>,
    /// How `createVM` carries out its steps.
    pub create_vm: CreateVmSection,
    /// One active flxp per zone.
    pub lease: LeaseSection,
    /// External filters, scorers and balancing methods (`[[plugin]]`).
    pub plugin: Vec<PluginSection>,
    /// The audit log of API actions.
    pub audit: AuditSection,
    /// Where events are POSTed (`[[webhook]]`).
    pub webhook: Vec<WebhookSection>,
    /// The file and text it was read from, to place mistakes found later (unreadable secrets).
    #[serde(skip)]
    origin: Option<Origin>,
}

/// Where a config came from. Its `Debug` shows the path only: the text may hold secrets.
#[derive(Clone)]
struct Origin {
    file: PathBuf,
    text: String,
}

impl fmt::Debug for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Origin")
            .field("file", &self.file)
            .finish_non_exhaustive()
    }
}

/// A mistake in the config file, with its place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file.
    pub file: PathBuf,
    /// Line and column, when known.
    pub place: Option<Place>,
    /// Dotted key path (`zones.eu.hosts`), empty when the parser did not say.
    pub key: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "config file {}", self.file.display())?;
        if let Some(p) = self.place {
            write!(f, ":{}:{}", p.line, p.column)?;
        }
        if !self.key.is_empty() {
            write!(f, ": {}", self.key)?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ConfigError {}

impl ConfigError {
    /// A mistake found after parsing (e.g. against the live cluster at start), placed at the
    /// dotted `key` (or its deepest existing parent) in the file's `text`.
    pub fn at_key(text: &str, file: &Path, key: &str, message: impl Into<String>) -> Self {
        let segments: Vec<&str> = key.split('.').collect();
        Self {
            file: file.to_path_buf(),
            place: locate::Locator::new(text).find(&segments),
            key: key.to_owned(),
            message: message.into(),
        }
    }
}

impl Config {
    /// Names of the config's plugins of one kind.
    pub fn plugin_names(&self, kind: flxp_core::plugin::PluginKind) -> Vec<&str> {
        self.plugin
            .iter()
            .filter(|p| p.kind == kind)
            .map(|p| p.name.as_str())
            .collect()
    }

    /// The config path: the flag, else `FLXP_CONFIG` (clap fills the flag from it), else the default.
    pub fn path(flag: Option<&Path>) -> PathBuf {
        flag.map_or_else(|| PathBuf::from(DEFAULT_PATH), Path::to_path_buf)
    }

    /// Reads, parses and checks a config file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        // A config is a few KiB; a bound keeps `--config /dev/zero` from eating memory.
        const MAX_CONFIG_BYTES: u64 = 16 << 20;
        let text = std::fs::File::open(path)
            .map_err(anyhow::Error::from)
            .and_then(|f| crate::input::read_limited(f, MAX_CONFIG_BYTES, "the file"))
            .map_err(|e| ConfigError {
                file: path.to_path_buf(),
                place: None,
                key: String::new(),
                message: format!("cannot be read: {e:#}"),
            })?;
        tracing::debug!(config = %path.display(), "read the config file");
        Self::parse(&text, path)
    }

    /// Parses and checks config text; `path` is only used in errors. `[balance] method` names a
    /// built-in method or a balance plugin of the same file.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        Self::parse_with(text, path, Registry::builtin())
    }

    /// [`Config::parse`] with the balancing methods of `methods` (an embedder's) in place of the
    /// built-in ones, and the file's balance plugins on top of them.
    pub fn parse_with(text: &str, path: &Path, methods: &Registry) -> Result<Self, ConfigError> {
        let locator = locate::Locator::new(text);
        let at_key = |(key, message): (String, String)| {
            let segments: Vec<&str> = key.split('.').collect();
            ConfigError {
                file: path.to_path_buf(),
                place: locator.find(&segments),
                key,
                message,
            }
        };
        // Stage 1: the file as written, names as text.
        let raw: RawConfig = toml::from_str(text).map_err(|e| {
            let mut key = e
                .span()
                .and_then(|s| locator.key_at(s.start))
                .unwrap_or_default();
            let mut message = e.message().trim().to_owned();
            // `[[consolidate]]` for `[consolidate]`: serde reads the array as the struct's
            // fields in order and complains about the first one ("expected f64").
            if message.starts_with("invalid type") && locator.is_array_of_tables(&key) {
                message =
                    format!("expected a table `[{key}]`, found an array of tables `[[{key}]]`");
            }
            // A mistake inside a `[[plugin]]` table names that plugin and the key.
            if let Some((i, name, k)) = e.span().and_then(|s| locator.entry_at("plugin", s.start)) {
                key = match k {
                    Some(k) => format!("plugin[{i}].{k}"),
                    None => format!("plugin[{i}]"),
                };
                if let Some(name) = name {
                    message = format!("plugin {name:?}: {message}");
                }
            }
            ConfigError {
                file: path.to_path_buf(),
                place: e.span().map(|s| locator.place(s.start)),
                key,
                message,
            }
        })?;
        // Stage 2: names resolved once, against the methods plus the file's balance plugins
        // (checked first: the registry refuses two methods of one name).
        check_plugins(&raw.plugin).map_err(at_key)?;
        let mut config = raw.resolve(methods).map_err(at_key)?;
        config.check().map_err(at_key)?;
        config.origin = Some(Origin {
            file: path.to_path_buf(),
            text: text.to_owned(),
        });
        Ok(config)
    }

    /// The API client of zone `name`; a secret that cannot be read (a missing file, an unset
    /// variable) is a config error at the zone's place in the file.
    pub fn client(&self, name: &str) -> Result<flxp_pve::Client, ConfigError> {
        let at = |message: String| match &self.origin {
            Some(o) => ConfigError::at_key(&o.text, &o.file, &format!("zones.{name}"), message),
            None => ConfigError {
                file: PathBuf::new(),
                place: None,
                key: format!("zones.{name}"),
                message,
            },
        };
        let zone = self
            .zones
            .get(name)
            .ok_or_else(|| at(format!("no zone {name:?} in the config")))?;
        flxp_pve::Client::from_zone(zone).map_err(|e| at(e.to_string()))
    }

    /// Places a mistake found after parsing at the dotted `key`, when the file is known.
    pub fn error_at(&self, key: &str, message: impl Into<String>) -> anyhow::Error {
        match &self.origin {
            Some(o) => ConfigError::at_key(&o.text, &o.file, key, message).into(),
            None => anyhow::anyhow!("{key}: {}", message.into()),
        }
    }

    /// The zone lease that acting needs (the daemon, serve, one-off runs), unless `[lease]
    /// enabled = false`; `command` (`serve`, `evacuate`, ...) is written beside the holder.
    pub fn lease_settings(&self, command: &str) -> Option<flxp_engine::daemon::LeaseSettings> {
        let l = &self.lease;
        l.enabled.then(|| flxp_engine::daemon::LeaseSettings {
            options: flxp_engine::LeaseOptions {
                ttl: std::time::Duration::from_secs(l.ttl_secs),
                margin: std::time::Duration::from_secs(l.margin_secs),
                holder: flxp_engine::lease::holder_id(),
                command: Some(command.to_owned()),
                hold: l.hold.into(),
            },
            nodes: self
                .zones
                .iter()
                .filter_map(|(name, z)| Some((name.clone(), z.lease_node.clone()?)))
                .collect(),
        })
    }

    /// Checks each `[[webhook]]`: an http(s) URL with a host, known event names, header names
    /// and values HTTP accepts, sane limits. Errors name the webhook by position, never its URL
    /// or a header value (both may hold a secret).
    fn check_webhooks(&self) -> Result<(), (String, String)> {
        for (i, w) in self.webhook.iter().enumerate() {
            let at = |key: &str, message: String| Err((format!("webhook[{i}].{key}"), message));
            match reqwest::Url::parse(&w.url) {
                Err(e) => return at("url", format!("not a URL: {e}")),
                Ok(u) if !matches!(u.scheme(), "http" | "https") => {
                    return at(
                        "url",
                        format!("the scheme is {:?}; use http or https", u.scheme()),
                    );
                }
                Ok(u) if u.host_str().is_none_or(str::is_empty) => {
                    return at("url", "names no host".into());
                }
                Ok(_) => {}
            }
            for e in &w.events {
                if !crate::event::EVENTS.contains(&e.as_str()) {
                    return at(
                        "events",
                        format!(
                            "unknown event {e:?}; events: {}",
                            crate::event::EVENTS.join(", ")
                        ),
                    );
                }
            }
            for (name, value) in &w.headers {
                if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
                    return at("headers", format!("{name:?} is not a header name"));
                }
                if reqwest::header::HeaderValue::from_str(value).is_err() {
                    return at(
                        "headers",
                        format!("the value of {name} is not a valid header value"),
                    );
                }
            }
            if w.timeout_secs == 0 || w.timeout_secs > 300 {
                return at("timeout-secs", "must be between 1 and 300".into());
            }
            if w.retries > 20 {
                return at("retries", "must be at most 20".into());
            }
            if w.backoff_ms > 3_600_000 {
                return at("backoff-ms", "must be at most an hour".into());
            }
            if w.queue == 0 || w.queue > 100_000 {
                return at("queue", "must be between 1 and 100000".into());
            }
        }
        Ok(())
    }

    /// Every duration within bounds: a year at most (more is a typo, and would overflow clock
    /// arithmetic), a lease an hour at most (a holder that dies keeps the zone locked that long).
    fn check_durations(&self) -> Result<(), (String, String)> {
        const YEAR_SECS: u64 = 365 * 24 * 3600;
        const LEASE_TTL_SECS: u64 = 3600;
        let too_long = |key: &str, value: u64, max: u64, why: &str| {
            Err((
                key.to_owned(),
                format!("{value} is more than {max} ({why})"),
            ))
        };
        if self.lease.ttl_secs > LEASE_TTL_SECS {
            return too_long(
                "lease.ttl-secs",
                self.lease.ttl_secs,
                LEASE_TTL_SECS,
                "an hour: a holder that dies keeps the zone locked until its lease ends",
            );
        }
        let secs = [
            ("migration.timeout-secs", self.migration.timeout_secs),
            (
                "migration.drain-timeout-secs",
                self.migration.drain_timeout_secs,
            ),
            ("daemon.interval-secs", self.daemon.interval_secs),
            ("daemon.full-read-secs", self.daemon.full_read_secs),
            ("daemon.smoothing-secs", self.daemon.smoothing_secs),
            ("lease.margin-secs", self.lease.margin_secs),
            ("create-vm.timeout-secs", self.create_vm.timeout_secs),
            (
                "create-vm.reservation-ttl-secs",
                self.create_vm.reservation_ttl_secs,
            ),
            (
                "create-vm.stale-after-secs",
                self.create_vm.stale_after_secs,
            ),
            (
                "consolidate.min-interval-secs",
                self.consolidate.min_interval_secs,
            ),
            (
                "consolidate.wake-timeout-secs",
                self.consolidate.wake_timeout_secs,
            ),
            ("rolling.boot-timeout-secs", self.rolling.boot_timeout_secs),
        ];
        for (key, value) in secs {
            if value > YEAR_SECS {
                return too_long(key, value, YEAR_SECS, "a year, in seconds");
            }
        }
        let poll = self.create_vm.poll_ms;
        if poll > YEAR_SECS * 1000 {
            return too_long("create-vm.poll-ms", poll, YEAR_SECS * 1000, "a year, in ms");
        }
        Ok(())
    }

    /// Checks what serde cannot: references between tables, ranges, names.
    fn check(&self) -> Result<(), (String, String)> {
        self.check_webhooks()?;
        if self.rolling.parallel == 0 {
            return Err((
                "rolling.parallel".into(),
                "must be at least 1: the number of nodes out at a time".into(),
            ));
        }
        if self.audit.enabled && self.audit.max_size.0 < 4096 {
            return Err((
                "audit.max-size".into(),
                "must be at least 4KiB: every rotation would keep a few lines only".into(),
            ));
        }
        for (name, zone) in &self.zones {
            zone.validate().map_err(|e| match e {
                flxp_pve::Error::Config { key, message } => {
                    // Zone keys come as `hosts[1]`: keep the table key for the lookup.
                    let key = key.split('[').next().unwrap_or(&key).to_owned();
                    (format!("zones.{name}.{key}"), message)
                }
                other => (format!("zones.{name}"), other.to_string()),
            })?;
        }
        for (name, zone) in &self.zones {
            // The lease lives in this node's notes (`/nodes/{node}/config`): a name Proxmox
            // cannot have is a mistake here; one absent from the cluster shows at runtime.
            if let Some(node) = zone
                .lease_node
                .as_deref()
                .filter(|n| !flxp_core::names::is_dns_label(n))
            {
                return Err((
                    format!("zones.{name}.lease-node"),
                    format!(
                        "{node:?} is not a node name (letters, digits and '-', 1 to 63, not \
                         starting or ending with '-')"
                    ),
                ));
            }
        }
        self.check_durations()?;
        if self.lease.ttl_secs <= self.lease.margin_secs {
            return Err((
                "lease.ttl-secs".into(),
                format!(
                    "must be longer than lease.margin-secs ({}): a holder stops acting at ttl - margin",
                    self.lease.margin_secs
                ),
            ));
        }
        let policies = self.policies()?;
        self.placement_options()
            .validate()
            .map_err(|e| ("placement".to_owned(), e.to_string()))?;
        let known: BTreeSet<&str> = Policy::builtin_names()
            .into_iter()
            .chain(policies.iter().map(|p| p.name.as_str()))
            .collect();
        let named = [
            ("placement.policy", self.placement.policy.as_deref()),
            ("evacuate.policy", Some(self.evacuate.policy.as_str())),
        ];
        for (key, policy) in named {
            if let Some(p) = policy.filter(|p| !known.contains(p)) {
                return Err((
                    key.into(),
                    format!(
                        "unknown policy {p:?}; known: {}",
                        known.into_iter().collect::<Vec<_>>().join(", ")
                    ),
                ));
            }
        }
        self.balance
            .validate()
            .map_err(|e| ("balance".to_owned(), e.to_string()))?;
        // Balancing starts above the threshold and stops at the target: a target above it would
        // be cut to the threshold without a word.
        let trigger = &self.balance.trigger;
        let threshold = trigger.threshold_for(self.balance.measure);
        if let Some(target) = trigger.target.filter(|t| *t > threshold) {
            return Err((
                "balance.trigger.target".into(),
                format!(
                    "must be at most the threshold {threshold} (balancing stops at the target), got {target}"
                ),
            ));
        }
        self.consolidate.options().validate().map_err(|e| match e {
            flxp_core::Error::Option { name, message } if name.starts_with("consolidate.") => {
                (name, message)
            }
            flxp_core::Error::Option { name, message } => (format!("consolidate.{name}"), message),
            other => ("consolidate".to_owned(), other.to_string()),
        })?;
        self.consolidate.check_auto()?;
        let m = &self.migration;
        for (key, v) in [
            ("parallel", m.parallel),
            ("per-node-in", m.per_node_in),
            ("per-node-out", m.per_node_out),
        ] {
            if v == 0 {
                return Err((format!("migration.{key}"), "must be at least 1".into()));
            }
        }
        if m.timeout_secs == 0 {
            return Err(("migration.timeout-secs".into(), "must be at least 1".into()));
        }
        if !(0.01..=3600.0).contains(&m.poll_secs) {
            return Err((
                "migration.poll-secs".into(),
                format!("{} is not between 0.01 and 3600 seconds", m.poll_secs),
            ));
        }
        if self.daemon.interval_secs == 0 {
            return Err((
                "daemon.interval-secs".into(),
                "must be at least 1 second".into(),
            ));
        }
        for z in &self.daemon.zones {
            self.zone_known(z, "daemon.zones")?;
        }
        for z in self.overrides.keys() {
            self.zone_known(z, &format!("overrides.{z}"))?;
        }
        for (i, t) in self.api.tokens.iter().enumerate() {
            let given = [t.value.is_some(), t.env.is_some(), t.file.is_some()]
                .iter()
                .filter(|x| **x)
                .count();
            if given != 1 {
                return Err((
                    format!("api.tokens[{i}]"),
                    "give exactly one of value, env or file".into(),
                ));
            }
        }
        if let Some(listen) = &self.api.listen {
            listen.parse::<std::net::SocketAddr>().map_err(|e| {
                (
                    "api.listen".to_owned(),
                    format!("{listen:?} is not an address:port ({e})"),
                )
            })?;
        }
        for (id, p) in &self.compute_profiles {
            first_broken(
                "compute-profiles",
                id,
                &[
                    (
                        p.cores == 0 || p.sockets == Some(0),
                        "cores",
                        "cores and sockets must be at least 1",
                    ),
                    (
                        p.memory.0 < 16 << 20,
                        "memory",
                        "must be at least 16 MiB (Proxmox's minimum)",
                    ),
                ],
            )?;
        }
        for (id, s) in &self.storage_profiles {
            first_broken(
                "storage-profiles",
                id,
                &[
                    (s.storage.is_empty(), "storage", "names no storage"),
                    (s.disk.0 < MIN_DISK_BYTES, "disk", "must be at least 1 GiB"),
                ],
            )?;
        }
        for (id, img) in &self.images {
            for z in img.zones.keys() {
                self.zone_known(z, &format!("images.{id}.zones.{z}"))?;
            }
            if img.template.is_none()
                && img
                    .zones
                    .values()
                    .all(|z| z.template.is_none() && z.nodes.is_empty())
            {
                return Err((
                    format!("images.{id}"),
                    "names no template (template = <vmid>, or per zone)".into(),
                ));
            }
            let vmids = img.template.into_iter().chain(
                img.zones
                    .values()
                    .flat_map(|z| z.template.into_iter().chain(z.nodes.values().copied())),
            );
            for vmid in vmids {
                if !(100..=999_999_999).contains(&vmid) {
                    return Err((
                        format!("images.{id}"),
                        format!("template vmid {vmid} is outside 100..999999999"),
                    ));
                }
            }
        }
        let c = &self.create_vm;
        if c.poll_ms == 0 || c.timeout_secs == 0 || c.reservation_ttl_secs == 0 {
            return Err((
                "create-vm".into(),
                "poll-ms, timeout-secs and reservation-ttl-secs must be at least 1".into(),
            ));
        }
        // A marker younger than a creation's own task timeout may belong to a creation still
        // running on another replica.
        if c.stale_after_secs < c.timeout_secs {
            return Err((
                "create-vm.stale-after-secs".into(),
                format!(
                    "must be at least timeout-secs ({}): a younger marker may be a creation in progress",
                    c.timeout_secs
                ),
            ));
        }
        if self.api.ready_secs == Some(0) {
            return Err(("api.ready-secs".into(), "must be at least 1 second".into()));
        }
        for (id, n) in &self.networks {
            if n.bridge.is_empty() {
                return Err((format!("networks.{id}.bridge"), "names no bridge".into()));
            }
            // Proxmox's bridge ids, and Linux interface names (at most 15 bytes).
            let valid = n.bridge.len() <= 15
                && n.bridge
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
            if !valid {
                return Err((
                    format!("networks.{id}.bridge"),
                    format!(
                        "{:?} is not a bridge name (letters, digits, - _ . only, at most 15 characters, like vmbr0)",
                        n.bridge
                    ),
                ));
            }
            if n.vlan.is_some_and(|v| !(1..=4094).contains(&v)) {
                return Err((
                    format!("networks.{id}.vlan"),
                    "must be from 1 to 4094".into(),
                ));
            }
        }
        Ok(())
    }

    fn zone_known(&self, zone: &str, key: &str) -> Result<(), (String, String)> {
        if self.zones.contains_key(zone) {
            Ok(())
        } else {
            Err((
                key.to_owned(),
                format!(
                    "zone {zone:?} is not defined (zones: {})",
                    self.zones.keys().cloned().collect::<Vec<_>>().join(", ")
                ),
            ))
        }
    }

    /// Placement options for the core.
    pub fn placement_options(&self) -> PlacementOptions {
        let p = &self.placement;
        let mut o = PlacementOptions::default();
        if let Some(policy) = &p.policy {
            o.policy = policy.clone();
        }
        o.reserve_bytes = p.reserve.map_or(0, |s| s.0);
        o.node_reserve_bytes = p
            .node_reserve
            .iter()
            .map(|(k, v)| (k.clone(), v.0))
            .collect();
        o.max_memory_commit = p.max_memory_commit;
        o.max_vcpu_ratio = p.max_vcpu_ratio;
        o
    }

    /// Configured policies for the core.
    pub fn policies(&self) -> Result<Vec<Policy>, (String, String)> {
        let scorers = self.plugin_names(flxp_core::plugin::PluginKind::Score);
        for (name, weights) in &self.policies {
            for scorer in weights.keys() {
                if let Some(why) = self.plugin_misplaced(scorer) {
                    return Err((format!("policies.{name}.{scorer}"), why));
                }
            }
        }
        self.policies
            .iter()
            .map(|(name, weights)| {
                Policy::custom_with(name, weights.clone(), &scorers).map_err(|e| match e {
                    flxp_core::Error::Option { name, message } => (name, message),
                    other => (format!("policies.{name}"), other.to_string()),
                })
            })
            .collect()
    }

    /// Why a filter or balance plugin cannot stand in a policy as a scorer (`None`: it is no
    /// such plugin).
    fn plugin_misplaced(&self, name: &str) -> Option<String> {
        use flxp_core::plugin::PluginKind;
        let p = self.plugin.iter().find(|p| p.name == name)?;
        match p.kind {
            PluginKind::Score => None,
            PluginKind::Filter => Some(format!(
                "plugin {name:?} is a filter plugin: filter plugins run in every placement, after \
                 flxp's own filters, and belong to no policy; remove it here (only score plugins \
                 are weighed in a policy)"
            )),
            PluginKind::Balance => Some(format!(
                "plugin {name:?} is a balance plugin: use it as a method (`--method {name}`, \
                 `[balance] method`), not in a policy (only score plugins are weighed in a policy)"
            )),
            // A kind added later is refused by name until someone decides where it belongs.
            other => Some(format!(
                "plugin {name:?} is a {} plugin: only score plugins are weighed in a policy",
                other.as_str()
            )),
        }
    }

    /// The node overrides of one zone for the core's model.
    pub fn overrides(&self, zone: &str) -> Overrides {
        let mut o = Overrides::default();
        for (node, ov) in self.overrides.get(zone).into_iter().flatten() {
            if let Some(notes) = &ov.notes {
                o.notes.insert(node.clone(), notes.clone());
            }
            if ov.maintenance {
                o.maintenance.insert(node.clone());
            }
        }
        o
    }

    /// A zone by name; the error lists the known zones.
    pub fn zone(&self, name: &str) -> Result<&ZoneConfig, UnknownZone> {
        self.zones.get(name).ok_or_else(|| UnknownZone {
            name: name.to_owned(),
            known: self.zones.keys().cloned().collect(),
        })
    }
}

impl RawConfig {
    /// The same config with its names checked against `methods` plus its balance plugins; the
    /// error is `(key, message)`, naming the unknown method and the known ones.
    pub fn resolve(self, methods: &Registry) -> Result<Config, (String, String)> {
        let specs: Vec<_> = self.plugin.iter().map(PluginSection::spec).collect();
        let methods = methods
            .with_specs(&specs)
            .map_err(|e| ("plugin".to_owned(), e.to_string()))?;
        let balance = |b: RawBalanceOptions| {
            b.resolve(&methods)
                .map_err(|e| ("balance.method".to_owned(), e.to_string()))
        };
        /// Moves every other section over; each is named once, and the pattern has no `..`, so
        /// a new section fails to compile until it is listed here.
        macro_rules! carry {
            ($($field:ident),* $(,)?) => {{
                let ConfigOf { balance: raw, $($field),* } = self;
                Ok(ConfigOf { balance: balance(raw)?, $($field),* })
            }};
        }
        carry!(
            zones,
            placement,
            policies,
            evacuate,
            consolidate,
            migration,
            rolling,
            daemon,
            api,
            overrides,
            compute_profiles,
            storage_profiles,
            images,
            networks,
            create_vm,
            lease,
            plugin,
            audit,
            webhook,
            origin,
        )
    }
}

/// Checks each `[[plugin]]`: a unique name of its own, exactly one of `command` and `url`,
/// sane limits. Errors name the plugin and the key.
fn check_plugins(plugins: &[PluginSection]) -> Result<(), (String, String)> {
    let mut seen = BTreeSet::new();
    for (i, p) in plugins.iter().enumerate() {
        let name = &p.name;
        // The key path points at this `[[plugin]]` table, not the first one.
        let err = |key: &str, m: String| {
            (
                format!("plugin[{i}].{key}"),
                format!("plugin {name:?}: {key} {m}"),
            )
        };
        let valid = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.');
        if !valid {
            return Err(err("name", "must be letters, digits, - _ . only".into()));
        }
        let builtin = flxp_core::placement::registry::SCORERS
            .iter()
            .any(|s| s.name == name)
            || flxp_core::placement::registry::FILTERS
                .iter()
                .any(|f| f.name() == name)
            || flxp_core::balance::Registry::builtin().get(name).is_some();
        if builtin {
            return Err(err(
                "name",
                "is a built-in filter, scorer or method: pick another".into(),
            ));
        }
        if !seen.insert(name.as_str()) {
            return Err(err("name", "is used by two plugins".into()));
        }
        match (&p.command, &p.url) {
            (Some(_), Some(_)) | (None, None) => {
                let key = if p.url.is_some() {
                    format!("plugin[{i}].url")
                } else {
                    format!("plugin[{i}]")
                };
                return Err((
                    key,
                    format!("plugin {name:?}: give exactly one of `command` or `url`"),
                ));
            }
            (Some(argv), None) if argv.first().is_none_or(|p| p.is_empty()) => {
                return Err(err(
                    "command",
                    "must name a program: [\"/path/to/plugin\", \"arg\"]".into(),
                ));
            }
            (None, Some(url)) if !(url.starts_with("http://") || url.starts_with("https://")) => {
                return Err(err(
                    "url",
                    format!("must start with http:// or https://, got {url:?}"),
                ));
            }
            _ => {}
        }
        if p.timeout_ms == 0 || p.timeout_ms > 600_000 {
            return Err(err(
                "timeout-ms",
                format!("must be 1..=600000, got {}", p.timeout_ms),
            ));
        }
        if p.max_answer_bytes == 0 {
            return Err(err("max-answer-bytes", "must be at least 1".into()));
        }
    }
    Ok(())
}

/// A profile's checks as `(broken, field, message)`, in order: the first broken one as the error
/// naming `section.id.field`.
fn first_broken(
    section: &str,
    id: &str,
    checks: &[(bool, &str, &str)],
) -> Result<(), (String, String)> {
    match checks.iter().find(|(broken, ..)| *broken) {
        Some((_, field, message)) => Err((format!("{section}.{id}.{field}"), (*message).into())),
        None => Ok(()),
    }
}

/// A zone the config file does not define.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("zone {name:?} is not defined{}", zones_defined(.known))]
pub struct UnknownZone {
    /// The zone asked for.
    pub name: String,
    /// The defined zones, by name.
    pub known: Vec<String>,
}

/// The end of [`UnknownZone`]'s message: which zones there are.
fn zones_defined(known: &[String]) -> String {
    if known.is_empty() {
        ": the config file has no [zones.<name>] table".to_owned()
    } else {
        format!("; zones: {}", known.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(text, Path::new("flxp.toml"))
    }

    const ZONE: &str = "[zones.eu]\nhosts = [\"pve1:8006\"]\ntoken = \"root@pam!flxp\"\ntoken-secret = \"s3cret\"\n";

    /// A config with a balance plugin `rec` and a filter plugin `lic`, balancing with `method`.
    fn with_plugins(method: &str) -> String {
        format!(
            "{ZONE}[balance]\nmethod = \"{method}\"\n\
             [[plugin]]\nname = \"rec\"\nkind = \"balance\"\ncommand = [\"/bin/rec\"]\n\
             [[plugin]]\nname = \"lic\"\nkind = \"filter\"\ncommand = [\"/bin/lic\"]\n"
        )
    }

    #[test]
    fn an_unknown_method_names_the_key_and_the_known_methods_balance_plugins_included() {
        let c = parse(&with_plugins("rec")).unwrap();
        assert_eq!(c.balance.method, "rec");
        for method in ["nope", "lic"] {
            let e = parse(&with_plugins(method)).unwrap_err();
            assert_eq!(e.key, "balance.method", "{e}");
            assert_eq!(
                e.message,
                format!(
                    "unknown balancing method {method:?} (known: flxp, pve-bruteforce, pve-topsis, rec)"
                ),
            );
            // The `method` line of `[balance]`, right after the zone's four lines.
            assert_eq!(e.place.map(|p| p.line), Some(6), "{e}");
        }
        // Without the plugin, its name is unknown like any other.
        let e = parse(&format!("{ZONE}[balance]\nmethod = \"rec\"\n")).unwrap_err();
        assert_eq!(
            e.message,
            r#"unknown balancing method "rec" (known: flxp, pve-bruteforce, pve-topsis)"#
        );
    }

    #[test]
    fn configs_parsed_on_two_threads_at_once_each_resolve_against_their_own_plugins() {
        // Method names were once checked through a per-thread list of plugin names, set while a
        // config was read: the registry is now a value each parse builds for itself.
        let with = with_plugins("rec");
        let without = format!("{ZONE}[balance]\nmethod = \"rec\"\n");
        let start = std::sync::Barrier::new(2);
        std::thread::scope(|s| {
            let a = s.spawn(|| {
                start.wait();
                (0..50)
                    .map(|_| parse(&with).map(|c| c.balance.method.to_string()))
                    .collect::<Vec<_>>()
            });
            let b = s.spawn(|| {
                start.wait();
                (0..50)
                    .map(|_| parse(&without).map_err(|e| e.message))
                    .collect::<Vec<_>>()
            });
            for got in a.join().unwrap() {
                assert_eq!(got.unwrap(), "rec");
            }
            for got in b.join().unwrap() {
                assert_eq!(
                    got.unwrap_err(),
                    r#"unknown balancing method "rec" (known: flxp, pve-bruteforce, pve-topsis)"#
                );
            }
        });
        // And on this thread, between and after them, the same answers.
        assert_eq!(parse(&with).unwrap().balance.method, "rec");
        assert!(parse(&without).is_err());
    }

    #[test]
    fn the_lease_is_on_by_default_and_off_only_when_said() {
        let c = parse(ZONE).unwrap();
        assert!(c.lease.enabled);
        let l = c.lease_settings("evacuate").unwrap();
        assert_eq!(l.options.ttl, std::time::Duration::from_secs(30));
        assert_eq!(l.options.margin, std::time::Duration::from_secs(5));
        assert_eq!(l.options.command.as_deref(), Some("evacuate"));
        let pid = format!(":{}:", std::process::id());
        assert!(l.options.holder.contains(&pid), "{}", l.options.holder);
        // An empty table keeps the default; an existing opt-out keeps working.
        assert!(parse(&format!("{ZONE}[lease]\n")).unwrap().lease.enabled);
        let off = parse(&format!("{ZONE}[lease]\nenabled = false\n")).unwrap();
        assert!(off.lease_settings("evacuate").is_none());
    }

    #[test]
    fn the_lease_is_held_while_acting_unless_always_is_said() {
        let hold = |text: &str| parse(&format!("{ZONE}{text}")).map(|c| c.lease_settings("serve"));
        let acting = hold("").unwrap().unwrap();
        assert_eq!(acting.options.hold, flxp_engine::LeaseHold::Acting);
        let always = hold("[lease]\nhold = \"always\"\n").unwrap().unwrap();
        assert_eq!(always.options.hold, flxp_engine::LeaseHold::Always);
        let e = hold("[lease]\nhold = \"sometimes\"\n").unwrap_err();
        assert_eq!(e.key, "lease.hold", "{e}");
    }

    #[test]
    fn the_poll_interval_may_be_a_fraction_of_a_second_within_its_bounds() {
        let c = parse(&format!("{ZONE}[migration]\npoll-secs = 0.25\n")).unwrap();
        assert_eq!(c.migration.poll_secs, 0.25);
        assert_eq!(
            parse(&format!("{ZONE}[migration]\npoll-secs = 3\n"))
                .unwrap()
                .migration
                .poll_secs,
            3.0
        );
        for bad in ["0", "0.001", "-1", "7200", "nan"] {
            let e = parse(&format!("{ZONE}[migration]\npoll-secs = {bad}\n")).unwrap_err();
            assert!(e.to_string().contains("poll-secs"), "{bad}: {e}");
        }
    }

    #[test]
    fn durations_past_their_bound_are_refused_naming_the_key() {
        // Once a lease of i64::MAX seconds passed the check, then the daemon panicked on
        // the clock and left a lease that never ends in the node's notes.
        let e = parse(&format!(
            "{ZONE}[lease]\nenabled = true\nttl-secs = 9223372036854775807\n"
        ))
        .unwrap_err();
        assert_eq!(e.key, "lease.ttl-secs");
        assert!(e.message.contains("more than 3600"), "{e}");
        assert!(parse(&format!("{ZONE}[lease]\nttl-secs = 3600\n")).is_ok());
        let e = parse(&format!(
            "{ZONE}[consolidate]\nmin-interval-secs = 100000000000\n"
        ))
        .unwrap_err();
        assert_eq!(e.key, "consolidate.min-interval-secs", "{e}");
        let e = parse(&format!("{ZONE}[create-vm]\npoll-ms = 100000000000000\n")).unwrap_err();
        assert_eq!(e.key, "create-vm.poll-ms", "{e}");
    }

    #[test]
    fn a_full_config_reads_into_core_options() {
        let text = format!(
            "{ZONE}
[placement]
policy = \"mine\"
reserve = \"2GiB\"
node-reserve = {{ pve1 = 1073741824 }}
max-memory-commit = 1.5

[policies.mine]
free-memory = 1
spread = 0.5

[balance]
max-migrations = 7
return-hold-secs = 3600
[balance.trigger]
threshold = 15

[overrides.eu.pve3]
notes = \"flxp.label.ssd\"
maintenance = true

[compute-profiles.medium]
cores = 2
memory = \"4GiB\"

[storage-profiles.standard]
storage = \"ceph\"
disk = \"32G\"

[images.ubuntu-2404]
template = 9000
[images.ubuntu-2404.zones.eu.nodes]
pve1 = 9001

[networks.\"100\"]
bridge = \"vmbr0\"
vlan = 100
"
        );
        let c = parse(&text).unwrap();
        let p = c.placement_options();
        assert_eq!(p.policy, "mine");
        assert_eq!(p.reserve_bytes, 2 << 30);
        assert_eq!(p.node_reserve_bytes["pve1"], 1 << 30);
        assert_eq!(c.balance.max_migrations, 7);
        assert_eq!(c.balance.return_hold_secs, 3600);
        assert_eq!(c.balance.trigger.threshold, Some(15.0));
        assert_eq!(c.policies().unwrap()[0].weights["spread"], 0.5);
        let o = c.overrides("eu");
        assert!(o.maintenance.contains("pve3"));
        assert_eq!(c.compute_profiles["medium"].memory, Size(4 << 30));
        assert_eq!(c.storage_profiles["standard"].disk, Size(32 << 30));
        assert_eq!(c.images["ubuntu-2404"].zones["eu"].nodes["pve1"], 9001);
        assert_eq!(c.networks["100"].vlan, Some(100));
    }

    #[test]
    fn every_mistake_names_its_line_and_key() {
        let cases = [
            ("[api]\nlisten = \"x\"\n", 2, "api.listen", "not an address"),
            // A value of the wrong kind names its key (it named only the line).
            (
                "[placement]\nreserve = \"lots\"\n",
                2,
                "placement.reserve",
                "invalid size",
            ),
            // An unknown key is named with its table (it was named without).
            (
                "[placement]\nresreve = \"1G\"\n",
                2,
                "placement.resreve",
                "unknown field `resreve`",
            ),
            (
                "[consolidate]\nbogus-key = 1\n",
                2,
                "consolidate.bogus-key",
                "unknown field `bogus-key`",
            ),
            // A number the TOML parser itself refuses still names its key.
            (
                "[consolidate]\nwake-timeout-secs = 99999999999999999999\n",
                2,
                "consolidate.wake-timeout-secs",
                "number too large",
            ),
            // An array of tables where a table is expected says so.
            (
                "[[consolidate]]\nmax-memory = 0.5\n",
                1,
                "consolidate",
                "expected a table `[consolidate]`, found an array of tables `[[consolidate]]`",
            ),
            (
                "[zones.eu]\ntoken = \"root@pam!x\"\ntoken-secret = \"s\"\n",
                1,
                "zones.eu.hosts",
                "at least one API host",
            ),
            (
                &format!("{ZONE}[placement]\npolicy = \"fastest\"\n"),
                6,
                "placement.policy",
                "unknown policy",
            ),
            (
                &format!("{ZONE}[evacuate]\npolicy = \"fastest\"\n"),
                6,
                "evacuate.policy",
                "unknown policy",
            ),
            (
                &format!("{ZONE}[consolidate]\nmax-memory = 1.5\n"),
                6,
                "consolidate.max-memory",
                "at most 1",
            ),
            (
                &format!("{ZONE}[policies.x]\nfree-mem = 1\n"),
                6,
                "policies.x.free-mem",
                "unknown scorer",
            ),
            (
                &format!("{ZONE}[images.u]\n[images.u.zones.us]\ntemplate = 9000\n"),
                6,
                "images.u.zones.us",
                "not defined",
            ),
            (
                &format!("{ZONE}[compute-profiles.big]\ncores = 0\nmemory = \"4G\"\n"),
                6,
                "compute-profiles.big.cores",
                "at least 1",
            ),
            (
                &format!("{ZONE}[networks.a]\nbridge = \"vmbr0\"\nvlan = 5000\n"),
                7,
                "networks.a.vlan",
                "1 to 4094",
            ),
            (
                &format!("{ZONE}[balance.trigger]\nthreshold = 5\ntarget = 50\n"),
                7,
                "balance.trigger.target",
                "at most the threshold 5",
            ),
            (
                &format!("{ZONE}[networks.a]\nbridge = \"vm br0\"\n"),
                6,
                "networks.a.bridge",
                "is not a bridge name",
            ),
        ];
        for (text, line, key, what) in cases {
            let e = parse(text).unwrap_err();
            assert_eq!(e.place.map(|p| p.line), Some(line), "{text}: {e}");
            assert_eq!(e.key, key, "{text}: {e}");
            assert!(e.message.contains(what), "{text}: {e}");
            assert!(
                e.to_string()
                    .starts_with(&format!("config file flxp.toml:{line}:")),
                "{e}"
            );
        }
    }

    #[test]
    fn a_malformed_lease_node_is_an_error_at_its_key() {
        for node in ["", "bad name!", "-pve1", "pve_1"] {
            let text = format!("{ZONE}lease-node = {node:?}\n");
            let e = parse(&text).unwrap_err();
            assert_eq!(e.key, "zones.eu.lease-node", "{text}: {e}");
            assert_eq!(e.place.map(|p| p.line), Some(5), "{text}: {e}");
            assert!(e.message.contains("is not a node name"), "{text}: {e}");
        }
        let ok = parse(&format!("{ZONE}lease-node = \"pve-2\"\n")).unwrap();
        assert_eq!(ok.zones["eu"].lease_node.as_deref(), Some("pve-2"));
    }

    #[test]
    fn an_unreadable_secret_is_an_error_at_its_zone() {
        let text = "[placement]\npolicy = \"spread\"\n\n[zones.eu]\nhosts = [\"a\"]\ntoken = \"root@pam!flxp\"\ntoken-secret-file = \"/nonexistent/flxp.secret\"\n";
        let c = parse(text).unwrap();
        let e = c.client("eu").unwrap_err().to_string();
        assert!(e.starts_with("config file flxp.toml:4:"), "{e}");
        assert!(e.contains("zones.eu"), "{e}");
        assert!(e.contains("/nonexistent/flxp.secret"), "{e}");
    }

    #[test]
    fn webhooks_are_checked_naming_the_webhook_never_its_url() {
        let ok = parse(
            "[[webhook]]\nurl = \"https://chat.example.com/hooks/s3cr3t\"\nevents = [\"migration.failed\", \"lease.lost\"]\nheaders = { Authorization = \"Bearer x\" }\n",
        )
        .unwrap();
        assert_eq!(ok.webhook[0].shown_url(), "https://chat.example.com");
        assert_eq!(ok.webhook[0].retries, 3);
        let debug = format!("{:?}", ok.webhook[0]);
        assert!(
            !debug.contains("s3cr3t") && !debug.contains("Bearer"),
            "{debug}"
        );
        let cases = [
            (
                "[[webhook]]\nurl = \"ftp://chat.example.com/x\"\n",
                "config file flxp.toml:2:1: webhook[0].url: the scheme is \"ftp\"; use http or https",
            ),
            (
                "[[webhook]]\nurl = \"chat.example.com/hooks/s3cr3t\"\n",
                "config file flxp.toml:2:1: webhook[0].url: not a URL: relative URL without a base",
            ),
            (
                "[[webhook]]\nurl = \"https://a.example\"\n[[webhook]]\nurl = \"https://b.example\"\nevents = [\"migration.fail\"]\n",
                "config file flxp.toml:5:1: webhook[1].events: unknown event \"migration.fail\"; events: migration.failed, evacuation.incomplete, plan.unmet, node.woken, node.shutdown, maintenance.step, lease.taken, lease.lost",
            ),
            (
                "[[webhook]]\nurl = \"https://a.example\"\nheaders = { \"Bad Name\" = \"s3cr3t\" }\n",
                "config file flxp.toml:3:1: webhook[0].headers: \"Bad Name\" is not a header name",
            ),
            (
                "[[webhook]]\nurl = \"https://a.example\"\nqueue = 0\n",
                "config file flxp.toml:3:1: webhook[0].queue: must be between 1 and 100000",
            ),
        ];
        for (text, want) in cases {
            let got = parse(text).unwrap_err().to_string();
            assert_eq!(got, want);
            assert!(!got.contains("s3cr3t"));
        }
    }

    #[test]
    fn the_audit_log_is_on_by_default_and_its_size_is_bounded() {
        let c = parse("").unwrap();
        assert!(c.audit.enabled);
        assert_eq!((c.audit.max_size.0, c.audit.keep), (10 << 20, 5));
        let c = parse("[audit]\npath = \"/srv/flxp/audit.jsonl\"\nmax-size = \"1MiB\"\nkeep = 2\n")
            .unwrap();
        assert_eq!(
            c.audit.path.as_deref(),
            Some(Path::new("/srv/flxp/audit.jsonl"))
        );
        assert_eq!((c.audit.max_size.0, c.audit.keep), (1 << 20, 2));
        assert_eq!(
            parse("[audit]\nmax-size = 100\n").unwrap_err().to_string(),
            "config file flxp.toml:2:1: audit.max-size: must be at least 4KiB: every rotation would keep a few lines only"
        );
    }

    #[test]
    fn api_tokens_have_a_role_and_a_bare_token_is_an_operator() {
        let c = parse(
            "[api]\ntokens = [{ value = \"a\" }, { env = \"V\", role = \"viewer\" }, { file = \"/f\", role = \"operator\" }]\n",
        )
        .unwrap();
        let roles: Vec<Role> = c.api.tokens.iter().map(|t| t.role).collect();
        assert_eq!(roles, [Role::Operator, Role::Viewer, Role::Operator]);
        let e = parse("[api]\ntokens = [{ value = \"a\", role = \"admin\" }]\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("viewer") && e.contains("operator"), "{e}");
    }

    #[test]
    fn secrets_never_appear_in_errors_or_debug() {
        let text = "[zones.eu]\nhosts = []\ntoken = \"root@pam!flxp\"\ntoken-secret = \"hunter2\"\n[api]\ntokens = [{ value = \"t0ps3cret\" }]\n";
        let e = parse(text).unwrap_err().to_string();
        assert!(!e.contains("hunter2"), "{e}");
        // Unquoted numeric secrets: serde's own message would quote the number.
        for text in [
            "[zones.eu]\nhosts = [\"a\"]\nuser = \"root@pam\"\npassword = 98765432\n",
            "[zones.eu]\nhosts = [\"a\"]\ntoken = \"root@pam!flxp\"\ntoken-secret = 98765432\n",
            "[api]\ntokens = [{ value = 98765432 }]\n",
        ] {
            let e = parse(text).unwrap_err().to_string();
            assert!(!e.contains("98765432"), "{e}");
            assert!(e.contains("expected a string, got an integer"), "{e}");
        }
        let c = parse(&text.replace("hosts = []", "hosts = [\"a\"]")).unwrap();
        let dbg = format!("{c:?}");
        assert!(
            !dbg.contains("hunter2") && !dbg.contains("t0ps3cret"),
            "{dbg}"
        );
    }
}

#[cfg(test)]
mod create_vm_section_tests {
    // Tests may panic on unexpected errors: that is the failure report.
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn the_create_vm_section_reads_with_defaults_and_checks_its_values() {
        let c = Config::parse("", Path::new("flxp.toml")).unwrap();
        assert_eq!(c.create_vm.poll_ms, 1000);
        assert_eq!(c.create_vm.timeout_secs, 900);
        assert!(!c.create_vm.full_clone);
        assert_eq!(c.create_vm.reservation_ttl_secs, 300);
        let c = Config::parse(
            "[create-vm]\npoll-ms = 50\nfull-clone = true\n[api]\nready-secs = 30\n",
            Path::new("flxp.toml"),
        )
        .unwrap();
        assert_eq!(c.create_vm.poll_ms, 50);
        assert!(c.create_vm.full_clone);
        assert_eq!(c.api.ready_secs, Some(30));
        let e = Config::parse("[create-vm]\npoll-ms = 0\n", Path::new("flxp.toml")).unwrap_err();
        assert_eq!(
            (e.key.as_str(), e.place.map(|p| p.line)),
            ("create-vm", Some(1))
        );
        let e = Config::parse("\n[create-vm]\npol-ms = 5\n", Path::new("flxp.toml")).unwrap_err();
        assert_eq!(e.place.map(|p| p.line), Some(3), "{e}");
        assert!(e.message.contains("unknown field `pol-ms`"), "{e}");
        assert_eq!(c.create_vm.stale_after_secs, 3600);
        assert_eq!(c.create_vm.stale_action, flxp_engine::StaleAction::Remove);
        let c = Config::parse(
            "[create-vm]\nstale-after-secs = 7200\nstale-action = \"warn\"\n",
            Path::new("flxp.toml"),
        )
        .unwrap();
        assert_eq!(
            c.create_vm.stale(),
            flxp_engine::StaleOptions {
                after: std::time::Duration::from_secs(7200),
                action: flxp_engine::StaleAction::Warn,
            }
        );
        let e = Config::parse(
            "[create-vm]\nstale-after-secs = 60\n",
            Path::new("flxp.toml"),
        )
        .unwrap_err();
        assert_eq!(e.key, "create-vm.stale-after-secs", "{e}");
        let e = Config::parse(
            "[create-vm]\nstale-action = \"delete\"\n",
            Path::new("flxp.toml"),
        )
        .unwrap_err();
        assert!(e.message.contains("unknown variant `delete`"), "{e}");
        let e = Config::parse("[api]\nready-secs = 0\n", Path::new("flxp.toml")).unwrap_err();
        assert_eq!(
            (e.key.as_str(), e.place.map(|p| p.line)),
            ("api.ready-secs", Some(2))
        );
    }

    #[test]
    fn a_live_mistake_is_placed_at_its_key() {
        let text = "[zones.eu]\nhosts = [\"a\"]\n\n[images.u]\ntemplate = 9000\n";
        let e = ConfigError::at_key(text, Path::new("f.toml"), "images.u.template", "gone");
        assert_eq!(
            e.to_string(),
            "config file f.toml:5:1: images.u.template: gone"
        );
    }
}

#[cfg(test)]
mod guide_tests {
    use super::*;

    /// Every TOML example of GUIDE.md, taken together, is a valid config: the guide cannot drift from
    /// the keys flxp reads.
    #[test]
    fn the_guides_examples_parse() {
        let guide =
            std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../GUIDE.md"))
                .unwrap();
        let mut text = String::new();
        let mut inside = false;
        for line in guide.lines() {
            match (inside, line.trim_start().starts_with("```")) {
                (false, true) if line.trim() == "```toml" => inside = true,
                (true, true) => inside = false,
                (true, false) => {
                    text.push_str(line);
                    text.push('\n');
                }
                _ => {}
            }
        }
        assert!(
            text.contains("[zones.eu-central]") && text.contains("[balance]"),
            "{text}"
        );
        let fp = (0..32).map(|_| "AB").collect::<Vec<_>>().join(":");
        let text = text.replace("AA:BB:…", &fp);
        if let Err(e) = Config::parse(&text, Path::new("GUIDE.md")) {
            panic!("{e}\n{text}");
        }
    }
}

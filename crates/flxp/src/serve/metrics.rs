//! The service's metrics, served at `/metrics` in the Prometheus text format (OpenMetrics, via
//! `prometheus-client`): decisions and `createVM` calls by outcome, migrations, the imbalance per
//! zone, reservations held, running guests on nodes in maintenance, and Proxmox API latency and
//! errors by endpoint.
//!
//! Labels hold zone, node, outcome and endpoint templates (`GET /nodes/{node}/status`), never a
//! VMID, a guest's name or anything a user typed, so the number of series stays bounded.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

/// Labels of a per-zone outcome counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Outcome {
    /// Zone name.
    pub zone: String,
    /// `placed`, `success`, `no_capacity`, `bad_input`, `proxmox_error`, `internal`, ...
    pub outcome: String,
}

/// Labels of a placement decision.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Decision {
    /// Zone name.
    pub zone: String,
    /// What asked: `create_vm` or `placement`.
    pub source: String,
    /// `placed`, `no_capacity` or `error`.
    pub outcome: String,
}

/// Labels of a per-zone value.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ZoneLabel {
    /// Zone name.
    pub zone: String,
}

/// Labels of a per-node value.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NodeLabel {
    /// Zone name.
    pub zone: String,
    /// Node name.
    pub node: String,
}

/// Labels of a Proxmox API call.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Endpoint {
    /// Zone name.
    pub zone: String,
    /// `METHOD /path/{template}`.
    pub endpoint: String,
}

/// Labels of a failed Proxmox API call.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EndpointError {
    /// Zone name.
    pub zone: String,
    /// `METHOD /path/{template}`.
    pub endpoint: String,
    /// What kind of failure (`locked`, `auth_failed`, `connect`, `timeout`, ...).
    pub kind: String,
}

fn latency_histogram() -> Histogram {
    // 1 ms .. ~33 s: local API calls up to slow proxied ones and long task waits.
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

fn create_histogram() -> Histogram {
    // 0.1 s .. ~27 min: a linked clone on an idle cluster up to a large full clone.
    Histogram::new(exponential_buckets(0.1, 2.0, 15))
}

/// Every metric family, registered once.
pub struct Metrics {
    registry: Registry,
    /// Placement decisions by zone, source and outcome.
    pub decisions: Family<Decision, Counter>,
    /// `createVM` calls by zone and outcome.
    pub create_vm: Family<Outcome, Counter>,
    /// Seconds a successful `createVM` took, by zone.
    pub create_vm_seconds: Family<ZoneLabel, Histogram, fn() -> Histogram>,
    /// Migrations carried out by `rebalance`/`evacuate`/the daemon, by zone and outcome.
    pub migrations: Family<Outcome, Counter>,
    /// The zone's imbalance as the balance trigger measures it, last time it was computed.
    pub imbalance: Family<ZoneLabel, Gauge<f64, AtomicU64>>,
    /// Reservations of VM creations in flight (or not yet visible), by zone.
    pub reservations: Family<ZoneLabel, Gauge>,
    /// Proxmox API call latency in seconds, by zone and endpoint.
    pub api_seconds: Family<Endpoint, Histogram, fn() -> Histogram>,
    /// Failed Proxmox API calls by zone, endpoint and kind.
    pub api_errors: Family<EndpointError, Counter>,
    /// Running guests on each node in maintenance, by zone and node, as the last daemon round
    /// saw them: above 0, the node is not safe to reboot.
    pub maintenance_running: Family<NodeLabel, Gauge>,
    /// The step each node of a rolling maintenance reached (1 evacuating … 5 done, 6 hook,
    /// 7 waiting).
    pub rolling: Family<NodeLabel, Gauge>,
    /// The nodes of each zone with a `maintenance_running` series, so that a node leaving
    /// maintenance loses its series instead of keeping a stale value.
    maintenance_nodes: std::sync::Mutex<std::collections::BTreeMap<String, Vec<String>>>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Registers every family.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("flxp");
        let decisions = Family::<Decision, Counter>::default();
        registry.register(
            "placement_decisions",
            "Placement decisions by zone, source and outcome",
            decisions.clone(),
        );
        let create_vm = Family::<Outcome, Counter>::default();
        registry.register(
            "create_vm",
            "createVM calls by zone and outcome",
            create_vm.clone(),
        );
        let create_vm_seconds: Family<ZoneLabel, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(create_histogram);
        registry.register(
            "create_vm_duration_seconds",
            "Duration of successful createVM calls",
            create_vm_seconds.clone(),
        );
        let migrations = Family::<Outcome, Counter>::default();
        registry.register(
            "migrations",
            "Migrations carried out, by zone and outcome",
            migrations.clone(),
        );
        let imbalance = Family::<ZoneLabel, Gauge<f64, AtomicU64>>::default();
        registry.register(
            "imbalance",
            "Imbalance of the zone as the balance trigger measures it",
            imbalance.clone(),
        );
        let reservations = Family::<ZoneLabel, Gauge>::default();
        registry.register(
            "reservations",
            "Resources reserved for VM creations not yet visible in Proxmox",
            reservations.clone(),
        );
        let api_seconds: Family<Endpoint, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(latency_histogram);
        registry.register(
            "proxmox_request_duration_seconds",
            "Proxmox API call latency by zone and endpoint",
            api_seconds.clone(),
        );
        let api_errors = Family::<EndpointError, Counter>::default();
        registry.register(
            "proxmox_errors",
            "Failed Proxmox API calls by zone, endpoint and kind",
            api_errors.clone(),
        );
        let maintenance_running = Family::<NodeLabel, Gauge>::default();
        registry.register(
            "maintenance_guests_running",
            "Running guests on a node in maintenance (above 0: not safe to reboot), by zone and node",
            maintenance_running.clone(),
        );
        let rolling = Family::<NodeLabel, Gauge>::default();
        registry.register(
            "rolling_step",
            "Step of each node a rolling maintenance reached: 1 evacuating, 2 hooked, 3 rebooting, \
             4 returning, 5 done, 6 hook running, 7 waiting for the reboot, by zone and node",
            rolling.clone(),
        );
        Self {
            registry,
            rolling,
            maintenance_running,
            maintenance_nodes: std::sync::Mutex::default(),
            decisions,
            create_vm,
            create_vm_seconds,
            migrations,
            imbalance,
            reservations,
            api_seconds,
            api_errors,
        }
    }

    /// Counts one placement decision.
    pub fn decision(&self, zone: &str, source: &str, outcome: &str) {
        self.decisions
            .get_or_create(&Decision {
                zone: zone.to_owned(),
                source: source.to_owned(),
                outcome: outcome.to_owned(),
            })
            .inc();
    }

    /// Counts one `createVM` call.
    pub fn create_vm(&self, zone: &str, outcome: &str) {
        self.create_vm
            .get_or_create(&Outcome {
                zone: zone.to_owned(),
                outcome: outcome.to_owned(),
            })
            .inc();
    }

    /// Counts carried-out migrations.
    pub fn migrations(&self, zone: &str, outcome: &str, n: u64) {
        self.migrations
            .get_or_create(&Outcome {
                zone: zone.to_owned(),
                outcome: outcome.to_owned(),
            })
            .inc_by(n);
    }

    /// Records the zone's imbalance.
    pub fn set_imbalance(&self, zone: &str, value: f64) {
        self.imbalance
            .get_or_create(&ZoneLabel {
                zone: zone.to_owned(),
            })
            .set(value);
    }

    /// Records how many reservations the zone holds.
    pub fn set_reservations(&self, zone: &str, n: usize) {
        self.reservations
            .get_or_create(&ZoneLabel {
                zone: zone.to_owned(),
            })
            .set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// Records the step a rolling maintenance reached on a node.
    pub fn rolling_step(&self, zone: &str, node: &str, step: flxp_engine::rolling::Step) {
        use flxp_engine::rolling::Step;
        let n = match step {
            Step::Evacuating => 1,
            Step::Hooked => 2,
            Step::Rebooting => 3,
            Step::Returning => 4,
            Step::Done => 5,
            Step::Hook => 6,
            Step::Waiting => 7,
        };
        self.rolling
            .get_or_create(&NodeLabel {
                zone: zone.to_owned(),
                node: node.to_owned(),
            })
            .set(n);
    }

    /// Records the running guests of each node in maintenance in a zone (`nodes`: name and
    /// count); nodes no longer listed lose their series.
    pub fn set_maintenance(&self, zone: &str, nodes: &[(String, usize)]) {
        let mut known = self
            .maintenance_nodes
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let now: Vec<String> = nodes.iter().map(|(n, _)| n.clone()).collect();
        for gone in known
            .get(zone)
            .into_iter()
            .flatten()
            .filter(|n| !now.contains(n))
        {
            self.maintenance_running.remove(&NodeLabel {
                zone: zone.to_owned(),
                node: gone.clone(),
            });
        }
        for (node, running) in nodes {
            self.maintenance_running
                .get_or_create(&NodeLabel {
                    zone: zone.to_owned(),
                    node: node.clone(),
                })
                .set(i64::try_from(*running).unwrap_or(i64::MAX));
        }
        known.insert(zone.to_owned(), now);
    }

    /// The whole registry in the text exposition format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail; an error here would be a bug in an encoder.
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            tracing::error!(error = %e, "cannot encode the metrics");
        }
        out
    }
}

/// Counts each migration of a run the API started as it ends, so the count is current during a
/// long evacuation and kept when the client that asked hangs up.
pub struct MigrationMeter(pub std::sync::Arc<Metrics>);

impl flxp_engine::Progress for MigrationMeter {
    fn event(&self, event: &flxp_engine::Event) {
        match event {
            flxp_engine::Event::Done { zone, .. } => self.0.migrations(zone, "done", 1),
            flxp_engine::Event::Failed { zone, .. } => self.0.migrations(zone, "failed", 1),
            _ => {}
        }
    }

    fn wants_fractions(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_and_gauges_render_with_their_labels() {
        let m = Metrics::new();
        m.create_vm("eu", "success");
        m.create_vm("eu", "success");
        m.decision("eu", "placement", "placed");
        m.set_imbalance("eu", 12.5);
        let text = m.render();
        assert!(
            text.contains("flxp_create_vm_total{zone=\"eu\",outcome=\"success\"} 2"),
            "{text}"
        );
        assert!(
            text.contains(
                "flxp_placement_decisions_total{zone=\"eu\",source=\"placement\",outcome=\"placed\"} 1"
            ),
            "{text}"
        );
        assert!(text.contains("flxp_imbalance{zone=\"eu\"} 12.5"), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[test]
    fn a_node_leaving_maintenance_loses_its_series() {
        let m = Metrics::new();
        m.set_maintenance("eu", &[("pve4".into(), 1), ("pve5".into(), 0)]);
        let text = m.render();
        assert!(
            text.contains("flxp_maintenance_guests_running{zone=\"eu\",node=\"pve4\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("flxp_maintenance_guests_running{zone=\"eu\",node=\"pve5\"} 0"),
            "{text}"
        );
        m.set_maintenance("eu", &[("pve5".into(), 0)]);
        let text = m.render();
        assert!(!text.contains("node=\"pve4\""), "{text}");
    }
}

//! A simulated zone for end-to-end tests: the simulator in-process on `127.0.0.1:0` (plain HTTP),
//! the real client pointed at it, and checks of the simulated world while plans run.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use flxp_core::balance::Registry;
use flxp_core::balance::{self, Measure, Metric};
use flxp_core::constraints::{Violation, violations};
use flxp_core::placement::{PlacementOptions, Placer};
use flxp_core::{Overrides, Scheduler, Snapshot};
use flxp_engine::{
    Daemon, DaemonOptions, Event, ExecuteOptions, Executor, Limits, Model, Progress,
};
use flxp_pve::Pve;
use flxp_sim::{Scenario, Sim, SimHandle};
use serde_json::Value;

use crate::sim_client::serve_http;

pub const TOKEN: &str = "root@pam!flxp=7c1e0b5a-4d2f-4e8a-9b6c-1a2b3c4d5e6f";
pub use flxp_core::units::GIB;

/// The built-in scenarios.
pub const DEMO: &str = include_str!("../../../flxp-sim/scenarios/demo.json");
pub const UNBALANCED: &str = include_str!("../../../flxp-sim/scenarios/unbalanced.json");

/// A running simulated zone.
pub struct Zone {
    pub handle: SimHandle,
    pub sim: Sim,
    pub api: Pve,
}

/// Starts a scenario document at a time scale (simulated seconds per real second).
pub async fn zone(doc: &str, time_scale: f64, tweak: impl FnOnce(&mut Value)) -> Zone {
    let scenario = Scenario::variant(doc, time_scale, TOKEN, tweak).unwrap();
    let (handle, client) = serve_http(scenario, TOKEN).await;
    Zone {
        sim: handle.sim().clone(),
        handle,
        api: client.into(),
    }
}

impl Zone {
    /// An executor on this zone, polling fast, with the simulated clock.
    pub fn executor(&self, limits: Limits) -> Executor {
        let sim = self.sim.clone();
        Executor::new("sim", self.api.clone(), &scheduler())
            .with_options(ExecuteOptions {
                limits,
                poll: Duration::from_millis(10),
                timeout: Duration::from_secs(60),
                drain_timeout: Duration::from_secs(30),
                ..ExecuteOptions::default()
            })
            .with_clock(Arc::new(move || sim.now() as i64))
    }

    /// The simulated world now, as a snapshot.
    pub fn snapshot(&self) -> Snapshot {
        self.sim.world().snapshot()
    }

    /// The model of the world now.
    pub fn model(&self) -> Model {
        Model::from_snapshot(&self.snapshot(), &Overrides::default()).unwrap()
    }

    /// The node a guest is on now.
    pub fn node_of(&self, vmid: u32) -> String {
        self.sim.world().guests[&vmid].node.clone()
    }

    /// The guests on a node now, in the world's order.
    pub fn guests_on(&self, node: &str) -> Vec<u32> {
        self.sim
            .world()
            .guests
            .values()
            .filter(|g| g.node == node)
            .map(|g| g.vmid)
            .collect()
    }

    /// A daemon managing this zone as `lab`, with the simulated clock.
    pub fn daemon(&self, overrides: Overrides, options: DaemonOptions) -> Daemon {
        let sim = self.sim.clone();
        Daemon::new(
            vec![flxp_engine::Zone {
                name: "lab".into(),
                api: self.api.clone(),
                overrides,
                reservations: None,
            }],
            &scheduler(),
            options,
        )
        .with_clock(Arc::new(move || sim.now() as i64))
    }

    /// A node's notes now.
    pub fn notes(&self, node: &str) -> String {
        self.sim.world().nodes[node].notes.clone()
    }

    /// Migration tasks the world ran, per guest (`qmigrate`/`vzmigrate`, started by anyone).
    pub fn migrations_of(&self, vmid: u32) -> usize {
        self.sim
            .world()
            .tasks
            .all()
            .iter()
            .filter(|t| matches!(t.kind.as_str(), "qmigrate" | "vzmigrate"))
            .filter(|t| t.id == vmid.to_string())
            .count()
    }

    /// A request to the simulator's control endpoint (`/_sim/...`), as a test harness would send
    /// it over the wire: plain HTTP/1.1 with the token; the answer's status line and body.
    pub async fn control(&self, method: &str, path: &str, body: &str) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(self.handle.addr())
            .await
            .unwrap();
        let request = format!(
            "{method} {path} HTTP/1.1\r\nHost: sim\r\nAuthorization: PVEAPIToken={TOKEN}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.unwrap();
        answer
    }

    pub async fn shutdown(self) {
        self.handle.shutdown().await.unwrap();
    }
}

/// How a daemon's rounds carry out plans here: polling fast, a minute per migration at most.
pub fn daemon_execute() -> ExecuteOptions {
    ExecuteOptions {
        poll: Duration::from_millis(10),
        timeout: Duration::from_secs(60),
        ..ExecuteOptions::default()
    }
}

/// The scheduler with default options and the built-in policies and methods.
pub fn scheduler() -> Scheduler {
    Scheduler::new(
        Placer::new(PlacementOptions::default(), Vec::new()).unwrap(),
        Registry::builtin(),
    )
    .unwrap()
}

/// The memory a node of the simulated world carries: its base and its guests' (uncapped).
pub fn carried(w: &flxp_sim::world::World, node: &str) -> u64 {
    w.nodes[node].base_mem
        + w.guests
            .values()
            .filter(|g| g.node == node)
            .map(|g| g.host_mem())
            .sum::<u64>()
}

/// The memory spread of a model.
pub fn spread(model: &Model) -> f64 {
    balance::imbalance(
        &model.cluster,
        &model.state,
        Measure::Spread,
        Metric::Memory,
    )
}

/// The spread of a model in the load kind a plan weighed (`plan.metric`).
pub fn spread_in(model: &Model, kind: balance::LoadKind) -> f64 {
    balance::imbalance_in(&model.cluster, &model.state, Measure::Spread, kind)
}

/// Watches the simulated world at every event: no node over its memory, no hard rule broken that
/// was not broken at the start. Also keeps the events.
pub struct Watch {
    sim: Sim,
    start: Vec<Violation>,
    pub events: Mutex<Vec<Event>>,
    pub problems: Mutex<Vec<String>>,
}

impl Watch {
    pub fn new(zone: &Zone) -> Arc<Self> {
        let m = zone.model();
        Arc::new(Self {
            sim: zone.sim.clone(),
            start: violations(&m.cluster, &m.rules, &m.state),
            events: Mutex::new(Vec::new()),
            problems: Mutex::new(Vec::new()),
        })
    }

    fn check(&self, when: &str) {
        let w = self.sim.world();
        let mut problems = Vec::new();
        // What the nodes really carry (the simulator's own stats are capped at the node's size).
        for (name, n) in &w.nodes {
            let guests: u64 = w
                .guests
                .values()
                .filter(|g| g.node == *name)
                .map(|g| g.host_mem())
                .sum();
            let reserved: u64 = w
                .reservations
                .values()
                .filter(|(t, _)| t == name)
                .map(|(_, b)| b)
                .sum();
            let used = n.base_mem + guests + reserved;
            if used > n.maxmem {
                problems.push(format!("{when}: {name} carries {used} of {}", n.maxmem));
            }
        }
        let m = Model::from_snapshot(&w.snapshot(), &Overrides::default()).unwrap();
        drop(w);
        for v in violations(&m.cluster, &m.rules, &m.state) {
            if !self.start.contains(&v) {
                problems.push(format!("{when}: new violation {v}"));
            }
        }
        self.problems.lock().unwrap().extend(problems);
    }

    pub fn events(&self) -> Vec<Event> {
        self.events.lock().unwrap().clone()
    }

    pub fn problems(&self) -> Vec<String> {
        self.problems.lock().unwrap().clone()
    }
}

impl Progress for Watch {
    fn event(&self, event: &Event) {
        match event {
            Event::Started { vmid, .. } => self.check(&format!("start of {vmid}")),
            Event::Done { vmid, .. } => self.check(&format!("end of {vmid}")),
            _ => {}
        }
        self.events.lock().unwrap().push(event.clone());
    }

    fn wants_fractions(&self) -> bool {
        false
    }
}

/// Signals the first started migration.
pub struct FirstStart(pub Arc<tokio::sync::Notify>);

impl Progress for FirstStart {
    fn event(&self, event: &Event) {
        if matches!(event, Event::Started { .. }) {
            self.0.notify_one();
        }
    }
}

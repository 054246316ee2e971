//! A balance plugin in a daemon round is told the zone it plans for (it once was not:
//! `zone` was null outside `flxp place/balance --zone`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use flxp_core::balance::{BalanceOptions, Registry, Trigger};
use flxp_core::placement::{PlacementOptions, Placer};
use flxp_core::plugin::{
    CallError, OnFailure, PluginHost, PluginKind, PluginSpec, Plugins, Request,
};
use flxp_core::{Overrides, Scheduler};
use flxp_engine::{Daemon, DaemonOptions, Zone};

use crate::support::{UNBALANCED, zone};

/// Records the zone of every request and proposes nothing.
struct Recorder(Mutex<Vec<Option<String>>>);

impl PluginHost for Recorder {
    fn call(&self, _plugin: &str, request: &Request) -> Result<Vec<u8>, CallError> {
        self.0.lock().unwrap().push(request.zone.clone());
        Ok(br#"{"protocol": 1, "kind": "balance", "migrations": []}"#.to_vec())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_round_tells_a_balance_plugin_its_zone() {
    let z = zone(UNBALANCED, 500.0, |_| {}).await;
    let host = Arc::new(Recorder(Mutex::new(Vec::new())));
    let plugins = Plugins::new(
        vec![PluginSpec::new("rec", PluginKind::Balance, OnFailure::Fail)],
        Arc::clone(&host) as Arc<dyn PluginHost>,
    );
    let placer = Placer::with_plugins(PlacementOptions::default(), Vec::new(), plugins).unwrap();
    let options = DaemonOptions {
        interval: Duration::from_secs(3600),
        balance: BalanceOptions {
            method: Registry::builtin()
                .with_plugins(placer.plugins())
                .unwrap()
                .parse("rec")
                .unwrap(),
            trigger: Trigger {
                hold: 1,
                ..Trigger::default()
            },
            ..BalanceOptions::default()
        },
        ..DaemonOptions::default()
    };
    let sim = z.sim.clone();
    let d = Daemon::new(
        vec![Zone {
            name: "lab".into(),
            api: z.api.clone(),
            overrides: Overrides::default(),
            reservations: None,
        }],
        &Scheduler::new(placer, Registry::builtin()).unwrap(),
        options,
    )
    .with_clock(Arc::new(move || sim.now() as i64));
    let r = d.run_round("lab").await.unwrap();
    assert!(r.balance.is_some(), "{r:?}");
    assert_eq!(*host.0.lock().unwrap(), [Some("lab".to_owned())]);
    z.shutdown().await;
}

//! `flxp serve`: the GraphQL API (Contract 4), metrics, health, and the daemon loop, for the zones
//! of the config file or, without one, for the built-in simulated zone.
//!
//! [`run`] assembles it: zones with metered API clients and their VM creators, the checks of the
//! config against the live clusters, the HTTP server ([`http::router`]), the daemon and a
//! readiness probe, all sharing one [`state::AppState`]. SIGINT/SIGTERM stop it cleanly: the
//! server finishes open requests, running plans start nothing new and their migrations are
//! followed to the end (with a timeout), creations in flight complete; then the leases are given
//! back and the event streams end.

pub mod dashboard;
pub mod embedded;
pub mod http;
pub mod metered;
pub mod metrics;
pub mod schema;
pub mod state;
pub mod zone;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use flxp_core::Scheduler;
use flxp_core::balance::Registry;
use flxp_engine::create_vm::CreateOptions;
use flxp_engine::daemon::{DaemonOptions, Zone as DaemonZone};
use flxp_engine::{Creator, Daemon, Reservations, stop_signal};
use flxp_pve::{Pve, TaskWait, Transport};
use tokio::time::Duration;

use crate::app::preflight;
use crate::app::startup::ApiKey;
use crate::config::{Config, DEFAULT_PATH, Role};
use metered::MeteredTransport;
use metrics::Metrics;
use state::{AppState, Tokens, Work};
use zone::Zone;

/// Where `flxp serve` listens unless told otherwise.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";

pub use crate::app::startup::TOKEN_ENV;

/// How long shutdown waits for creations and migrations in flight.
const DRAIN: Duration = Duration::from_secs(120);

/// Where the config comes from.
enum Source {
    /// A file, with its text (for placing live-check errors).
    File(PathBuf, String, Config),
    /// The built-in simulated zone.
    Embedded(embedded::Embedded),
}

/// Runs `flxp serve` until SIGINT/SIGTERM.
pub async fn run(
    config_flag: Option<PathBuf>,
    listen_flag: Option<SocketAddr>,
) -> anyhow::Result<()> {
    let source = match config_flag {
        Some(path) => load(path)?,
        None if Path::new(DEFAULT_PATH).exists() => load(PathBuf::from(DEFAULT_PATH))?,
        None => Source::Embedded(embedded::start().await?),
    };
    let config = match &source {
        Source::File(_, _, c) => c.clone(),
        Source::Embedded(e) => e.config.clone(),
    };
    let simulated = matches!(source, Source::Embedded(_));
    // What `flxp config check` runs too: the same config passes both or neither.
    let env_token = std::env::var(TOKEN_ENV).ok();
    let checked = crate::app::startup::check(&config, env_token.as_deref())?;
    let (token, generated) = tokens_for(checked.tokens, simulated)?;
    let listen = match (listen_flag, &config.api.listen) {
        (Some(a), _) => a,
        (None, Some(text)) => text.parse().context("api.listen")?,
        (None, None) => DEFAULT_LISTEN
            .parse()
            .context("the default listen address")?,
    };

    let (stop_handle, stop) = stop_signal();
    let mut state = build(
        &config,
        token.tokens,
        simulated,
        stop.clone(),
        Registry::builtin(),
    )?;

    let demo_dir = simulated
        .then(|| std::env::temp_dir().join(format!("flxp-demo-audit-{}", std::process::id())));
    state.audit = match &demo_dir {
        // The demo's cluster ends with the process: so does its audit log.
        Some(dir) => {
            let mut section = config.audit.clone();
            section.path = Some(dir.join(crate::audit::FILE_NAME));
            crate::audit::AuditLog::open(&section)?
        }
        None => crate::audit::AuditLog::open(&config.audit)?,
    }
    .map(Arc::new);
    match &state.audit {
        Some(log) => tracing::info!(path = %log.path().display(), "audit log"),
        None => tracing::warn!("[audit] enabled = false: actions through the API are not recorded"),
    }
    if let Source::File(path, text, _) = &source {
        preflight(&state, &config, text, path).await?;
    }
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    let addr = listener.local_addr()?;
    let url = format!("http://{addr}");
    match &source {
        Source::Embedded(e) => {
            eprintln!(
                "{}",
                embedded::banner(&url, &token.shown.unwrap_or_default(), generated, &e.access)
            );
            if let Some(v) = &token.viewer {
                eprintln!("  Viewer token: {v}   (role viewer: read and plan, never carry out)\n");
            }
        }
        Source::File(path, _, _) => eprintln!(
            "flxp serve: {} zone(s) from {}; dashboard at {url}/, GraphQL API at {url}/graphql",
            state.zones.len(),
            path.display()
        ),
    }
    tracing::debug!(tokens = state.tokens.len(), "API tokens accepted");
    // Tests and scripts find the port here, even with logs turned down.
    eprintln!("flxp serve: listening on {url}");

    tokio::spawn({
        let handle = stop_handle;
        async move {
            crate::signal::stop_requested().await;
            tracing::info!("shutting down: finishing requests, creations and migrations in flight");
            handle.stop();
        }
    });
    let probe = tokio::spawn(probe_loop(state.clone()));
    let poller = tokio::spawn(dashboard::live::poll(
        Arc::clone(&state.live),
        Arc::clone(&state.zones),
    ));
    let daemon = state.daemon.clone();
    let server = {
        let mut stop = stop.clone();
        axum::serve(listener, http::router(state.clone()))
            .with_graceful_shutdown(async move { stop.stopped().await })
    };
    let daemon_run = {
        let mut stop = stop.clone();
        async move { daemon.run(async move { stop.stopped().await }).await }
    };
    // The server stops taking connections at the stop; the event streams stay open until the
    // runs have ended and said so, then close, so that the server's shutdown completes.
    let drained = async {
        daemon_run.await;
        probe.abort();
        poller.abort();
        if !state.work.idle(DRAIN).await {
            tracing::warn!(
                running = state.work.running(),
                "creations or migrations still running after {} s; exiting anyway",
                DRAIN.as_secs()
            );
        }
        // Given back now, not whenever the last run's guard is noticed: the process may be gone
        // by then, leaving the lease to lapse at its expiry while no flxp may act.
        state.daemon.release_leases().await;
        state.live.close();
    };
    let (served, ()) = tokio::join!(server, drained);
    // What the last runs and rounds told is sent before the process goes, within bounds.
    state.notify.flush(crate::notify::FLUSH).await;
    if let Source::Embedded(e) = source {
        e.handle.shutdown().await.ok();
    }
    if let Some(dir) = demo_dir {
        std::fs::remove_dir_all(dir).ok();
    }
    served.context("the HTTP server failed")?;
    tracing::info!("stopped");
    Ok(())
}

fn load(path: PathBuf) -> anyhow::Result<Source> {
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("config file {} cannot be read", path.display()))?;
    let config = Config::parse(&text, &path)?;
    tracing::debug!(config = %path.display(), "read the config file");
    Ok(Source::File(path, text, config))
}

/// The accepted tokens and the ones to show (embedded mode only).
struct TokenSet {
    tokens: Tokens,
    shown: Option<String>,
    /// A viewer token generated for the embedded zone, to try the read-only role.
    viewer: Option<String>,
}

/// The accepted tokens (checked by [`crate::app::startup::check`]); the embedded zone
/// generates one if there are none. A config without tokens is refused: the API would be open to
/// anyone.
fn tokens_for(mut list: Vec<ApiKey>, simulated: bool) -> anyhow::Result<(TokenSet, bool)> {
    let mut generated = false;
    if list.is_empty() {
        if let Some(refusal) = crate::app::startup::serve_refusal(&list).filter(|_| !simulated) {
            anyhow::bail!(refusal);
        }
        list.push(ApiKey {
            secret: state::generate_token()?,
            role: Role::Operator,
            name: "generated".to_owned(),
        });
        generated = true;
    }
    let shown = simulated
        .then(|| list.last().map(|k| k.secret.clone()))
        .flatten();
    // The demo zone also hands out a read-only token, so the refusal of a viewer can be tried.
    let viewer = if simulated {
        let v = state::generate_token()?;
        list.push(ApiKey {
            secret: v.clone(),
            role: Role::Viewer,
            name: "generated-viewer".to_owned(),
        });
        Some(v)
    } else {
        None
    };
    Ok((
        TokenSet {
            tokens: Tokens::named(
                list.iter()
                    .map(|k| (k.secret.as_str(), k.role, k.name.clone())),
            ),
            shown,
            viewer,
        },
        generated,
    ))
}

/// The shared state: zones with metered clients and creators, tokens, metrics.
fn build(
    config: &Config,
    tokens: Tokens,
    simulated: bool,
    stop: flxp_engine::Stop,
    methods: &Registry,
) -> anyhow::Result<AppState> {
    let clients = |name: &str| -> anyhow::Result<Arc<dyn Transport>> {
        Ok(Arc::clone(config.client(name)?.transport()) as Arc<dyn Transport>)
    };
    build_over(config, tokens, simulated, stop, &clients, methods)
}

/// The shared state of `flxp serve` for a config, with `methods` as its balancing methods
/// instead of [`Registry::builtin`] (the config's balance plugins are added on top): how an
/// embedder serves its own methods. Serve [`http::router`] of it on a listener; the daemon loop
/// (`AppState::daemon`) runs only if the embedder runs it.
pub fn state_with_methods(
    config: &Config,
    tokens: Tokens,
    methods: &Registry,
) -> anyhow::Result<AppState> {
    build(config, tokens, false, flxp_engine::Stop::never(), methods)
}

/// The shared state over the given transport of each zone instead of the config's HTTPS
/// clients: an in-process simulator, for fuzzing the API without a network.
pub fn state_over(
    config: &Config,
    tokens: Tokens,
    transport: &dyn Fn(&str) -> anyhow::Result<Arc<dyn Transport>>,
) -> anyhow::Result<AppState> {
    let methods = Registry::builtin();
    build_over(
        config,
        tokens,
        true,
        flxp_engine::Stop::never(),
        transport,
        methods,
    )
}

fn build_over(
    config: &Config,
    tokens: Tokens,
    simulated: bool,
    stop: flxp_engine::Stop,
    transport: &dyn Fn(&str) -> anyhow::Result<Arc<dyn Transport>>,
    methods: &Registry,
) -> anyhow::Result<AppState> {
    let metrics = Arc::new(Metrics::new());
    // The balancing methods: `methods` with the config's balance plugins on top.
    let scheduler = Arc::new(crate::app::scheduler::build(config, methods)?);
    let c = &config.create_vm;
    let create = CreateOptions {
        wait: TaskWait {
            interval: Duration::from_millis(c.poll_ms),
            timeout: Some(Duration::from_secs(c.timeout_secs)),
            log_lines: 20,
        },
        full_clone: c.full_clone,
        ..CreateOptions::default()
    };
    let mut zones = BTreeMap::new();
    for name in config.zones.keys() {
        let last = metered::SharedContact::default();
        let api = Pve::from_transport(MeteredTransport::new(
            transport(name)?,
            name,
            Arc::clone(&metrics),
            Arc::clone(&last),
        ));
        let creator = Creator::new(
            api.clone(),
            &scheduler,
            name,
            Reservations::new(Duration::from_secs(c.reservation_ttl_secs)),
            create.clone(),
        );
        let zone = Zone::new(name, api, config.overrides(name), creator, last);
        zones.insert(name.clone(), Arc::new(zone));
    }
    let zones = Arc::new(zones);
    let notify = crate::notify::Notifier::start(config, "serve");
    let live: Arc<dashboard::live::Live> = Arc::default();
    let daemon = daemon(config, &zones, &scheduler, &metrics, &notify, &live);
    for z in zones.values() {
        if let Some(s) = daemon.smoother(&z.name) {
            z.smooth_with(s);
        }
    }
    Ok(AppState {
        zones,
        config: Arc::new(config.clone()),
        scheduler,
        metrics,
        daemon,
        tokens: Arc::new(tokens),
        ready_window: Duration::from_secs(config.api.ready_secs.unwrap_or(60)),
        simulated,
        execute: crate::app::daemon::execute_options(config),
        stop,
        work: Arc::new(Work::default()),
        live,
        audit: None,
        notify,
        idempotency: Arc::default(),
    })
}

/// Checks each zone's lease node, then reads every zone once and checks the config's catalog
/// against them.
async fn preflight(
    state: &AppState,
    config: &Config,
    text: &str,
    path: &Path,
) -> anyhow::Result<()> {
    // What `flxp config check` refuses, refused here too.
    let apis = state.zones.values().map(|z| (z.name.as_str(), &z.api));
    crate::app::startup::check_lease_nodes(config, apis).await?;
    let mut models = Vec::new();
    for z in state.zones.values() {
        match z.model().await {
            Ok(m) => models.push((z.name.as_str(), m)),
            Err(e) => {
                tracing::warn!(zone = %z.name, error = %e, "zone not reachable at start; the config is checked against the others")
            }
        }
    }
    let clusters: preflight::Clusters = models.iter().map(|(n, m)| (*n, &m.cluster)).collect();
    preflight::check(config, &clusters, text, path)?;
    for w in preflight::unknown_nodes(config, &clusters) {
        tracing::warn!("{w}");
    }
    Ok(())
}

/// The daemon over every zone (or `[daemon].zones`, the others only leased), reporting migrations
/// to the metrics.
fn daemon(
    config: &Config,
    zones: &BTreeMap<String, Arc<Zone>>,
    scheduler: &Scheduler,
    metrics: &Arc<Metrics>,
    notify: &crate::notify::Notifier,
    live: &Arc<dashboard::live::Live>,
) -> Daemon {
    let (zones, idle): (Vec<DaemonZone>, Vec<DaemonZone>) = zones
        .values()
        .map(|z| DaemonZone {
            name: z.name.clone(),
            api: z.api.clone(),
            overrides: z.overrides.clone(),
            reservations: Some(Arc::clone(z.creator.reservations())),
        })
        .partition(|z| config.daemon.zones.is_empty() || config.daemon.zones.contains(&z.name));
    let options = DaemonOptions {
        // An unreadable zone is tried again after the default minute, as `serve` always has,
        // not after `flxp daemon`'s interval-bound retry.
        retry_after: DaemonOptions::default().retry_after,
        ..crate::app::daemon::options(config)
    };
    let metrics = Arc::clone(metrics);
    let (notify, watch) = (
        notify.clone(),
        crate::notify::RoundWatch::new(config.lease.enabled),
    );
    let live = Arc::clone(live);
    let daemon = match config.lease_settings("serve") {
        // Zones outside `[daemon] zones` get no rounds, but their lease all the same: the API
        // acts there too, and must not beside another flxp.
        Some(lease) => Daemon::new(zones, scheduler, options)
            .with_idle_zones(idle)
            .with_lease(lease),
        None => Daemon::new(zones, scheduler, options),
    };
    // Its migrations go live as a run's do; the metrics count them at each round's end.
    let daemon = daemon.with_progress(Arc::new(dashboard::live::LiveProgress::new(
        None,
        Arc::clone(&live),
    )));
    daemon.on_round(Arc::new(move |r| {
        notify.send_all(watch.events(r));
        live.round(r);
        crate::app::daemon::log_unplaced(r);
        crate::app::daemon::log_power(r);
        metrics.migrations(&r.zone, "done", r.migrations_done() as u64);
        metrics.migrations(&r.zone, "failed", r.migrations_failed() as u64);
        // A round that could not read the zone (or stood by) knows nothing new: keep the last.
        if r.error.is_none() && r.standby.is_none() {
            let running: Vec<(String, usize)> = r
                .maintenance
                .iter()
                .map(|m| (m.node.clone(), m.state.running().len()))
                .collect();
            metrics.set_maintenance(&r.zone, &running);
        }
        if let Some(e) = &r.error {
            tracing::warn!(zone = %r.zone, error = %e, "daemon round could not run");
        }
    }))
}

/// Keeps `/readyz` and the imbalance gauge current: reads each zone at a quarter of the readiness
/// window (one snapshot, O(nodes) calls).
async fn probe_loop(state: AppState) {
    let every = (state.ready_window / 4).max(Duration::from_secs(1));
    loop {
        for z in state.zones.values() {
            if let Err(e) = state.model(z).await {
                tracing::warn!(zone = %z.name, error = %e.message, "zone not readable");
            }
        }
        tokio::time::sleep(every).await;
    }
}

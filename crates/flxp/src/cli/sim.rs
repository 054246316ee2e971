//! `flxp sim`: a simulated Proxmox VE API from a scenario file (HTTPS with a generated
//! certificate unless `--http`), until interrupted.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use flxp_sim::auth::TokenSpec;
use flxp_sim::{Scenario, Sim, TlsIdentity};

/// Arguments of `flxp sim`.
#[derive(Debug, clap::Args)]
// A negative number is a value the parser names its option for, not an unknown flag.
#[command(after_long_help = STORAGE_HELP, allow_negative_numbers = true)]
pub struct Args {
    /// `trace FAMILY`: print a generated trace instead of serving.
    #[command(subcommand)]
    pub command: Option<SimCommand>,
    /// Scenario file: a Contract 1 snapshot plus an optional `sim` section (`demo` for the
    /// built-in demo world when no such file exists).
    #[arg(long, value_name = "FILE", global = true)]
    pub scenario: Option<PathBuf>,
    /// Run a generated trace of this family (office-hours, night-batch, noisy-neighbours,
    /// growth-churn) over the scenario's guests.
    #[arg(long, value_name = "FAMILY", conflicts_with = "trace_file")]
    pub trace: Option<String>,
    /// Run the trace in this file (usage models and workload events, see GUIDE.md).
    #[arg(long, value_name = "FILE")]
    pub trace_file: Option<PathBuf>,
    /// Seed of a generated trace.
    #[arg(long, value_name = "N", default_value_t = 0, global = true)]
    pub seed: u64,
    /// Days a generated trace covers.
    #[arg(long, value_name = "N", default_value_t = 7, global = true)]
    pub days: u32,
    /// Address to listen on.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8006")]
    pub listen: SocketAddr,
    /// Accept this API token (repeatable). With none here or in the scenario, one is generated.
    #[arg(long, value_name = "USER@REALM!TOKENID=SECRET")]
    pub token: Vec<String>,
    /// Serve plain HTTP instead of HTTPS.
    #[arg(long)]
    pub http: bool,
    /// Simulated seconds per real second (overrides the scenario's `sim.time_scale`).
    #[arg(long, value_name = "FACTOR")]
    pub time_scale: Option<f64>,
}

/// What `flxp sim` does besides serving.
#[derive(Debug, clap::Subcommand)]
pub enum SimCommand {
    /// Print a generated trace (JSON) for the scenario's guests, e.g. to edit it and run it
    /// with `--trace-file`.
    Trace {
        /// office-hours, night-batch, noisy-neighbours or growth-churn.
        family: String,
    },
}

/// How a scenario describes storage (shown by `flxp sim --help`).
const STORAGE_HELP: &str = "\
Storage: a scenario describes its storages with `storage` entries in its resources (one per node
that has the storage: `storage`, `node`, `plugintype`, `shared` 0|1, `content`, `maxdisk`, `disk`)
or in `sim.storages`, e.g.
  [{\"storage\": \"ceph\", \"type\": \"rbd\", \"shared\": true},
   {\"storage\": \"local-lvm\", \"type\": \"lvmthin\", \"nodes\": [\"pve1\", \"pve2\"]}]
(`nodes` defaults to all). A guest's generated disk goes to a shared storage its node has, else to
a local one; `sim.guests.<vmid>.config` puts it elsewhere
(`\"scsi0\": \"local-lvm:vm-100-disk-0,size=32G\"`). A disk on local storage needs
`with-local-disks` to live-migrate. A scenario without any storage gets node-local `local` and
`local-lvm` plus a shared NFS storage `shared` that holds the generated disks, so live migration
works without copying disks.";

/// Runs `flxp sim`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let Some(path) = args.scenario.clone() else {
        return Err(super::UsageError("--scenario FILE is required (or `demo`)".into()).into());
    };
    let mut scenario = load(&path)?;
    if let Some(SimCommand::Trace { family }) = &args.command {
        let trace = flxp_sim::load::generate(family_of(family)?, &scenario, args.seed, args.days);
        crate::output::say(trace.to_json());
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(family) = &args.trace {
        let trace = flxp_sim::load::generate(family_of(family)?, &scenario, args.seed, args.days);
        scenario
            .set_trace(trace)
            .context("running the generated trace")?;
    }
    if let Some(file) = &args.trace_file {
        let trace = flxp_sim::load::Trace::load(file)
            .with_context(|| format!("loading trace {}", file.display()))?;
        scenario
            .set_trace(trace)
            .with_context(|| format!("running trace {}", file.display()))?;
    }
    for t in &args.token {
        scenario
            .add_token(t)
            .map_err(|e| super::UsageError(format!("--token: {e}")))?;
    }
    if let Some(scale) = args.time_scale {
        if !(scale.is_finite() && scale > 0.0) {
            return Err(super::UsageError(format!(
                "--time-scale must be a positive number, got {scale}"
            ))
            .into());
        }
        scenario.sim.time_scale = Some(scale);
    }
    let tokens = scenario.tokens()?;
    let token = match tokens.first() {
        Some(t) => t.clone(),
        None => {
            let t = TokenSpec::generate("root@pam", "flxp");
            scenario.add_token(&t.to_spec_string())?;
            t
        }
    };
    let sim = Sim::new(scenario.clone()).context("starting the simulated cluster")?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(serve(args, sim, token))?;
    Ok(ExitCode::SUCCESS)
}

/// The trace family called `name`, or a usage error listing them.
fn family_of(name: &str) -> anyhow::Result<flxp_sim::load::Family> {
    flxp_sim::load::Family::parse(name).ok_or_else(|| {
        let names: Vec<&str> = flxp_sim::load::Family::ALL
            .iter()
            .map(|f| f.name())
            .collect();
        super::UsageError(format!(
            "unknown trace family '{name}': expected one of {}",
            names.join(", ")
        ))
        .into()
    })
}

/// Reads the scenario file, or the built-in demo for `demo` when no such file exists.
fn load(path: &Path) -> anyhow::Result<Scenario> {
    if path.as_os_str() == "demo" && !path.exists() {
        return Ok(Scenario::demo());
    }
    Scenario::load(path).with_context(|| format!("loading scenario {}", path.display()))
}

async fn serve(args: Args, sim: Sim, token: TokenSpec) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let addr = listener.local_addr()?;
    let identity = if args.http {
        None
    } else {
        let host = addr.ip();
        let names = if host.is_unspecified() {
            vec![]
        } else {
            vec![host.to_string()]
        };
        Some(TlsIdentity::generate(&names).context("generating the TLS certificate")?)
    };
    let scheme = if identity.is_some() { "https" } else { "http" };
    let shown = if addr.ip().is_unspecified() {
        SocketAddr::new(std::net::Ipv4Addr::LOCALHOST.into(), addr.port())
    } else {
        addr
    };
    {
        // `say`, not `println!`: a closed stdout (a service manager, `| head`) must not panic.
        let w = sim.world();
        crate::output::say(format!(
            "flxp sim: cluster '{}' with {} nodes and {} guests",
            w.settings.cluster_name,
            w.nodes.len(),
            w.guests.len()
        ));
    }
    crate::output::say(format!("  base URL:      {scheme}://{shown}/api2/json"));
    if let Some(id) = &identity {
        crate::output::say(format!("  fingerprint:   {}", id.fingerprint()));
    }
    crate::output::say(format!("  Authorization: {}", token.header_value()));
    crate::output::say(format!("  control:       {scheme}://{shown}/_sim/state"));
    let acceptor = match &identity {
        Some(id) => {
            sim.set_fingerprint(id.fingerprint());
            Some(tokio_rustls_acceptor(id)?)
        }
        None => None,
    };
    tracing::info!(%addr, tls = acceptor.is_some(), "serving the simulated Proxmox VE API");
    flxp_sim::run(listener, sim, acceptor, crate::signal::stop_requested()).await?;
    tracing::info!("stopped");
    Ok(())
}

fn tokio_rustls_acceptor(id: &TlsIdentity) -> anyhow::Result<flxp_sim::TlsAcceptor> {
    Ok(flxp_sim::TlsAcceptor::from(id.server_config()?))
}

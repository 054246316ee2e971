//! flxp's orchestration: collect a cluster snapshot from the Proxmox API, decide with the pure
//! core, carry out the decision.
//!
//! - [`collect_snapshot`]: Contract 1 from a live API in O(nodes) calls.
//! - [`Executor`]: carries out a rebalancing or evacuation [`Goal`]'s plan in one zone, each step
//!   re-checked on a fresh read, replanned when the world changes or a migration fails, within
//!   [`Limits`], reporting [`Event`]s and ending with an [`ExecutionReport`].
//! - [`Daemon`]: every zone at an interval (trigger, evacuation, rebalancing), embeddable:
//!   `Daemon::new(zones, &scheduler, options)`, `run(shutdown)`, `run_round(zone)`.
//!
//! ```no_run
//! # async fn demo(api: flxp_pve::Pve) -> flxp_engine::Result<()> {
//! use flxp_core::Scheduler;
//! use flxp_core::balance::{BalanceOptions, Registry};
//! use flxp_core::placement::{PlacementOptions, Placer};
//! use flxp_engine::{Executor, Goal};
//! let placer = Placer::new(PlacementOptions::default(), Vec::new()).expect("policies");
//! let scheduler = Scheduler::new(placer, Registry::builtin()).expect("methods");
//! let executor = Executor::new("lab", api, &scheduler);
//! let goal = Goal::Balance(BalanceOptions::default());
//! let plan = executor.plan(&goal).await?;
//! let report = executor.execute(plan, &goal).await;
//! println!("{}", report.summary());
//! # Ok(()) }
//! ```

pub mod blocking;
// The simulator and its clients, as the integration tests start them.
pub mod collect;
pub mod consolidate;
#[cfg(test)]
#[path = "../tests/it/sim_client.rs"]
mod sim_client;

pub use collect::{CollectError, collect_snapshot};
pub mod create_vm;
pub use create_vm::{CreateError, CreatedVm, Creator, VmRequest};
pub mod reserve;
pub use reserve::{ClusterModel, DiskHold, HeldGroup, Holds, NodeHold, Reservations, Ticket};
pub mod error;
pub use error::{Error, Result};
pub mod home;
pub mod limits;
pub mod maintenance;
mod notes_edit;
pub mod power_mark;
pub use limits::Limits;
pub mod progress;
pub mod queue;
pub mod refresh;
pub mod rolling;
pub mod smoothing;
pub use progress::{Event, NoProgress, Progress};
pub use refresh::ReadCache;
pub mod report;
pub use report::ExecutionReport;
pub mod planning;
pub use planning::{Goal, Model};
pub mod stop;
pub use stop::{Stop, StopHandle, stop_signal};
pub mod execute;
pub mod migrate;
pub use execute::{Clock, ExecuteOptions, Executor, epoch_now, error_chain, system_clock};
pub mod daemon;
pub mod lease;
pub mod stale;
pub use daemon::{
    AutoConsolidate, Daemon, DaemonOptions, NodeMaintenance, PowerReport, RoundReport, Zone,
};
pub use lease::{
    HoldsLease, LeaseError, LeaseGuard, LeaseHold, LeaseKeeper, LeaseOptions, LeaseRefused,
    LeaseState,
};
pub use stale::{StaleAction, StaleMarker, StaleOptions};
mod round;
mod settle;
#[cfg(test)]
mod testapi;

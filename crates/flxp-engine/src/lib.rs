//! flxp's orchestration: collect a cluster snapshot from the Proxmox API, decide with the pure
//! core, carry out the decision.
//!
//! - [`collect_snapshot`]: Contract 1 from a live API in O(nodes) calls.

pub mod collect;

pub use collect::{CollectError, collect_snapshot};
pub mod create_vm;
pub use create_vm::{CreateError, CreatedVm, Creator, VmRequest};
pub mod reserve;
pub use reserve::{ClusterModel, Reservations, Ticket};
pub mod error;
pub use error::{Error, Result};
pub mod limits;
pub use limits::Limits;
pub mod progress;
pub mod queue;
pub use progress::{Event, NoProgress, Progress};
pub mod report;
pub use report::ExecutionReport;
pub mod planning;
pub use planning::{Goal, Model};
pub mod stop;
pub use stop::{Stop, StopHandle, stop_signal};
pub mod execute;
pub mod migrate;
pub use execute::{Clock, ExecuteOptions, Executor, system_clock};
pub mod daemon;
pub use daemon::{Daemon, DaemonOptions, RoundReport, Zone};
#[cfg(test)]
mod testapi;

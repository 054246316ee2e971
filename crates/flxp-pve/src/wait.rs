//! Waiting for a task: poll its status on the node in its UPID until it stops.
//!
//! Sleeps with `tokio::time`, so tests run it under paused time without waiting for real.

use tokio::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::pve::Pve;
use crate::transport::Transport;
use crate::types::{TaskLogQuery, TaskStatus, Upid};

/// How to wait for a task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskWait {
    /// Pause between status polls (Proxmox's own tools poll every 1-2 s).
    pub interval: Duration,
    /// Give up after this long (`None`: wait as long as the task runs).
    pub timeout: Option<Duration>,
    /// How many of the last log lines a failure carries.
    pub log_lines: usize,
}

impl Default for TaskWait {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(1),
            timeout: None,
            log_lines: 20,
        }
    }
}

/// Log lines fetched from the start of a failed task's log; the last `log_lines` are kept.
const LOG_FETCH_LIMIT: u64 = 1000;

/// Polls `upid` until it stops. Success (`OK`, `WARNINGS: n`) returns the final status; any other
/// exit status is [`Error::TaskFailed`] with the last log lines; a passed deadline is
/// [`Error::TaskTimeout`].
pub async fn wait_task<T: Transport + ?Sized>(
    api: &Pve<T>,
    upid: &Upid,
    wait: &TaskWait,
) -> Result<TaskStatus> {
    let started = Instant::now();
    loop {
        let status = api.task_status(upid).await?;
        if !status.is_running() {
            if status.is_success() {
                return Ok(status);
            }
            let exitstatus = status
                .exitstatus
                .clone()
                .unwrap_or_else(|| "stopped without an exit status".into());
            let log = last_log_lines(api, upid, wait.log_lines).await;
            return Err(Error::TaskFailed {
                upid: upid.to_string(),
                exitstatus,
                log,
            });
        }
        if let Some(limit) = wait.timeout {
            if started.elapsed() >= limit {
                return Err(Error::TaskTimeout {
                    upid: upid.to_string(),
                    waited_secs: started.elapsed().as_secs(),
                });
            }
        }
        tokio::time::sleep(wait.interval).await;
    }
}

/// The last `n` log lines of a task; empty if the log cannot be read (the failure is what matters).
async fn last_log_lines<T: Transport + ?Sized>(api: &Pve<T>, upid: &Upid, n: usize) -> Vec<String> {
    let query = TaskLogQuery {
        start: Some(0),
        limit: Some(LOG_FETCH_LIMIT),
    };
    match api.task_log(upid, &query).await {
        Ok(lines) => {
            let texts: Vec<String> = lines.into_iter().filter_map(|l| l.t).collect();
            let skip = texts.len().saturating_sub(n);
            texts.into_iter().skip(skip).collect()
        }
        Err(e) => {
            tracing::warn!(%upid, error = %e, "cannot read the log of a failed task");
            Vec::new()
        }
    }
}

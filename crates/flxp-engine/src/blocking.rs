//! CPU-bound work taken off the async runtime's workers.
//!
//! Building a cluster model, re-checking a step and planning take 100 ms and more on a cluster of
//! a thousand nodes, and the executor does them before every migration. Run inline on a runtime
//! worker, that work would stall every task sharing the worker: migration followers polling
//! Proxmox, GraphQL requests, the daemon's other zones. [`run`] hands a closure to tokio's
//! blocking pool ([`tokio::task::spawn_blocking`]) and waits for it without holding a worker; the
//! closure runs in the caller's tracing span. The core stays synchronous and pure.

use std::sync::Arc;

use flxp_core::balance::Plan;
use flxp_core::placement::Placer;

use crate::error::{Error, Result};
use crate::planning::{self, Goal, Model};

/// Runs `f` on the blocking pool and waits for it; `what` names the work in the error if `f`
/// panics or the runtime shuts down first.
pub async fn run<T, F>(what: &'static str, f: F) -> Result<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let span = tracing::Span::current();
    tokio::task::spawn_blocking(move || span.in_scope(f))
        .await
        .map_err(|e| Error::Interrupted {
            what,
            reason: interrupted(e),
        })
}

/// Plans `goal` on `model` on the blocking pool (see [`planning::plan`]).
pub async fn plan(
    model: Arc<Model>,
    placer: Arc<Placer>,
    goal: Goal,
    budget: Option<usize>,
) -> Result<Plan> {
    run("planning", move || {
        planning::plan(&model, &placer, &goal, budget)
    })
    .await?
}

/// Why work on the blocking pool did not come back.
fn interrupted(e: tokio::task::JoinError) -> String {
    if !e.is_panic() {
        return "the runtime is shutting down".into();
    }
    let payload = e.into_panic();
    let message = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".into());
    format!("it panicked: {message}")
}

#[cfg(test)]
mod tests {
    // Tests may panic on unexpected errors: that is the failure report.
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn a_panic_is_an_error_naming_the_work() {
        let e = run("counting", || -> u32 { panic!("boom") })
            .await
            .unwrap_err();
        assert_eq!(e.to_string(), "counting did not finish: it panicked: boom");
        assert_eq!(run("adding", || 1 + 1).await.unwrap(), 2);
    }
}

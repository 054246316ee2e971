//! Asking a running round (or the daemon) to stop: start nothing new, wait for what runs.
//!
//! [`stop_signal`] makes a pair: the [`StopHandle`] stops, every clone of the [`Stop`] sees it,
//! and why (a stop asked for, the zone's lease lapsed): a run that stops early says so.

use tokio::sync::watch;

/// Why a run stops when [`StopHandle::stop`] gives no other reason.
pub const REQUESTED: &str = "a stop was requested";

/// Stops whatever holds the matching [`Stop`]s.
#[derive(Debug)]
pub struct StopHandle(watch::Sender<Option<String>>);

impl StopHandle {
    /// Asks every holder of the signal to stop (idempotent): "a stop was requested".
    pub fn stop(&self) {
        self.stop_because(REQUESTED);
    }

    /// Stops every holder of the signal for `why`, said where the run reports why it stopped;
    /// the first reason given stays.
    pub fn stop_because(&self, why: &str) {
        self.0.send_if_modified(|now| {
            let first = now.is_none();
            if first {
                *now = Some(why.to_owned());
            }
            first
        });
    }
}

/// A stop request that may come: checked between steps, awaited while waiting.
#[derive(Debug, Clone)]
pub struct Stop(watch::Receiver<Option<String>>);

/// A handle and the signal it sends.
pub fn stop_signal() -> (StopHandle, Stop) {
    let (tx, rx) = watch::channel(None);
    (StopHandle(tx), Stop(rx))
}

impl Stop {
    /// A signal that never stops anything.
    pub fn never() -> Self {
        // The sender is dropped at once: `stopped` then waits forever.
        let (_, rx) = watch::channel(None);
        Self(rx)
    }

    /// Whether a stop was asked for.
    pub fn is_stopped(&self) -> bool {
        self.0.borrow().is_some()
    }

    /// Why it stopped, once it did.
    pub fn reason(&self) -> Option<String> {
        self.0.borrow().clone()
    }

    /// Waits until a stop is asked for (forever if the handle is gone without asking).
    pub async fn stopped(&mut self) {
        loop {
            if self.0.borrow_and_update().is_some() {
                return;
            }
            if self.0.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }
}

impl Default for Stop {
    fn default() -> Self {
        Self::never()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_stop_reaches_every_clone_and_never_never_stops() {
        let (handle, stop) = stop_signal();
        let mut a = stop.clone();
        assert!(!a.is_stopped());
        let waiter = tokio::spawn(async move {
            a.stopped().await;
            true
        });
        handle.stop_because("the zone's lease lapsed");
        handle.stop();
        assert!(waiter.await.unwrap_or(false));
        assert!(stop.is_stopped());
        assert_eq!(
            stop.reason().as_deref(),
            Some("the zone's lease lapsed"),
            "the first stays"
        );
        let mut never = Stop::never();
        let waited = tokio::time::timeout(Duration::from_secs(3600), never.stopped()).await;
        assert!(waited.is_err(), "never stops");
    }
}

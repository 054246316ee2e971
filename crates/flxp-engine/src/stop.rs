//! Asking a running round (or the daemon) to stop: start nothing new, wait for what runs.
//!
//! [`stop_signal`] makes a pair: the [`StopHandle`] stops, every clone of the [`Stop`] sees it.

use tokio::sync::watch;

/// Stops whatever holds the matching [`Stop`]s.
#[derive(Debug)]
pub struct StopHandle(watch::Sender<bool>);

impl StopHandle {
    /// Asks every holder of the signal to stop (idempotent).
    pub fn stop(&self) {
        self.0.send_replace(true);
    }
}

/// A stop request that may come: checked between steps, awaited while waiting.
#[derive(Debug, Clone)]
pub struct Stop(watch::Receiver<bool>);

/// A handle and the signal it sends.
pub fn stop_signal() -> (StopHandle, Stop) {
    let (tx, rx) = watch::channel(false);
    (StopHandle(tx), Stop(rx))
}

impl Stop {
    /// A signal that never stops anything.
    pub fn never() -> Self {
        // The sender is dropped at once: `stopped` then waits forever.
        let (_, rx) = watch::channel(false);
        Self(rx)
    }

    /// Whether a stop was asked for.
    pub fn is_stopped(&self) -> bool {
        *self.0.borrow()
    }

    /// Waits until a stop is asked for (forever if the handle is gone without asking).
    pub async fn stopped(&mut self) {
        loop {
            if *self.0.borrow_and_update() {
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
        handle.stop();
        assert!(waiter.await.unwrap_or(false));
        assert!(stop.is_stopped());
        let mut never = Stop::never();
        let waited = tokio::time::timeout(Duration::from_secs(3600), never.stopped()).await;
        assert!(waited.is_err(), "never stops");
    }
}

//! Simulated time: epoch seconds that run `scale` times faster than the real (or tokio-paused)
//! clock, plus an offset the control endpoint can push forward.
//!
//! Everything that happens "after a while" in the simulated cluster (a migration landing, the HA
//! manager acting) is due at a simulated time; the world catches up lazily whenever it is looked
//! at. Time is read from `tokio::time::Instant`, so tests under paused time need no real sleeps.

use std::sync::Mutex;

use tokio::time::Instant;

/// The simulator's clock.
#[derive(Debug)]
pub struct Clock {
    pace: Mutex<Pace>,
}

/// Where simulated time stood when the scale last changed, and how fast it runs since.
#[derive(Debug, Clone, Copy)]
struct Pace {
    /// Simulated epoch seconds at `origin` (with every `advance` so far).
    origin_epoch: f64,
    origin: Instant,
    /// Simulated seconds per real second.
    scale: f64,
}

impl Pace {
    fn now(&self) -> f64 {
        self.origin_epoch + self.origin.elapsed().as_secs_f64() * self.scale
    }
}

impl Clock {
    /// A clock that reads `start_epoch` now and runs `scale` times real speed.
    pub fn new(start_epoch: f64, scale: f64) -> Self {
        Clock {
            pace: Mutex::new(Pace {
                origin_epoch: start_epoch,
                origin: Instant::now(),
                scale,
            }),
        }
    }

    fn pace(&self) -> std::sync::MutexGuard<'_, Pace> {
        self.pace.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The current simulated time in epoch seconds.
    pub fn now(&self) -> f64 {
        self.pace().now()
    }

    /// Moves simulated time forward by `seconds` at once (negative values are ignored).
    pub fn advance(&self, seconds: f64) {
        if seconds.is_finite() && seconds > 0.0 {
            self.pace().origin_epoch += seconds;
        }
    }

    /// Simulated seconds per real second.
    pub fn scale(&self) -> f64 {
        self.pace().scale
    }

    /// Runs `scale` times real speed from now on; simulated time goes on from where it is, so it
    /// never jumps or runs backwards (a benchmark slows it while a contender computes, as a real
    /// cluster would not wait for it). Values that are not finite and positive are ignored.
    pub fn set_scale(&self, scale: f64) {
        if scale.is_finite() && scale > 0.0 {
            let mut pace = self.pace();
            *pace = Pace {
                origin_epoch: pace.now(),
                origin: Instant::now(),
                scale,
            };
        }
    }
}

/// The current wall-clock time in epoch seconds (for tickets, which clients age by their own clock).
pub fn wall_epoch() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Formats epoch seconds as `2025-11-29 12:00:00` (UTC), the stamp of task log lines.
pub fn log_stamp(epoch: f64) -> String {
    let fmt = time::macros::format_description!("[year]-[month]-[day] [hour]:[minute]:[second]");
    time::OffsetDateTime::from_unix_timestamp(epoch.floor() as i64)
        .ok()
        .and_then(|t| t.format(&fmt).ok())
        .unwrap_or_default()
}

/// Formats epoch seconds as Perl's `localtime` in scalar context (`Sat Nov 29 12:00:00 2025`, UTC),
/// as the HA status texts carry it.
pub fn perl_localtime(epoch: f64) -> String {
    let fmt = time::macros::format_description!(
        "[weekday repr:short] [month repr:short] [day padding:space] [hour]:[minute]:[second] [year]"
    );
    time::OffsetDateTime::from_unix_timestamp(epoch.floor() as i64)
        .ok()
        .and_then(|t| t.format(&fmt).ok())
        .unwrap_or_default()
}

/// Formats a duration as `HH:MM:SS`, as migration logs print it.
pub fn hms(seconds: f64) -> String {
    let s = seconds.max(0.0).round() as u64;
    format!("{:02}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_are_utc_and_perl_shaped() {
        assert_eq!(log_stamp(1_764_400_000.0), "2025-11-29 07:06:40");
        assert_eq!(perl_localtime(1_764_400_000.0), "Sat Nov 29 07:06:40 2025");
        assert_eq!(perl_localtime(1_764_000_000.0), "Mon Nov 24 16:00:00 2025");
        assert_eq!(hms(3725.4), "01:02:05");
    }

    #[tokio::test(start_paused = true)]
    async fn clock_runs_scaled_and_advances() {
        let clock = Clock::new(1000.0, 10.0);
        assert_eq!(clock.now(), 1000.0);
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        assert!((clock.now() - 1005.0).abs() < 1e-6, "{}", clock.now());
        clock.advance(60.0);
        clock.advance(-5.0);
        assert!((clock.now() - 1065.0).abs() < 1e-6, "{}", clock.now());
    }

    #[tokio::test(start_paused = true)]
    async fn a_new_scale_goes_on_from_now() {
        let clock = Clock::new(1000.0, 10.0);
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        clock.set_scale(1.0);
        clock.set_scale(f64::NAN);
        clock.set_scale(0.0);
        assert_eq!(clock.scale(), 1.0);
        assert!((clock.now() - 1010.0).abs() < 1e-6, "{}", clock.now());
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
        assert!((clock.now() - 1012.0).abs() < 1e-6, "{}", clock.now());
        clock.advance(8.0);
        clock.set_scale(100.0);
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        assert!((clock.now() - 1070.0).abs() < 1e-6, "{}", clock.now());
    }
}

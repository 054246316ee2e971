//! Showing migrations as they run: one progress bar per running migration on a terminal (stderr),
//! plain log lines otherwise.
//!
//! The engine sends [`Event`]s; [`for_stderr`] picks bars when stderr is a terminal and the log
//! lines the engine writes through `tracing` otherwise (they already name every start, end and
//! failure, so the plain mode adds nothing of its own).

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flxp_core::units::fmt_bytes;
use flxp_engine::{Event, NoProgress, Progress};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Steps of a bar: fractions are shown in tenths of a percent.
const STEPS: u64 = 1000;

/// Progress bars on stderr, one per running migration.
pub struct Bars {
    multi: MultiProgress,
    bars: Mutex<BTreeMap<u32, ProgressBar>>,
    style: ProgressStyle,
}

impl Bars {
    /// Bars drawn on stderr.
    pub fn new() -> Self {
        Self::with_target(ProgressDrawTarget::stderr())
    }

    fn with_target(target: ProgressDrawTarget) -> Self {
        let style = ProgressStyle::with_template(
            "{prefix:>18} [{bar:30}] {percent:>3}% {elapsed:>4} {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
        Self {
            multi: MultiProgress::with_draw_target(target),
            bars: Mutex::new(BTreeMap::new()),
            style,
        }
    }

    fn bars(&self) -> std::sync::MutexGuard<'_, BTreeMap<u32, ProgressBar>> {
        self.bars.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The bar of a guest, if it has one.
    fn bar(&self, vmid: u32) -> Option<ProgressBar> {
        self.bars().get(&vmid).cloned()
    }

    /// Prints a line above the bars.
    fn line(&self, text: String) {
        let _ = self.multi.println(text);
    }
}

impl Default for Bars {
    fn default() -> Self {
        Self::new()
    }
}

impl Progress for Bars {
    fn event(&self, event: &Event) {
        match event {
            Event::Started {
                vmid,
                name,
                from,
                to,
                online,
                bytes,
                ..
            } => {
                let bar = self.multi.add(ProgressBar::new(STEPS));
                bar.set_style(self.style.clone());
                bar.set_prefix(format!("{vmid} {name}"));
                let how = if *online { "live" } else { "offline" };
                bar.set_message(format!("{from} → {to}, {how}, {}", fmt_bytes(*bytes)));
                bar.enable_steady_tick(Duration::from_millis(250));
                self.bars().insert(*vmid, bar);
            }
            Event::Progress { vmid, fraction, .. } => {
                if let Some(bar) = self.bar(*vmid) {
                    bar.set_position((fraction * STEPS as f64).round() as u64);
                }
            }
            Event::Done {
                vmid,
                from,
                to,
                secs,
                ..
            } => {
                if let Some(bar) = self.bars().remove(vmid) {
                    bar.set_position(STEPS);
                    bar.finish_with_message(format!("{from} → {to} done in {secs:.0} s"));
                }
            }
            Event::Failed {
                vmid,
                from,
                to,
                error,
                ..
            } => {
                if let Some(bar) = self.bars().remove(vmid) {
                    bar.abandon_with_message(format!("{from} → {to} FAILED"));
                }
                self.line(format!("migration of {vmid} {from} → {to} failed: {error}"));
            }
            Event::Skipped { vmid, reason, .. } => {
                self.line(format!("skipped {vmid}: {reason}"));
            }
            Event::Replanned {
                reason, migrations, ..
            } => {
                self.line(format!("replanned ({reason}): {migrations} migration(s)"));
            }
        }
    }
}

/// Bars when stderr is a terminal, else nothing beyond the engine's own log lines.
pub fn for_stderr() -> Arc<dyn Progress> {
    if std::io::stderr().is_terminal() {
        Arc::new(Bars::new())
    } else {
        Arc::new(NoProgress)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bar_lives_from_start_to_end() {
        let bars = Bars::with_target(ProgressDrawTarget::hidden());
        let started = Event::Started {
            zone: "lab".into(),
            vmid: 101,
            name: "web1".into(),
            from: "pve1".into(),
            to: "pve2".into(),
            step: 0,
            online: true,
            bytes: 4 << 30,
        };
        bars.event(&started);
        bars.event(&Event::Progress {
            zone: "lab".into(),
            vmid: 101,
            fraction: 0.25,
        });
        let bar = bars.bar(101).expect("a bar for 101");
        assert_eq!(bar.position(), 250);
        assert_eq!(bar.message(), "pve1 → pve2, live, 4.0 GiB");
        bars.event(&Event::Done {
            zone: "lab".into(),
            vmid: 101,
            from: "pve1".into(),
            to: "pve2".into(),
            secs: 12.0,
        });
        assert!(bars.bar(101).is_none());
        assert!(bar.is_finished());
        assert_eq!(bar.message(), "pve1 → pve2 done in 12 s");
    }
}

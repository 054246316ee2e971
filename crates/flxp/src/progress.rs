//! Showing migrations as they run: one progress bar per running migration on a terminal (stderr),
//! plain log lines otherwise.
//!
//! The engine sends [`Event`]s; [`on_stderr`] gives bars when stderr is a terminal, and otherwise
//! the log lines the engine writes through `tracing` are the whole story (they already name every
//! start, end and failure, so the plain mode adds nothing of its own). While bars are drawn, log
//! lines must go above them rather than through them: [`Bars::log_dispatch`] is a subscriber like
//! the binary's that does that, for the duration of a round.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flxp_core::units::fmt_bytes;
use flxp_engine::{Event, Progress};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use tracing::level_filters::LevelFilter;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;

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
        let _ = self.multi.println(crate::terminal::lines(&text));
    }

    /// A log subscriber with the binary's filter (`RUST_LOG`, else the level in force) whose lines
    /// go above the bars.
    pub fn log_dispatch(&self) -> tracing::Dispatch {
        let filter = EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| EnvFilter::default().add_directive(LevelFilter::current().into()));
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(AboveBars(self.multi.clone()))
            .with_target(false)
            .finish();
        tracing::Dispatch::new(subscriber)
    }
}

/// Writes log lines above the bars.
#[derive(Clone)]
struct AboveBars(MultiProgress);

impl<'a> MakeWriter<'a> for AboveBars {
    type Writer = LogLine;

    fn make_writer(&'a self) -> LogLine {
        LogLine {
            multi: self.0.clone(),
            buf: Vec::new(),
        }
    }
}

/// One formatted log event, printed whole when dropped (the formatter writes it in pieces).
struct LogLine {
    multi: MultiProgress,
    buf: Vec<u8>,
}

impl std::io::Write for LogLine {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for LogLine {
    fn drop(&mut self) {
        let text = String::from_utf8_lossy(&self.buf);
        let text = text.trim_end_matches('\n');
        if text.is_empty() {
            return;
        }
        if self.multi.is_hidden() {
            crate::output::tell(text);
        } else {
            let _ = self.multi.println(crate::terminal::lines(text));
        }
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
                bar.set_prefix(crate::terminal::cell(&format!("{vmid} {name}")).into_owned());
                let how = if *online { "live" } else { "offline" };
                bar.set_message(
                    crate::terminal::cell(&format!("{from} → {to}, {how}, {}", fmt_bytes(*bytes)))
                        .into_owned(),
                );
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
                    bar.finish_with_message(
                        crate::terminal::cell(&format!("{from} → {to} done in {secs:.0} s"))
                            .into_owned(),
                    );
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
                    bar.abandon_with_message(
                        crate::terminal::cell(&format!("{from} → {to} FAILED")).into_owned(),
                    );
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
            // A kind of event added later has no bar or line until it is given one here.
            _ => {}
        }
    }
}

/// Bars on stderr when it is a terminal; `None` means plain log lines.
pub fn on_stderr() -> Option<Arc<Bars>> {
    std::io::stderr()
        .is_terminal()
        .then(|| Arc::new(Bars::new()))
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

    #[test]
    fn log_lines_are_written_whole() {
        use std::io::Write;
        let writer = AboveBars(MultiProgress::with_draw_target(ProgressDrawTarget::hidden()));
        let mut line = writer.make_writer();
        line.write_all(b"INFO migration started ")
            .unwrap_or_default();
        line.write_all(b"vmid=101\n").unwrap_or_default();
        assert_eq!(line.buf, b"INFO migration started vmid=101\n");
    }
}

//! Logging to systemd's journal through stderr: when systemd connects stderr to the journal it
//! sets `JOURNAL_STREAM` to that stream's `device:inode`, and the journal reads a `<N>` prefix on
//! each line as the line's syslog priority (sd-daemon(3), `SyslogLevelPrefix=` in systemd.exec(5))
//! and stamps the time itself. So under systemd each line gets its level's priority and no
//! timestamp of its own; anywhere else logs stay as they were.

use std::fmt;
use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// Whether `journal_stream` (`JOURNAL_STREAM`'s value, `device:inode`) names the file with this
/// device and inode.
pub fn names_stream(journal_stream: &str, dev: u64, ino: u64) -> bool {
    journal_stream
        .split_once(':')
        .and_then(|(d, i)| Some((d.parse::<u64>().ok()?, i.parse::<u64>().ok()?)))
        == Some((dev, ino))
}

/// Whether stderr is the journal stream systemd set up (not merely inherited the variable: a
/// shell started from a unit keeps `JOURNAL_STREAM` but may have redirected stderr).
pub fn stderr_is_journal() -> bool {
    let Some(stream) = std::env::var_os("JOURNAL_STREAM") else {
        return false;
    };
    let Ok(fd) = std::io::stderr().as_fd().try_clone_to_owned() else {
        return false;
    };
    let Ok(meta) = std::fs::File::from(fd).metadata() else {
        return false;
    };
    names_stream(&stream.to_string_lossy(), meta.dev(), meta.ino())
}

/// The syslog priority of a level: error 3, warning 4, info 6, debug and trace 7.
pub fn priority(level: &Level) -> u8 {
    match *level {
        Level::ERROR => 3,
        Level::WARN => 4,
        Level::INFO => 6,
        _ => 7,
    }
}

/// An event format that puts the level's `<N>` priority before what `inner` writes.
pub struct Priority<F>(pub F);

impl<S, N, F> FormatEvent<S, N> for Priority<F>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        write!(writer, "<{}>", priority(event.metadata().level()))?;
        self.0.format_event(ctx, writer, event)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests may panic

    use std::sync::{Arc, Mutex};

    use tracing_subscriber::fmt::MakeWriter;

    use super::*;

    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Buf {
        type Writer = Buf;
        fn make_writer(&'a self) -> Buf {
            self.clone()
        }
    }

    #[test]
    fn journal_lines_carry_the_priority_and_no_timestamp() {
        let buf = Buf::default();
        let format = tracing_subscriber::fmt::format()
            .without_time()
            .with_target(false)
            .with_ansi(false);
        let subscriber = tracing_subscriber::fmt()
            .with_writer(buf.clone())
            .with_max_level(Level::DEBUG)
            .event_format(Priority(format))
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            tracing::error!("migration of 100 failed");
            tracing::warn!(node = "pve2", "node reports CPU use past its CPUs");
            tracing::info!("round done");
            tracing::debug!("detail");
        });
        let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        assert_eq!(
            text.lines().collect::<Vec<_>>(),
            [
                "<3>ERROR migration of 100 failed",
                "<4> WARN node reports CPU use past its CPUs node=\"pve2\"",
                "<6> INFO round done",
                "<7>DEBUG detail",
            ]
        );
    }

    #[test]
    fn only_the_stream_systemd_names_is_the_journal() {
        assert!(names_stream("8:1234", 8, 1234));
        assert!(!names_stream("8:1234", 8, 1235));
        assert!(!names_stream("", 8, 1234));
        assert!(!names_stream("8-1234", 8, 1234));
        // This test's stderr is not a journal stream whatever the environment says.
        assert!(!names_stream("0:0", 8, 1234));
    }
}

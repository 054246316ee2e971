//! The exec transport: the program reads one JSON request on stdin and writes one JSON answer on
//! stdout. No shell is involved; a child that outlives its timeout or writes more than the cap is
//! killed.

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use flxp_core::plugin::CallError;

/// How much of stderr an error message quotes.
const STDERR_QUOTE: u64 = 4096;

/// Runs the program with `input` on stdin; its stdout, or why not.
pub fn call(
    argv: &[String],
    input: &[u8],
    timeout: Duration,
    max: u64,
) -> Result<Vec<u8>, CallError> {
    let (program, args) = argv
        .split_first()
        .ok_or_else(|| CallError("command is empty".into()))?;
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| CallError(format!("cannot start {program}: {e}")))?;
    let deadline = Instant::now() + timeout;
    // Writing and reading on their own threads: a plugin that answers before reading all its
    // input, or never reads, must not block flxp.
    if let Some(mut stdin) = child.stdin.take() {
        let input = input.to_vec();
        std::thread::spawn(move || {
            // A plugin that exits without reading closes the pipe: not an error by itself.
            let _ = stdin.write_all(&input);
        });
    }
    let (tx, rx) = mpsc::channel();
    if let Some(stdout) = child.stdout.take() {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let read = stdout.take(max.saturating_add(1)).read_to_end(&mut buf);
            let _ = tx.send(read.map(|_| buf));
        });
    }
    let (etx, erx) = mpsc::channel();
    if let Some(stderr) = child.stderr.take() {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = stderr.take(STDERR_QUOTE).read_to_end(&mut buf);
            let _ = etx.send(buf);
        });
    }
    let mut out: Option<Vec<u8>> = None;
    let status = loop {
        if out.is_none() {
            if let Ok(read) = rx.try_recv() {
                let buf = read.map_err(|e| CallError(format!("cannot read its answer: {e}")))?;
                if buf.len() as u64 > max {
                    kill(&mut child);
                    return Err(CallError(format!("answer is larger than {max} bytes")));
                }
                out = Some(buf);
            }
        }
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => {
                kill(&mut child);
                return Err(CallError(format!(
                    "timed out after {} ms (killed)",
                    timeout.as_millis()
                )));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(2)),
            Err(e) => {
                kill(&mut child);
                return Err(CallError(format!("cannot wait for it: {e}")));
            }
        }
    };
    let out = match out {
        Some(o) => o,
        // The child exited; its stdout closes unless it left a process holding it.
        None => match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(read) => read.map_err(|e| CallError(format!("cannot read its answer: {e}")))?,
            Err(_) => {
                return Err(CallError(format!(
                    "timed out after {} ms: its output stayed open after it exited",
                    timeout.as_millis()
                )));
            }
        },
    };
    if out.len() as u64 > max {
        return Err(CallError(format!("answer is larger than {max} bytes")));
    }
    if !status.success() {
        let err = erx
            .recv_timeout(Duration::from_millis(100))
            .unwrap_or_default();
        let err = String::from_utf8_lossy(&err);
        let last = err
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        let said = if last.is_empty() {
            String::new()
        } else {
            format!(": {}", last.trim())
        };
        return Err(CallError(format!("exited with {status}{said}")));
    }
    Ok(out)
}

fn kill(child: &mut std::process::Child) {
    let _ = child.kill();
    let _ = child.wait();
}

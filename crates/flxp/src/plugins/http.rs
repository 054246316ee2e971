//! The HTTP transport: the request is POSTed as JSON to the URL, the answer is the response body
//! (status 2xx).
//!
//! Every call goes through one worker: a thread of its own with a small runtime and one HTTP
//! client, started on first use, so that calls work from any blocking caller, inside or outside
//! an async runtime, and reuse the client's connections instead of building a thread, a runtime
//! and a client (and opening a connection) per call.

use std::sync::OnceLock;
use std::sync::mpsc::{SyncSender, sync_channel};
use std::time::Duration;

use flxp_core::plugin::CallError;
use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};

/// One call handed to the worker, with where its answer goes.
struct Job {
    url: String,
    body: Vec<u8>,
    timeout: Duration,
    max: u64,
    answer: SyncSender<Result<Vec<u8>, CallError>>,
}

/// The worker, or why it could not start (kept: a second try would fail the same way).
static WORKER: OnceLock<Result<UnboundedSender<Job>, String>> = OnceLock::new();

/// Starts the worker thread: its runtime answers each job in a task of its own, so calls from
/// several callers run side by side.
fn start() -> Result<UnboundedSender<Job>, String> {
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| format!("cannot set up HTTP: {e}"))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a runtime: {e}"))?;
    let (jobs, mut queue) = unbounded_channel::<Job>();
    std::thread::Builder::new()
        .name("flxp-plugin-http".into())
        .spawn(move || {
            runtime.block_on(async move {
                while let Some(job) = queue.recv().await {
                    tokio::spawn(answer(client.clone(), job));
                }
            });
        })
        .map_err(|e| format!("cannot start the HTTP thread: {e}"))?;
    Ok(jobs)
}

/// Carries one job out within its timeout and sends the result back.
async fn answer(client: reqwest::Client, job: Job) {
    let Job {
        url,
        body,
        timeout,
        max,
        answer,
    } = job;
    let result = match tokio::time::timeout(timeout, post(&client, &url, body, timeout, max)).await
    {
        Ok(r) => r,
        Err(_) => Err(CallError(format!(
            "timed out after {} ms",
            timeout.as_millis()
        ))),
    };
    // The caller may have given up (it panicked); nobody is left to tell.
    let _ = answer.send(result);
}

/// POSTs `body` to `url`; the answer's bytes, or why not. Blocks the calling thread until the
/// worker answers.
pub fn call(url: &str, body: Vec<u8>, timeout: Duration, max: u64) -> Result<Vec<u8>, CallError> {
    let jobs = WORKER
        .get_or_init(start)
        .as_ref()
        .map_err(|e| CallError(e.clone()))?;
    let (answer, answered) = sync_channel(1);
    let job = Job {
        url: url.to_owned(),
        body,
        timeout,
        max,
        answer,
    };
    jobs.send(job)
        .map_err(|_| CallError("the HTTP thread has stopped".into()))?;
    answered
        .recv()
        .unwrap_or_else(|_| Err(CallError("the HTTP call panicked".into())))
}

async fn post(
    client: &reqwest::Client,
    url: &str,
    body: Vec<u8>,
    timeout: Duration,
    max: u64,
) -> Result<Vec<u8>, CallError> {
    let mut resp = client
        .post(url)
        .timeout(timeout)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body)
        .send()
        .await
        .map_err(|e| {
            CallError(format!(
                "POST {url} failed: {}",
                flxp_engine::error_chain(&e)
            ))
        })?;
    let status = resp.status();
    if resp.content_length().is_some_and(|l| l > max) {
        return Err(CallError(format!("answer is larger than {max} bytes")));
    }
    let mut out = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(|e| {
        CallError(format!(
            "reading the answer failed: {}",
            flxp_engine::error_chain(&e)
        ))
    })? {
        out.extend_from_slice(&chunk);
        if out.len() as u64 > max {
            return Err(CallError(format!("answer is larger than {max} bytes")));
        }
    }
    if !status.is_success() {
        let text = String::from_utf8_lossy(&out);
        let first: String = text.chars().take(200).collect();
        return Err(CallError(format!("POST {url} answered {status}: {first}")));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    // Tests may panic: unwrapping is how they fail.
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    use super::*;

    /// Answers every request on a connection with `{"ok":true}`, keeping the connection open.
    async fn keep_alive(mut stream: TcpStream) {
        let mut buf = Vec::new();
        loop {
            let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                let mut chunk = [0; 1024];
                match stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
                continue;
            };
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse().unwrap());
            while buf.len() < end + 4 + length {
                let mut chunk = [0; 1024];
                match stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
            buf.drain(..end + 4 + length);
            let reply = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 11\r\n\r\n{\"ok\":true}";
            if stream.write_all(reply.as_bytes()).await.is_err() {
                return;
            }
        }
    }

    #[test]
    fn calls_share_one_client_and_its_connection() {
        let server = tokio::runtime::Runtime::new().unwrap();
        let listener = server.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
        let url = format!("http://{}/filter", listener.local_addr().unwrap());
        let accepted = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&accepted);
        server.spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                counted.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(keep_alive(stream));
            }
        });
        for _ in 0..3 {
            let answer = call(&url, b"{}".to_vec(), Duration::from_secs(30), 1024).unwrap();
            assert_eq!(answer, b"{\"ok\":true}");
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 1);
    }
}

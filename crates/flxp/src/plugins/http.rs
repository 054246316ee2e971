//! The HTTP transport: the request is POSTed as JSON to the URL, the answer is the response body
//! (status 2xx). Run on a thread of its own with its own small runtime, so that it works from any
//! blocking caller, inside or outside an async runtime.

use std::time::Duration;

use flxp_core::plugin::CallError;

/// POSTs `body` to `url`; the answer's bytes, or why not.
pub fn call(url: &str, body: Vec<u8>, timeout: Duration, max: u64) -> Result<Vec<u8>, CallError> {
    let url = url.to_owned();
    let worker = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| CallError(format!("cannot start a runtime: {e}")))?;
        runtime.block_on(async {
            match tokio::time::timeout(timeout, post(&url, body, timeout, max)).await {
                Ok(r) => r,
                Err(_) => Err(CallError(format!(
                    "timed out after {} ms",
                    timeout.as_millis()
                ))),
            }
        })
    });
    worker
        .join()
        .unwrap_or_else(|_| Err(CallError("the HTTP call panicked".into())))
}

async fn post(url: &str, body: Vec<u8>, timeout: Duration, max: u64) -> Result<Vec<u8>, CallError> {
    let client = reqwest::Client::builder()
        .timeout(timeout)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| CallError(format!("cannot set up HTTP: {e}")))?;
    let mut resp = client
        .post(url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body)
        .send()
        .await
        .map_err(|e| CallError(format!("POST {url} failed: {}", chain(&e))))?;
    let status = resp.status();
    if resp.content_length().is_some_and(|l| l > max) {
        return Err(CallError(format!("answer is larger than {max} bytes")));
    }
    let mut out = Vec::new();
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| CallError(format!("reading the answer failed: {}", chain(&e))))?
    {
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

fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

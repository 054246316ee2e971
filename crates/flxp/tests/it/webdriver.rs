//! Just enough of W3C WebDriver (JSON over HTTP, <https://www.w3.org/TR/webdriver2/>) to drive
//! Debian's headless Chromium through `chromedriver` from the dashboard tests: a session, going
//! to a URL, finding, clicking and typing into elements, running a script, and screenshots.
//! The test already depends on `reqwest`; the few commands used here did not justify a full
//! WebDriver client crate and its dependency tree.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The script that installs Chromium and chromedriver when they are missing.
pub const DEPS_SCRIPT: &str = "scripts/browser-deps.sh";
const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// The WebDriver element reference key.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// A chromedriver process and one browser session in it.
pub struct Browser {
    driver: Child,
    base: String,
    http: reqwest::Client,
    _profile: tempfile::TempDir,
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Only the driver this test started (it ends its browser with it).
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// Fails (never skips) when the browser is not installed, naming the script that installs it.
pub fn require_browser() {
    for bin in [CHROMIUM, CHROMEDRIVER] {
        assert!(
            Path::new(bin).exists(),
            "{bin} is missing: the dashboard's browser tests need Debian's chromium and \
             chromium-driver; install them with `bash {DEPS_SCRIPT}` (as root or with sudo)"
        );
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap()
}

impl Browser {
    /// Starts chromedriver and a headless Chromium with a fresh profile, `width`×`height`.
    pub async fn start(width: u32, height: u32) -> Self {
        require_browser();
        let port = free_port();
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let profile = tempfile::tempdir().unwrap();
        let mut b = Self {
            driver,
            base: format!("http://127.0.0.1:{port}"),
            http: reqwest::Client::new(),
            _profile: profile,
        };
        let t = Instant::now();
        loop {
            let ready = b
                .http
                .get(format!("{}/status", b.base))
                .send()
                .await
                .ok()
                .map(|r| r.status().is_success());
            if ready == Some(true) {
                break;
            }
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "chromedriver did not start"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let args = vec![
            "--headless".to_owned(),
            "--no-sandbox".to_owned(),
            "--disable-gpu".to_owned(),
            "--disable-quic".to_owned(),
            "--no-first-run".to_owned(),
            "--disable-background-networking".to_owned(),
            "--disable-component-update".to_owned(),
            "--disable-sync".to_owned(),
            "--disable-dev-shm-usage".to_owned(),
            format!("--window-size={width},{height}"),
            format!("--user-data-dir={}", b._profile.path().display()),
        ];
        let caps = json!({ "capabilities": { "alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": { "binary": CHROMIUM, "args": args },
        }}});
        let v = b.raw("POST", "/session", caps).await;
        let id = v["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no WebDriver session: {v}"))
            .to_owned();
        b.base = format!("{}/session/{id}", b.base);
        b
    }

    async fn raw(&self, method: &str, path: &str, body: Value) -> Value {
        let url = format!("{}{path}", self.base);
        let req = match method {
            "GET" => self.http.get(url),
            "DELETE" => self.http.delete(url),
            _ => self.http.post(url).json(&body),
        };
        let resp = req.send().await.unwrap();
        let v: Value = resp.json().await.unwrap();
        v["value"].clone()
    }

    async fn cmd(&self, method: &str, path: &str, body: Value) -> Value {
        let v = self.raw(method, path, body).await;
        if let Some(e) = v.get("error") {
            panic!("WebDriver {method} {path}: {e}: {}", v["message"]);
        }
        v
    }

    /// Loads a URL.
    pub async fn goto(&self, url: &str) {
        self.cmd("POST", "/url", json!({ "url": url })).await;
    }

    /// Runs a script (its `return` value comes back).
    pub async fn js(&self, script: &str, args: Value) -> Value {
        self.cmd(
            "POST",
            "/execute/sync",
            json!({ "script": script, "args": args }),
        )
        .await
    }

    /// Waits until a script returns something other than null/false/"", at most `secs`.
    pub async fn wait(&self, what: &str, script: &str, secs: u64) -> Value {
        let t = Instant::now();
        loop {
            let v = self.js(script, json!([])).await;
            if !(v.is_null() || v == json!(false) || v == json!("")) {
                return v;
            }
            if t.elapsed() > Duration::from_secs(secs) {
                let text = self.js("return document.body.innerText", json!([])).await;
                panic!("timed out waiting for {what}; the page says:\n{text}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The element a CSS selector finds first.
    pub async fn find(&self, css: &str) -> String {
        let v = self
            .cmd(
                "POST",
                "/element",
                json!({ "using": "css selector", "value": css }),
            )
            .await;
        v[ELEMENT]
            .as_str()
            .unwrap_or_else(|| panic!("no element {css}: {v}"))
            .to_owned()
    }

    /// Clicks what a CSS selector finds.
    pub async fn click(&self, css: &str) {
        let id = self.find(css).await;
        self.cmd("POST", &format!("/element/{id}/click"), json!({}))
            .await;
    }

    /// Types into what a CSS selector finds, after clearing it.
    pub async fn type_into(&self, css: &str, text: &str) {
        let id = self.find(css).await;
        self.cmd("POST", &format!("/element/{id}/clear"), json!({}))
            .await;
        self.cmd(
            "POST",
            &format!("/element/{id}/value"),
            json!({ "text": text }),
        )
        .await;
    }

    /// Emulates `prefers-color-scheme` (Chrome DevTools protocol through chromedriver).
    pub async fn color_scheme(&self, scheme: &str) {
        self.cmd(
            "POST",
            "/goog/cdp/execute",
            json!({ "cmd": "Emulation.setEmulatedMedia", "params": {
                "features": [{ "name": "prefers-color-scheme", "value": scheme }] } }),
        )
        .await;
    }

    /// A PNG of the viewport.
    pub async fn screenshot(&self) -> Vec<u8> {
        use base64::Engine;
        let v = self.cmd("GET", "/screenshot", json!({})).await;
        base64::engine::general_purpose::STANDARD
            .decode(v.as_str().unwrap())
            .unwrap()
    }
}

//! Calling the configured `[[plugin]]`s: a child process (JSON on stdin, JSON on stdout, no shell)
//! or an HTTP(S) POST, each with its timeout and answer-size cap. The core builds requests and
//! judges answers; this module only carries bytes, and is called from blocking code (the CLI, or
//! the service's blocking pool), never from an async worker.

mod exec;
mod http;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use flxp_core::plugin::{CallError, PluginHost, Plugins, Request};

use crate::config::{Config, PluginSection};

/// Where a plugin is reached.
#[derive(Debug, Clone)]
enum Target {
    /// A program and its arguments.
    Exec(Vec<String>),
    /// An `http://` or `https://` URL to POST to.
    Http(String),
}

/// How one plugin is called.
#[derive(Debug, Clone)]
struct Transport {
    target: Target,
    timeout: Duration,
    max_answer_bytes: u64,
}

/// The configured plugins' transports, by name.
#[derive(Debug, Default)]
pub struct Host {
    transports: BTreeMap<String, Transport>,
}

impl Host {
    /// The transports of the config's plugins (already validated by the config check).
    pub fn from_config(plugins: &[PluginSection]) -> Self {
        let transports = plugins
            .iter()
            .map(|p| {
                let target = match (&p.command, &p.url) {
                    (Some(argv), _) => Target::Exec(argv.clone()),
                    (None, Some(url)) => Target::Http(url.clone()),
                    (None, None) => Target::Exec(Vec::new()),
                };
                let t = Transport {
                    target,
                    timeout: Duration::from_millis(p.timeout_ms),
                    max_answer_bytes: p.max_answer_bytes,
                };
                (p.name.clone(), t)
            })
            .collect();
        Self { transports }
    }
}

impl PluginHost for Host {
    fn call(&self, plugin: &str, request: &Request) -> Result<Vec<u8>, CallError> {
        let t = self
            .transports
            .get(plugin)
            .ok_or_else(|| CallError(format!("plugin {plugin} is not configured")))?;
        let body = serde_json::to_vec(request)
            .map_err(|e| CallError(format!("cannot write the request: {e}")))?;
        let started = std::time::Instant::now();
        let run = || match &t.target {
            Target::Exec(argv) => exec::call(argv, &body, t.timeout, t.max_answer_bytes),
            Target::Http(url) => http::call(url, body.clone(), t.timeout, t.max_answer_bytes),
        };
        // Callers decide on the blocking pool; one that decides on an async worker (createVM's
        // placement) hands the worker's other tasks to another thread while it waits.
        let answer = match tokio::runtime::Handle::try_current() {
            Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(run)
            }
            _ => run(),
        };
        let ms = started.elapsed().as_millis();
        match &answer {
            Ok(a) => tracing::debug!(plugin, ms, bytes = a.len(), "plugin answered"),
            // Logged as a warning once, in `failed`, with the answers the core refuses.
            Err(e) => tracing::debug!(plugin, ms, error = %e, "plugin call failed"),
        }
        answer
    }

    fn failed(&self, plugin: &str, error: &CallError) {
        tracing::warn!(plugin, error = %error, "plugin failed");
    }
}

/// The config's plugins for the core, called through a [`Host`].
pub fn plugins(config: &Config) -> Plugins {
    let specs = config.plugin.iter().map(PluginSection::spec).collect();
    Plugins::new(specs, Arc::new(Host::from_config(&config.plugin)))
}

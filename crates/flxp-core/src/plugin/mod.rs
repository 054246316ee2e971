//! External plugins: filters, scorers and balancing methods written by admins, in any language.
//!
//! The core never does I/O: it builds a [`Request`], hands it to a [`PluginHost`] (the caller's
//! transport: a child process, an HTTP POST) and checks the answer here, against the request, so
//! that a plugin answering for unknown nodes, of the wrong kind, or with garbage is an error naming
//! the plugin. What an error does is the plugin's [`OnFailure`]: decide without it with a warning,
//! or refuse the decision.

mod answer;
pub mod protocol;

use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use answer::{parse_balance, parse_filter, parse_score};
pub use protocol::{
    BalanceAnswer, CallError, FilterAnswer, GuestFigures, NodeVerdict, PROTOCOL_VERSION,
    PluginKind, PluginNodeFigures, PluginNodeScore, Proposal, Request, ScoreAnswer,
};

/// What a failed call does to the decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum OnFailure {
    /// Decide without the plugin and say so in the decision's warnings.
    #[default]
    Ignore,
    /// Refuse the decision with the plugin's error.
    Fail,
}

/// A configured plugin as the core knows it (the transport is the host's business).
#[derive(Debug, Clone, PartialEq)]
pub struct PluginSpec {
    /// Its name, used in policies, `--method` and explanations.
    pub name: Arc<str>,
    /// What it does.
    pub kind: PluginKind,
    /// What a failed call does.
    pub on_failure: OnFailure,
}

impl PluginSpec {
    /// A spec of a plugin named `name`.
    pub fn new(name: &str, kind: PluginKind, on_failure: OnFailure) -> Self {
        Self {
            name: name.into(),
            kind,
            on_failure,
        }
    }
}

/// Carries one request to a plugin and brings back its raw answer; implemented by the caller's
/// transports. Called from blocking code only: it may take up to the plugin's timeout.
pub trait PluginHost: Send + Sync {
    /// The answer's bytes, or why there is none (timeout, crash, too large, unreachable).
    fn call(&self, plugin: &str, request: &Request) -> Result<Vec<u8>, CallError>;

    /// Told of every failed call, the transport's failures and bad answers alike, once each, so
    /// that the host can log it; by default nothing.
    fn failed(&self, _plugin: &str, _error: &CallError) {}
}

/// The configured plugins and the host that calls them.
#[derive(Clone, Default)]
pub struct Plugins {
    specs: Vec<PluginSpec>,
    host: Option<Arc<dyn PluginHost>>,
}

impl std::fmt::Debug for Plugins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugins")
            .field("specs", &self.specs)
            .finish_non_exhaustive()
    }
}

impl Plugins {
    /// These plugins, called through `host`.
    pub fn new(specs: Vec<PluginSpec>, host: Arc<dyn PluginHost>) -> Self {
        Self {
            specs,
            host: Some(host),
        }
    }

    /// Every plugin, in config order.
    pub fn specs(&self) -> &[PluginSpec] {
        &self.specs
    }

    /// The plugins of one kind, in config order.
    pub fn of_kind(&self, kind: PluginKind) -> impl Iterator<Item = &PluginSpec> {
        self.specs.iter().filter(move |s| s.kind == kind)
    }

    /// The plugin of a name.
    pub fn get(&self, name: &str) -> Option<&PluginSpec> {
        self.specs.iter().find(|s| &*s.name == name)
    }

    /// Tells the host a call failed (a transport failure or an answer flxp refused).
    pub fn failed(&self, plugin: &PluginSpec, error: &CallError) {
        if let Some(host) = &self.host {
            host.failed(&plugin.name, error);
        }
    }

    /// Calls a plugin and returns its raw answer.
    pub fn call(&self, plugin: &PluginSpec, request: &Request) -> Result<Vec<u8>, CallError> {
        match &self.host {
            Some(host) => host.call(&plugin.name, request),
            None => Err(CallError("no plugin transport is set up".into())),
        }
    }
}

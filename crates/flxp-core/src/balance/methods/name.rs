//! [`MethodName`]: a method name checked against the registry once, where it is read, and
//! carrying the method it names, so planning needs no registry.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::plugin::PluginMethod;
use super::registry::{MethodError, Registry};
use super::{BalanceMethod, PlanInput};
use crate::Result;
use crate::balance::{BalanceOptions, Plan};

thread_local! {
    /// Balance plugin names accepted while a config file is read ([`MethodName::with_plugins`]).
    static PLUGINS: std::cell::RefCell<Vec<&'static str>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The name of a registered balancing method: one [`Registry::builtin`] holds, or a balance plugin.
///
/// Only [`Registry::parse`] makes one from outside input, so holding one means the name was
/// registered; serde and [`FromStr`] parse against [`Registry::builtin`]. It carries the method
/// it names, so options plan with it wherever they go (the placement pipeline holds no methods).
/// Two names are equal, hash and order by their text.
#[derive(Clone, Copy)]
pub struct MethodName(Named);

/// What a [`MethodName`] names.
#[derive(Clone, Copy)]
enum Named {
    /// A method object: a built-in one, an embedder's or a registered balance plugin.
    Method(&'static dyn BalanceMethod),
    /// A balance plugin read from a config file, called through the placer's plugins.
    Plugin(&'static str),
}

impl MethodName {
    /// A built-in method's name; a registry test checks each such constant is registered.
    pub(crate) const fn builtin(method: &'static dyn BalanceMethod) -> Self {
        Self(Named::Method(method))
    }

    /// The name of a method the registry holds.
    pub(super) fn registered(method: &'static dyn BalanceMethod) -> Self {
        Self(Named::Method(method))
    }

    /// The name of a balance plugin (its spec's name).
    pub(super) fn plugin(name: &'static str) -> Self {
        Self(Named::Plugin(name))
    }

    /// One line for users (CLI help, GraphQL, the GUIDE).
    pub fn description(self) -> &'static str {
        match self.0 {
            Named::Method(m) => m.description(),
            Named::Plugin(_) => super::plugin::DESCRIPTION,
        }
    }

    /// Whether the method balances on [`BalanceOptions::usage`] (see
    /// [`BalanceMethod::reads_usage`]).
    pub fn reads_usage(self) -> bool {
        match self.0 {
            Named::Method(m) => m.reads_usage(),
            Named::Plugin(name) => PluginMethod { name }.reads_usage(),
        }
    }

    /// Plans with the named method; `options` are already validated.
    pub(super) fn plan(self, input: &PlanInput<'_>, options: &BalanceOptions) -> Result<Plan> {
        match self.0 {
            Named::Method(m) => m.plan(input, options),
            Named::Plugin(name) => PluginMethod { name }.plan(input, options),
        }
    }

    /// Parses a name against the built-in registry, plus the plugin methods of an enclosing
    /// [`MethodName::with_plugins`].
    pub fn parse(name: &str) -> Result<Self, MethodError> {
        let plugin = PLUGINS.with(|p| p.borrow().iter().copied().find(|p| *p == name));
        match plugin {
            Some(p) => Ok(Self::plugin(p)),
            None => Registry::builtin().parse(name),
        }
    }

    /// Runs `f` (reading a config file) with these balance plugins' names accepted by
    /// [`MethodName::parse`] and serde on this thread, besides the built-in methods.
    pub fn with_plugins<R>(names: &[&str], f: impl FnOnce() -> R) -> R {
        let leaked: Vec<&'static str> = names
            .iter()
            // A few names per config load, like the plugin specs themselves.
            .map(|n| &*Box::leak((*n).to_owned().into_boxed_str()))
            .collect();
        let before = PLUGINS.with(|p| std::mem::replace(&mut *p.borrow_mut(), leaked));
        let out = f();
        PLUGINS.with(|p| *p.borrow_mut() = before);
        out
    }

    /// The name used in options and output.
    pub fn as_str(self) -> &'static str {
        match self.0 {
            Named::Method(m) => m.name(),
            Named::Plugin(name) => name,
        }
    }
}

impl fmt::Debug for MethodName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("MethodName").field(&self.as_str()).finish()
    }
}

impl PartialEq for MethodName {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for MethodName {}

impl std::hash::Hash for MethodName {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl PartialOrd for MethodName {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for MethodName {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl Default for MethodName {
    fn default() -> Self {
        super::flxp::NAME
    }
}

impl fmt::Display for MethodName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for MethodName {
    type Err = MethodError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl PartialEq<str> for MethodName {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for MethodName {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl Serialize for MethodName {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for MethodName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        Self::parse(&name).map_err(serde::de::Error::custom)
    }
}

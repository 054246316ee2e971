//! [`MethodName`]: a method name checked against the registry once, where it is read, and
//! carrying the method it names, so planning needs no registry.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::plugin;
use super::registry::{MethodError, Registry};
use super::{BalanceMethod, PlanInput};
use crate::Result;
use crate::balance::{BalanceOptions, Plan};

/// The name of a registered balancing method: one [`Registry::builtin`] holds, or a balance plugin.
///
/// Only a [`Registry`] makes one from outside input ([`Registry::parse`]), so holding one means
/// the name was registered; serde and [`FromStr`] parse against [`Registry::builtin`] (a config
/// naming balance plugins reads the name as text and resolves it against its own registry). It
/// carries the method it names, so options plan with it wherever they go (the placement pipeline
/// holds no methods). Two names are equal, hash and order by their text.
#[derive(Clone)]
pub struct MethodName(Named);

/// What a [`MethodName`] names.
#[derive(Clone)]
enum Named {
    /// A method object: a built-in one or an embedder's.
    Method(&'static dyn BalanceMethod),
    /// A configured balance plugin, called through the placer's plugins.
    Plugin(Arc<str>),
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
    pub(super) fn plugin(name: Arc<str>) -> Self {
        Self(Named::Plugin(name))
    }

    /// One line for users (CLI help, GraphQL, the GUIDE).
    pub fn description(&self) -> &'static str {
        match &self.0 {
            Named::Method(m) => m.description(),
            Named::Plugin(_) => plugin::DESCRIPTION,
        }
    }

    /// Whether the method balances on [`BalanceOptions::usage`] (see
    /// [`BalanceMethod::reads_usage`]).
    pub fn reads_usage(&self) -> bool {
        match &self.0 {
            Named::Method(m) => m.reads_usage(),
            Named::Plugin(_) => plugin::READS_USAGE,
        }
    }

    /// Plans with the named method; `options` are already validated.
    pub(super) fn plan(&self, input: &PlanInput<'_>, options: &BalanceOptions) -> Result<Plan> {
        match &self.0 {
            Named::Method(m) => m.plan(input, options),
            Named::Plugin(name) => plugin::plan(name, input, options),
        }
    }

    /// Parses a name against the built-in registry ([`Registry::parse`] parses against another).
    pub fn parse(name: &str) -> Result<Self, MethodError> {
        Registry::builtin().parse(name)
    }

    /// The name used in options and output.
    pub fn as_str(&self) -> &str {
        match &self.0 {
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

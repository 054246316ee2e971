//! [`MethodName`]: a method name checked against the registry once, where it is read.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::registry::{MethodError, Registry};

thread_local! {
    /// Balance plugin names accepted while a config file is read ([`MethodName::with_plugins`]).
    static PLUGINS: std::cell::RefCell<Vec<&'static str>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The name of a registered balancing method: one [`Registry::builtin`] holds, or a balance plugin.
///
/// Only [`Registry::parse`] makes one from outside input, so holding one means the name was
/// registered; serde and [`FromStr`] parse against [`Registry::builtin`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MethodName(&'static str);

impl MethodName {
    /// A built-in method's name; a registry test checks each such constant is registered.
    pub(crate) const fn builtin(name: &'static str) -> Self {
        Self(name)
    }

    /// Wraps the name of a method the registry holds.
    pub(super) fn registered(name: &'static str) -> Self {
        Self(name)
    }

    /// Parses a name against the built-in registry, plus the plugin methods of an enclosing
    /// [`MethodName::with_plugins`].
    pub fn parse(name: &str) -> Result<Self, MethodError> {
        let plugin = PLUGINS.with(|p| p.borrow().iter().copied().find(|p| *p == name));
        match plugin {
            Some(p) => Ok(Self(p)),
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
        self.0
    }
}

impl Default for MethodName {
    fn default() -> Self {
        super::flxp::NAME
    }
}

impl fmt::Display for MethodName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
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
        self.0 == other
    }
}

impl PartialEq<&str> for MethodName {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl Serialize for MethodName {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.0)
    }
}

impl<'de> Deserialize<'de> for MethodName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        Self::parse(&name).map_err(serde::de::Error::custom)
    }
}

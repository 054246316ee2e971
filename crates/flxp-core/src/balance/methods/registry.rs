//! [`Registry`]: the balancing methods by name, duplicates refused.

use std::sync::{Arc, LazyLock};

use crate::Result;

use super::super::options::BalanceOptions;
use super::super::plan::{Plan, PlanSource};
use super::{BUILTIN, BalanceMethod, MethodName, PlanInput};
use crate::plugin::{PluginKind, PluginSpec, Plugins};

/// A method name that is not registered, or registered twice.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MethodError {
    /// No method has this name.
    #[error("unknown balancing method {name:?} (known: {known})")]
    Unknown {
        /// The name asked for.
        name: String,
        /// The registered names, comma-separated.
        known: String,
    },
    /// Two methods share a name.
    #[error("balancing method {0:?} is registered twice")]
    Duplicate(String),
}

impl From<MethodError> for crate::Error {
    fn from(e: MethodError) -> Self {
        crate::Error::Option {
            name: "method".into(),
            message: e.to_string(),
        }
    }
}

/// Balancing methods by name, in registration order: a value, built once per config load (the
/// built-in methods, an embedder's, the config's balance plugins).
#[derive(Clone)]
pub struct Registry {
    methods: Vec<MethodName>,
}

static BUILTIN_REGISTRY: LazyLock<Registry> = LazyLock::new(|| Registry {
    // The list is checked for duplicates by a test.
    methods: BUILTIN
        .iter()
        .copied()
        .map(MethodName::registered)
        .collect(),
});

impl Registry {
    /// A registry of these methods; two with one name are refused.
    pub fn new(
        methods: impl IntoIterator<Item = &'static dyn BalanceMethod>,
    ) -> std::result::Result<Self, MethodError> {
        let mut registry = Self {
            methods: Vec::new(),
        };
        for m in methods {
            registry.add(MethodName::registered(m))?;
        }
        Ok(registry)
    }

    /// The built-in methods.
    pub fn builtin() -> &'static Registry {
        &BUILTIN_REGISTRY
    }

    /// This registry plus one method (for embedders and tests).
    pub fn with(
        &self,
        method: &'static dyn BalanceMethod,
    ) -> std::result::Result<Self, MethodError> {
        let mut registry = Self {
            methods: self.methods.clone(),
        };
        registry.add(MethodName::registered(method))?;
        Ok(registry)
    }

    /// This registry plus a method per balance plugin; a plugin named like one of its methods
    /// is refused, naming the plugin.
    pub fn with_plugins(&self, plugins: &Plugins) -> Result<Self> {
        self.with_specs(plugins.specs())
    }

    /// [`Registry::with_plugins`] from the plugins' specs alone (a config read before any
    /// transport is set up); specs of other kinds are skipped.
    pub fn with_specs<'s>(&self, specs: impl IntoIterator<Item = &'s PluginSpec>) -> Result<Self> {
        let mut methods = self.clone();
        for spec in specs.into_iter().filter(|s| s.kind == PluginKind::Balance) {
            let method = MethodName::plugin(Arc::clone(&spec.name));
            methods.add(method).map_err(|e| crate::Error::Option {
                name: format!("plugin.{}", spec.name),
                message: e.to_string(),
            })?;
        }
        Ok(methods)
    }

    fn add(&mut self, method: MethodName) -> std::result::Result<(), MethodError> {
        if self.get(method.as_str()).is_some() {
            return Err(MethodError::Duplicate(method.as_str().to_owned()));
        }
        self.methods.push(method);
        Ok(())
    }

    /// Every method, in registration order.
    pub fn iter(&self) -> impl Iterator<Item = &MethodName> + '_ {
        self.methods.iter()
    }

    /// Every method's name, in registration order.
    pub fn names(&self) -> impl Iterator<Item = &str> + '_ {
        self.iter().map(MethodName::as_str)
    }

    /// The method of a name.
    pub fn get(&self, name: &str) -> Option<&MethodName> {
        self.iter().find(|m| m.as_str() == name)
    }

    /// Checks a name; the error lists the registered ones.
    pub fn parse(&self, name: &str) -> std::result::Result<MethodName, MethodError> {
        self.get(name).cloned().ok_or_else(|| self.unknown(name))
    }

    fn unknown(&self, name: &str) -> MethodError {
        MethodError::Unknown {
            name: name.to_owned(),
            known: self.names().collect::<Vec<_>>().join(", "),
        }
    }

    /// Validates the options and plans with the method they name; the plan names that method.
    pub fn plan(&self, input: &PlanInput<'_>, options: &BalanceOptions) -> Result<Plan> {
        options.validate()?;
        // A name parsed against another registry is refused, never replaced by a default.
        let name = options.method.as_str();
        self.get(name).ok_or_else(|| self.unknown(name))?;
        run(input, options)
    }
}

/// Validates the options and plans with the method `options.method` carries; the plan names that
/// method.
pub(crate) fn run(input: &PlanInput<'_>, options: &BalanceOptions) -> Result<Plan> {
    options.validate()?;
    let mut plan = options.method.plan(input, options)?;
    // A method that plans through another (an embedder's, wrapping `flxp`) is still the one
    // that made the plan.
    plan.method = PlanSource::Balance(options.method.clone());
    Ok(plan)
}

#[cfg(test)]
mod tests {
    // Tests may panic: unwrapping is how they fail.
    #![allow(clippy::unwrap_used)]

    use super::super::{flxp, pve_bruteforce, pve_topsis};
    use super::*;
    use crate::constraints::Rules;
    use crate::placement::{PlacementOptions, Placer};
    use crate::state::State;
    use crate::testutil::*;

    /// flxp's plan under another name and summary.
    struct Still;

    impl BalanceMethod for Still {
        fn name(&self) -> &'static str {
            "still"
        }

        fn description(&self) -> &'static str {
            "a test method"
        }

        fn plan(&self, input: &PlanInput<'_>, options: &BalanceOptions) -> Result<Plan> {
            let mut plan = flxp::METHOD.plan(input, options)?;
            plan.summary = "still".into();
            Ok(plan)
        }
    }

    static STILL: Still = Still;

    #[test]
    fn a_registry_plans_with_the_named_method_and_refuses_names_it_lacks() {
        let c = ClusterBuilder::new()
            .node(node("a"))
            .node(node("b"))
            .guest(vm(101, "a"))
            .build();
        let rules = Rules::compile(&c);
        let state = State::new(&c);
        let placer = Placer::new(PlacementOptions::default(), Vec::new()).unwrap();
        let input = PlanInput {
            cluster: &c,
            rules: &rules,
            state: &state,
            placer: &placer,
        };
        let registry = Registry::builtin().with(&STILL).unwrap();
        let options = BalanceOptions {
            method: registry.parse("still").unwrap(),
            ..BalanceOptions::default()
        };
        let plan = registry.plan(&input, &options).unwrap();
        assert_eq!(plan.summary, "still");
        // Planned by flxp's method, but for `still`.
        assert_eq!(plan.method, PlanSource::Balance(options.method.clone()));
        assert_eq!(serde_json::to_value(&plan).unwrap()["method"], "still");
        let e = Registry::builtin()
            .plan(&input, &options)
            .unwrap_err()
            .to_string();
        assert!(e.contains(r#"unknown balancing method "still""#), "{e}");
        // The placer holds no methods: the parsed name brings `still` along to the planner.
        let plan = crate::balance::plan(&c, &rules, &state, &placer, &options).unwrap();
        assert_eq!(plan.summary, "still");
        assert_eq!(plan.method, PlanSource::Balance(options.method));
    }

    /// A plugin host that is never reached: these tests only register plugins.
    struct Unreached;

    impl crate::plugin::PluginHost for Unreached {
        fn call(
            &self,
            plugin: &str,
            _: &crate::plugin::Request,
        ) -> std::result::Result<Vec<u8>, crate::plugin::CallError> {
            Err(crate::plugin::CallError(format!("{plugin} is not reached")))
        }
    }

    #[test]
    fn a_registry_takes_balance_plugins_on_top_of_its_methods() {
        use crate::plugin::{OnFailure, PluginKind, PluginSpec, Plugins};
        let plugins = |name: &str| {
            Plugins::new(
                vec![PluginSpec::new(name, PluginKind::Balance, OnFailure::Fail)],
                std::sync::Arc::new(Unreached),
            )
        };
        let base = Registry::builtin().with(&STILL).unwrap();
        let names = |r: &Registry| r.names().collect::<Vec<_>>().join(", ");
        let methods = base.with_plugins(&plugins("rec")).unwrap();
        assert_eq!(
            names(&methods),
            "flxp, pve-bruteforce, pve-topsis, still, rec"
        );
        // A plugin named like a method of the base is refused, naming the plugin.
        let e = Registry::builtin()
            .with(&STILL)
            .unwrap()
            .with_plugins(&plugins("still"))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("plugin.still"), "{e}");
        assert!(
            e.contains(r#"balancing method "still" is registered twice"#),
            "{e}"
        );
        // Without plugins, the built-in methods.
        let plain = Registry::builtin()
            .with_plugins(&Plugins::default())
            .unwrap();
        assert_eq!(names(&plain), "flxp, pve-bruteforce, pve-topsis");
    }

    #[test]
    fn builtin_names_are_unique_documented_and_the_constants_registered() {
        let r = Registry::new(BUILTIN.iter().copied()).unwrap();
        for m in r.iter() {
            assert!(!m.description().is_empty(), "{}", m.as_str());
            assert!(!m.description().contains('\n'), "{}", m.as_str());
        }
        for name in [flxp::NAME, pve_bruteforce::NAME, pve_topsis::NAME] {
            assert_eq!(r.parse(name.as_str()).unwrap(), name);
        }
        assert_eq!(r.names().next(), Some(MethodName::default().as_str()));
        // `--usage` is Proxmox's option: only its methods say they read it.
        let reading: Vec<&str> = r
            .iter()
            .filter(|m| m.reads_usage())
            .map(|m| m.as_str())
            .collect();
        assert_eq!(
            reading,
            [pve_bruteforce::NAME.as_str(), pve_topsis::NAME.as_str()]
        );
        assert!(!STILL.reads_usage());
    }

    #[test]
    fn duplicates_and_unknown_names_are_refused_with_the_known_names() {
        let e = Registry::builtin().with(&flxp::METHOD).err().unwrap();
        assert_eq!(e, MethodError::Duplicate("flxp".into()));
        let e = Registry::builtin()
            .parse("fastest")
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            r#"unknown balancing method "fastest" (known: flxp, pve-bruteforce, pve-topsis)"#
        );
    }
}

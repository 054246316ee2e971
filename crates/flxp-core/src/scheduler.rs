//! [`Scheduler`]: what decides, built once from a config: the placement pipeline (with its
//! policies and plugins) and the balancing methods (with the balance plugins). The command line
//! and the service hold one each and ask it, per call, for the pipeline of the zone they decide
//! for.

use std::sync::Arc;

use crate::Result;
use crate::balance::Registry;
use crate::placement::Placer;
use crate::plugin::Plugins;

/// The placement pipeline and the balancing methods of one config, with its plugins: a plain
/// value, built once and shared (`Arc`) by whatever decides.
#[derive(Clone)]
pub struct Scheduler {
    /// The pipeline, telling plugins no zone.
    placer: Arc<Placer>,
    /// The balancing methods: the given ones and the plugins' balance methods.
    methods: Registry,
}

impl std::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheduler")
            .field("placer", &self.placer)
            .field("methods", &self.methods.names().collect::<Vec<_>>())
            .finish()
    }
}

impl Scheduler {
    /// The scheduler of a pipeline (its plugins included) with `methods` as the balancing
    /// methods, the pipeline's balance plugins added on top; a plugin named like a method is
    /// refused, naming the plugin.
    pub fn new(placer: Placer, methods: &Registry) -> Result<Self> {
        let methods = methods.with_plugins(placer.plugins())?;
        Ok(Self {
            placer: Arc::new(placer.in_zone(None)),
            methods,
        })
    }

    /// The pipeline deciding for `zone` (its plugins are told the zone); `None` for what is
    /// about no zone (a snapshot file).
    pub fn placer(&self, zone: Option<&str>) -> Arc<Placer> {
        match zone {
            None => Arc::clone(&self.placer),
            Some(z) => Arc::new(self.placer.as_ref().clone().in_zone(Some(z.to_owned()))),
        }
    }

    /// The balancing methods names are parsed against.
    pub fn methods(&self) -> &Registry {
        &self.methods
    }

    /// The configured plugins.
    pub fn plugins(&self) -> &Plugins {
        self.placer.plugins()
    }
}

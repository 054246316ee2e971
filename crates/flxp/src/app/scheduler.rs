//! The [`Scheduler`] a config describes, built once per command or service: its placement
//! pipeline (options, policies, plugins) and its balancing methods.

use flxp_core::Scheduler;
use flxp_core::balance::Registry;
use flxp_core::placement::Placer;

use crate::config::Config;

/// The config's scheduler, with `methods` as the balancing methods the config's balance plugins
/// are added to ([`Registry::builtin`] but for an embedder).
pub fn build(config: &Config, methods: &Registry) -> anyhow::Result<Scheduler> {
    let policies = config
        .policies()
        .map_err(|(k, m)| anyhow::anyhow!("{k}: {m}"))?;
    let placer = Placer::with_plugins(
        config.placement_options(),
        policies,
        crate::plugins::plugins(config),
    )?;
    Ok(Scheduler::new(placer, methods)?)
}

/// [`build`] with the built-in balancing methods: what the commands run.
pub fn builtin(config: &Config) -> anyhow::Result<Scheduler> {
    build(config, Registry::builtin())
}

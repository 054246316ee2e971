//! Public-API tests of flxp-core: decisions on concrete clusters and properties on random ones.
#![allow(clippy::unwrap_used)] // tests panic on unexpected errors by design

mod balance;
mod consolidate;
mod crs_scenarios;
mod custom_filter;
mod evacuate;
mod imports;
mod inflight;
mod layers;
mod overfull;
mod placement;
mod placement_properties;
mod plan_properties;
mod plugin_schema;
mod plugins;
mod quality;
mod support;

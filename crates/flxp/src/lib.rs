//! flxp's command line and service: one module per subcommand (`cli`), the config file
//! (`config`), the GraphQL service (`serve`) and the rendering of decisions (`output`).
//!
//! The binary (`main.rs`) only parses and dispatches; this library is what it dispatches to, and
//! what the fuzz targets (`fuzz/`) reach the config parser and the GraphQL schema through.

pub mod app;
pub mod audit;
pub mod cli;
pub mod config;
mod event;
mod input;
pub mod journal;
pub mod notify;
pub mod output;
pub mod plugins;
mod progress;
pub mod serve;
mod signal;
mod size;
mod terminal;

#[cfg(test)]
mod layers;

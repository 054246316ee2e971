//! What the command line (`cli`) and the service (`serve`) share: both call into this layer,
//! never into each other (the `serve` subcommand only starts the service).
//!
//! - [`daemon`]: how plans are carried out and what a daemon round logs;
//! - [`left`]: what an evacuation leaves running;
//! - [`plan`]: what a plan leaves undone;
//! - [`preflight`]: the config checked against the clusters it runs on;
//! - [`scheduler`]: the placement pipeline and balancing methods a config describes;
//! - [`startup`]: what `flxp daemon` and `flxp serve` check before they start.

pub mod daemon;
pub mod left;
pub mod plan;
pub mod preflight;
pub mod scheduler;
pub mod startup;

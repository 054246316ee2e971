//! flxp: dynamic resource scheduling for Proxmox VE.

mod cli;
mod config;
mod output;
mod progress;
mod serve;
mod size;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    init_tracing(args.verbose);
    match cli::run(args) {
        Ok(code) => code,
        Err(err) => {
            // One line with the whole chain, so the cause is never hidden behind context.
            eprintln!("error: {err:#}");
            if err.downcast_ref::<cli::UsageError>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::from(1)
            }
        }
    }
}

/// Logs go to stderr: stdout belongs to `--json`.
fn init_tracing(verbose: u8) {
    use tracing_subscriber::EnvFilter;
    let default = match verbose {
        0 => "info",
        1 => "debug",
        _ => "trace",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .init();
}

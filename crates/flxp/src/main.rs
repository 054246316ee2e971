//! flxp: dynamic resource scheduling for Proxmox VE. Parses, sets up logging, dispatches, and
//! maps the result to an exit code; the rest is in the `flxp` library (`lib.rs`).

use std::process::ExitCode;

use flxp::{cli, output};
use flxp_core::balance::Registry;

/// clap reports an empty `FLXP_CONFIG=` as a missing `--config` value the user never typed: say
/// which variable it is instead.
fn explain_empty_config_env(e: clap::Error) -> clap::Error {
    let empty_env = std::env::var_os("FLXP_CONFIG").is_some_and(|v| v.is_empty());
    let flag_given = std::env::args_os().any(|a| a.to_string_lossy().starts_with("--config"));
    if e.kind() == clap::error::ErrorKind::InvalidValue && empty_env && !flag_given {
        return clap::Error::raw(
            clap::error::ErrorKind::InvalidValue,
            "FLXP_CONFIG is set but empty: unset it, or set it to a config file\n",
        );
    }
    e
}

fn main() -> ExitCode {
    let args = match cli::Cli::try_parse_with(Registry::builtin(), std::env::args_os()) {
        Ok(args) => args,
        Err(e) => {
            let e = explain_empty_config_env(e);
            // `--json` promises one JSON document on stdout, also for a mistyped command line.
            if e.use_stderr() && std::env::args_os().any(|a| a == "--json") {
                let line = output::usage_error_line(&e.render().to_string());
                output::print_json_error(&line, 2);
            }
            e.exit()
        }
    };
    init_tracing(args.verbose);
    let json = args.wants_json();
    match cli::run(args) {
        Ok(code) => code,
        Err(err) => {
            // One line with the whole chain, so the cause is never hidden behind context.
            output::tell(format!("error: {err:#}"));
            let code = if err.downcast_ref::<cli::UsageError>().is_some() {
                2
            } else {
                1
            };
            if json {
                output::print_json_error(&format!("{err:#}"), code);
            }
            ExitCode::from(code)
        }
    }
}

/// Logs go to stderr: stdout belongs to `--json`. Under systemd, stderr is the journal: each line
/// then carries its level's priority and no timestamp, since the journal stamps lines itself.
fn init_tracing(verbose: u8) {
    use tracing_subscriber::EnvFilter;
    let default = match verbose {
        0 => "info",
        1 => "debug",
        _ => "trace",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    if flxp::journal::stderr_is_journal() {
        let format = tracing_subscriber::fmt::format()
            .without_time()
            .with_target(false)
            .with_ansi(false);
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            // As below: a closed stderr must not panic (the setting survives `event_format`).
            .log_internal_errors(false)
            .event_format(flxp::journal::Priority(format))
            .init();
        return;
    }
    // Colours only for a person at a terminal: a journal or a log file gets plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(std::io::stderr)
        .with_target(false)
        // A log reader that went away must not stop a run: tracing-subscriber would report the
        // failed write with `eprintln!`, which panics on the same closed pipe.
        .log_internal_errors(false)
        .init();
}

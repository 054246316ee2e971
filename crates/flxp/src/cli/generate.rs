//! `flxp generate` (hidden): shell completions and man pages from the clap definition, written at
//! package build time so that nothing hand-written drifts from the real command line.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap_complete::Shell;

/// Arguments of `flxp generate`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Directory to write `completions/` and `man/` into.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
}

/// Writes `completions/{flxp.bash,_flxp,flxp.fish}` and `man/flxp*.1` under `--out`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let completions = args.out.join("completions");
    let man = args.out.join("man");
    for dir in [&completions, &man] {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let mut cmd = super::Cli::command_with(flxp_core::balance::Registry::builtin());
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        clap_complete::generate_to(shell, &mut cmd, "flxp", &completions)
            .with_context(|| format!("writing the {shell} completion"))?;
    }
    cmd.build();
    write_pages(&cmd, &man)?;
    Ok(ExitCode::SUCCESS)
}

/// One page per (sub)command, named as clap displays it after `build` (`flxp-config-check.1`),
/// hidden ones left out.
fn write_pages(cmd: &clap::Command, dir: &Path) -> anyhow::Result<()> {
    let name = cmd.get_display_name().unwrap_or(cmd.get_name()).to_owned();
    let mut buf = Vec::new();
    clap_mangen::Man::new(cmd.clone())
        .render(&mut buf)
        .with_context(|| format!("rendering the man page of {name}"))?;
    let file = dir.join(format!("{name}.1"));
    std::fs::write(&file, buf).with_context(|| format!("writing {}", file.display()))?;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        if sub.get_name() == "help" {
            continue;
        }
        write_pages(sub, dir)?;
    }
    Ok(())
}

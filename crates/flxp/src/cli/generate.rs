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

/// Writes `completions/{flxp.bash,_flxp,flxp.fish}`, `man/flxp*.1` and `man/flxp.toml.5` under
/// `--out`.
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
    // `flxp help` is `--help`: no page of its own, and none of the pages names one. A fresh
    // command: generating the completions built `cmd`, help subcommands included.
    let mut cmd = without_help_subcommands(super::Cli::command_with(
        flxp_core::balance::Registry::builtin(),
    ));
    cmd.build();
    write_pages(&cmd, &man)?;
    let file = man.join("flxp.toml.5");
    std::fs::write(&file, crate::config::reference::man_page(super::VERSION))
        .with_context(|| format!("writing {}", file.display()))?;
    Ok(ExitCode::SUCCESS)
}

fn without_help_subcommands(cmd: clap::Command) -> clap::Command {
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_owned())
        .collect();
    let mut cmd = cmd.disable_help_subcommand(true);
    for name in names {
        cmd = cmd.mut_subcommand(name, without_help_subcommands);
    }
    cmd
}

/// One page per (sub)command, named as clap displays it after `build` (`flxp-config-check.1`),
/// hidden ones left out: clap's sections, then EXIT STATUS, ENVIRONMENT, FILES, EXAMPLES and
/// SEE ALSO from [`super::manual`].
fn write_pages(cmd: &clap::Command, dir: &Path) -> anyhow::Result<()> {
    let name = cmd.get_display_name().unwrap_or(cmd.get_name()).to_owned();
    let mut buf = Vec::new();
    let man = clap_mangen::Man::new(cmd.clone());
    let rendered = (|| -> std::io::Result<()> {
        man.render_title(&mut buf)?;
        man.render_name_section(&mut buf)?;
        man.render_synopsis_section(&mut buf)?;
        man.render_description_section(&mut buf)?;
        if cmd.get_arguments().any(|a| !a.is_hide_set()) {
            man.render_options_section(&mut buf)?;
        }
        if cmd.get_subcommands().any(|s| !s.is_hide_set()) {
            man.render_subcommands_section(&mut buf)?;
        }
        Ok(())
    })();
    rendered.with_context(|| format!("rendering the man page of {name}"))?;
    buf.extend_from_slice(super::manual::sections(&name).as_bytes());
    // clap_mangen's VERSION section needs a version, which only the top command has.
    if cmd.get_version().is_some() {
        man.render_version_section(&mut buf)
            .with_context(|| format!("rendering the man page of {name}"))?;
    }
    let file = dir.join(format!("{name}.1"));
    std::fs::write(&file, buf).with_context(|| format!("writing {}", file.display()))?;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_pages(sub, dir)?;
    }
    Ok(())
}

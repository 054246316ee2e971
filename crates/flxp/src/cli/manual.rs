//! What the man pages say beyond clap's options: EXIT STATUS, ENVIRONMENT, FILES, EXAMPLES and
//! SEE ALSO of each command, in roff. `flxp generate` appends them to the pages it renders; a
//! test parses every example with the real command line, so none can go stale.

use std::fmt::Write as _;

use crate::config::reference::roff;

/// One page's own sections.
struct Page {
    /// The page's name, as clap displays the command (`flxp-config-check`).
    name: &'static str,
    /// Exit codes beyond 0 (done), 1 (error) and 2 (usage), with what they mean here.
    exit: &'static [(u8, &'static str)],
    /// Whether the command reads the config file.
    config: bool,
    /// Extra environment variables.
    env: &'static [(&'static str, &'static str)],
    /// Extra files.
    files: &'static [(&'static str, &'static str)],
    /// `(command line, what it does)`.
    examples: &'static [(&'static str, &'static str)],
    /// Other pages.
    see_also: &'static [&'static str],
}

const RUN_EXIT: &[(u8, &str)] = &[(
    3,
    "nothing can satisfy the request: no safe plan, a rule left unmet, or a running guest \
     left on a node being emptied (the last line says which)",
)];
const STATE_DIR: (&str, &str) = (
    "/var/lib/flxp",
    "the working and state directory of the units (StateDirectory=flxp)",
);
const API_TOKEN: (&str, &str) = (
    "FLXP_API_TOKEN",
    "a Bearer token the API accepts besides [api] tokens (role admin)",
);
const JOURNAL: (&str, &str) = (
    "JOURNAL_STREAM",
    "set by systemd when stderr is the journal: log lines then carry their priority (warnings \
     and errors are found by journalctl -p) and no timestamp of their own",
);

/// Every page's sections, in the order of `flxp --help`.
const PAGES: &[Page] = &[
    Page {
        name: "flxp",
        exit: &[(
            3,
            "nothing can satisfy the request (see each command's page)",
        )],
        config: true,
        env: &[],
        files: &[],
        examples: &[
            (
                "flxp setup token --features balance",
                "print the pveum commands that create a least-privilege API token",
            ),
            (
                "flxp config check",
                "check /etc/flxp/flxp.toml and every zone it names",
            ),
            (
                "flxp status --zone eu-central",
                "each node's load, guests and rule violations",
            ),
            (
                "flxp balance --zone eu-central --dry-run",
                "show the migrations that would restore balance",
            ),
        ],
        see_also: &[
            "flxp.toml(5)",
            "flxp-config-check(1)",
            "flxp-setup-token(1)",
            "flxp-serve(1)",
            "flxp-daemon(1)",
        ],
    },
    Page {
        name: "flxp-place",
        exit: &[(
            3,
            "no node fits the VM (with --explain, every node's verdict says why)",
        )],
        config: true,
        env: &[],
        files: &[],
        examples: &[
            (
                "flxp place --zone eu-central --memory 4GiB --cores 2",
                "the best node for a 4 GiB, 2-vCPU VM",
            ),
            (
                "flxp place --from-file snapshot.json --memory 8G --cores 4 --explain",
                "the same against a saved snapshot, with every node's verdict",
            ),
        ],
        see_also: &["flxp(1)", "flxp.toml(5)", "flxp-snapshot(1)"],
    },
    Page {
        name: "flxp-balance",
        exit: RUN_EXIT,
        config: true,
        env: &[],
        files: &[],
        examples: &[
            (
                "flxp balance --zone eu-central --dry-run",
                "plan only: print the migrations, change nothing",
            ),
            (
                "flxp balance --zone eu-central --max-migrations 5",
                "carry out at most five migrations",
            ),
            (
                "flxp balance --from-file snapshot.json --json",
                "plan against a saved snapshot, as JSON",
            ),
        ],
        see_also: &[
            "flxp(1)",
            "flxp.toml(5)",
            "flxp-evacuate(1)",
            "flxp-daemon(1)",
        ],
    },
    Page {
        name: "flxp-evacuate",
        exit: RUN_EXIT,
        config: true,
        env: &[],
        files: &[],
        examples: &[
            (
                "flxp evacuate pve3 --zone eu-central --dry-run",
                "where each guest of pve3 would go",
            ),
            (
                "flxp evacuate pve3 --zone eu-central",
                "empty pve3 and mark it flxp.maintenance; exit 0 means no running guest is left on it",
            ),
        ],
        see_also: &["flxp(1)", "flxp-maintenance(1)", "flxp.toml(5)"],
    },
    Page {
        name: "flxp-consolidate",
        exit: RUN_EXIT,
        config: true,
        env: &[],
        files: &[],
        examples: &[
            (
                "flxp consolidate --zone eu-central --dry-run",
                "which nodes could be freed, limits and headroom kept",
            ),
            (
                "flxp consolidate --zone eu-central --wake pve4",
                "power pve4 back on and rebalance onto it",
            ),
        ],
        see_also: &["flxp(1)", "flxp.toml(5)", "flxp-setup-token(1)"],
    },
    Page {
        name: "flxp-maintenance",
        exit: &[],
        config: true,
        env: &[],
        files: &[],
        examples: &[
            (
                "flxp maintenance pve3 --zone eu-central",
                "mark pve3 (flxp.maintenance in its notes): nothing is placed or balanced onto it",
            ),
            (
                "flxp maintenance pve3 --zone eu-central --off",
                "clear the mark",
            ),
        ],
        see_also: &["flxp(1)", "flxp-evacuate(1)", "flxp-rolling(1)"],
    },
    Page {
        name: "flxp-rolling",
        exit: &[(
            3,
            "a node could not be taken out safely (quorum, room for its guests, a running guest \
             left without --stop-left)",
        )],
        config: true,
        env: &[],
        files: &[],
        examples: &[
            (
                "flxp rolling --zone eu-central --dry-run",
                "the schedule: per node its migrations, bytes and an estimated time",
            ),
            (
                "flxp rolling pve1 pve2 --zone eu-central --hook /usr/local/bin/upgrade-node",
                "empty, upgrade, reboot and refill pve1, then pve2; a rerun continues where it stopped",
            ),
        ],
        see_also: &["flxp(1)", "flxp-maintenance(1)", "flxp-evacuate(1)"],
    },
    Page {
        name: "flxp-status",
        exit: &[],
        config: true,
        env: &[],
        files: &[],
        examples: &[
            (
                "flxp status --zone eu-central",
                "each node's load, guests and rule violations",
            ),
            (
                "flxp status --zone eu-central --json",
                "the same as one JSON document",
            ),
        ],
        see_also: &["flxp(1)", "flxp-snapshot(1)"],
    },
    Page {
        name: "flxp-snapshot",
        exit: &[],
        config: true,
        env: &[],
        files: &[],
        examples: &[(
            "flxp snapshot --zone eu-central",
            "write the zone's snapshot to stdout (redirect it to a file for --from-file)",
        )],
        see_also: &["flxp(1)", "flxp-place(1)", "flxp-balance(1)"],
    },
    Page {
        name: "flxp-daemon",
        exit: &[],
        config: true,
        env: &[JOURNAL],
        files: &[
            STATE_DIR,
            (
                "/usr/lib/systemd/system/flxp-daemon.service",
                "the unit running it as the flxp user",
            ),
        ],
        examples: &[
            (
                "systemctl enable --now flxp-daemon",
                "run it as a service (not together with flxp.service)",
            ),
            (
                "flxp daemon --config /etc/flxp/flxp.toml -v",
                "run it in the foreground with debug logs",
            ),
        ],
        see_also: &["flxp(1)", "flxp.toml(5)", "flxp-serve(1)", "journalctl(1)"],
    },
    Page {
        name: "flxp-serve",
        exit: &[],
        config: true,
        env: &[API_TOKEN, JOURNAL],
        files: &[
            STATE_DIR,
            (
                "/usr/lib/systemd/system/flxp.service",
                "the unit running it as the flxp user",
            ),
        ],
        examples: &[
            (
                "systemctl enable --now flxp",
                "run the API and the rebalancer as a service",
            ),
            (
                "flxp serve --listen 127.0.0.1:9090",
                "serve on another port, in the foreground",
            ),
            (
                "journalctl -u flxp -p warning",
                "the service's warnings and errors",
            ),
        ],
        see_also: &["flxp(1)", "flxp.toml(5)", "flxp-daemon(1)", "journalctl(1)"],
    },
    Page {
        name: "flxp-sim",
        exit: &[],
        config: false,
        env: &[],
        files: &[],
        examples: &[(
            "flxp sim --scenario demo --http --listen 127.0.0.1:8006",
            "a simulated four-node cluster over plain HTTP",
        )],
        see_also: &["flxp(1)"],
    },
    Page {
        name: "flxp-sim-trace",
        exit: &[],
        config: false,
        env: &[],
        files: &[],
        examples: &[(
            "flxp sim trace office-hours --seed 1",
            "print a generated day of office-hours load as JSON, to edit and run with --trace-file",
        )],
        see_also: &["flxp-sim(1)"],
    },
    Page {
        name: "flxp-config",
        exit: &[],
        config: true,
        env: &[],
        files: &[],
        examples: &[("flxp config check", "check the config file and every zone")],
        see_also: &["flxp-config-check(1)", "flxp.toml(5)"],
    },
    Page {
        name: "flxp-config-check",
        exit: &[(
            1,
            "a problem was found (each is named), or no zone is configured",
        )],
        config: true,
        env: &[API_TOKEN],
        files: &[],
        examples: &[
            ("flxp config check", "check /etc/flxp/flxp.toml"),
            (
                "flxp config check --config ./lab.toml",
                "check another file",
            ),
            (
                "runuser -u flxp -- flxp config check",
                "check it as the units' user, with its access to the secrets",
            ),
        ],
        see_also: &["flxp(1)", "flxp.toml(5)", "flxp-setup-token(1)"],
    },
    Page {
        name: "flxp-setup",
        exit: &[],
        config: false,
        env: &[],
        files: &[],
        examples: &[(
            "flxp setup token",
            "the pveum commands for a balancing token",
        )],
        see_also: &["flxp-setup-token(1)"],
    },
    Page {
        name: "flxp-setup-token",
        exit: &[],
        config: false,
        env: &[],
        files: &[],
        examples: &[
            (
                "flxp setup token --features read",
                "a read-only token (status, plans, place)",
            ),
            (
                "flxp setup token --features balance,power",
                "rebalancing, evacuation, and consolidation switching nodes off",
            ),
            (
                "flxp setup token --features balance,create --user sched@pve",
                "balancing and createVM, for another Proxmox user",
            ),
        ],
        see_also: &["flxp(1)", "flxp-config-check(1)", "flxp.toml(5)"],
    },
];

/// The command lines of every example that runs flxp, for the test that parses them.
#[cfg(test)]
fn flxp_examples() -> Vec<&'static str> {
    PAGES
        .iter()
        .flat_map(|p| p.examples.iter().map(|(cmd, _)| *cmd))
        .filter(|cmd| cmd.starts_with("flxp "))
        .collect()
}

fn item(out: &mut String, tag: &str, text: &str) {
    let _ = writeln!(out, ".TP\n\\fB{}\\fR\n{}", roff(tag), roff(text));
}

/// EXIT STATUS, ENVIRONMENT, FILES, EXAMPLES and SEE ALSO of page `name`, in roff (empty for a
/// page with none).
pub fn sections(name: &str) -> String {
    let Some(page) = PAGES.iter().find(|p| p.name == name) else {
        return String::new();
    };
    let mut out = String::from(".SH \"EXIT STATUS\"\n");
    item(&mut out, "0", "done");
    let one = page.exit.iter().find(|(c, _)| *c == 1).map(|(_, t)| *t);
    item(
        &mut out,
        "1",
        one.unwrap_or("an error (the message on stderr names it)"),
    );
    item(
        &mut out,
        "2",
        "bad usage: an unknown option or a missing value",
    );
    for (code, text) in page.exit.iter().filter(|(c, _)| *c > 1) {
        item(&mut out, &code.to_string(), text);
    }
    out.push_str(".SH ENVIRONMENT\n");
    if page.config {
        item(
            &mut out,
            "FLXP_CONFIG",
            "the config file when --config is not given (else /etc/flxp/flxp.toml)",
        );
    }
    item(
        &mut out,
        "RUST_LOG",
        "log filter (tracing's EnvFilter syntax, e.g. debug or flxp_engine=trace); overrides -v",
    );
    for (var, text) in page.env {
        item(&mut out, var, text);
    }
    out.push_str(".SH FILES\n");
    {
        if page.config {
            item(
                &mut out,
                "/etc/flxp/flxp.toml",
                "the config file (flxp.toml(5)); secrets go in files next to it, readable by the flxp group",
            );
        }
        for (path, text) in page.files {
            item(&mut out, path, text);
        }
    }
    item(
        &mut out,
        "/usr/share/doc/flxp/GUIDE.md",
        "the admin's guide",
    );
    out.push_str(".SH EXAMPLES\n");
    for (cmd, text) in page.examples {
        item(&mut out, cmd, text);
    }
    let _ = writeln!(out, ".SH \"SEE ALSO\"\n{}", roff(&page.see_also.join(", ")));
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests may panic

    use super::*;
    use crate::cli::Cli;

    #[test]
    fn every_example_parses_with_the_real_command_line() {
        let registry = flxp_core::balance::Registry::builtin();
        for example in flxp_examples() {
            let args = example.split_whitespace();
            if let Err(e) = Cli::try_parse_with(registry, args) {
                panic!("`{example}`: {e}");
            }
        }
    }
}

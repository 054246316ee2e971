//! What an admin installing flxp meets: `--version`, `setup token` (and that GUIDE.md shows the
//! same commands), and the generated completions and man pages the package ships.

use std::collections::BTreeSet;
use std::path::Path;

use flxp_pve::privileges::{Feature, REQUIREMENTS, pveum_commands};

use super::run;

#[test]
fn version_names_the_commit() {
    let (code, out, _) = run(&["--version"]);
    assert_eq!(code, 0);
    let line = out.trim();
    let commit = line
        .strip_prefix(&format!("flxp {} (", env!("CARGO_PKG_VERSION")))
        .and_then(|r| r.strip_suffix(')'))
        .unwrap_or_else(|| panic!("{line}"));
    assert!(
        commit == "unknown" || commit.chars().all(|c| c.is_ascii_hexdigit()),
        "{line}"
    );
}

#[test]
fn setup_token_prints_the_pveum_commands_the_guide_shows() {
    let (code, out, err) = run(&["setup", "token", "--features", "balance"]);
    assert_eq!(code, 0, "{err}");
    let balance = BTreeSet::from([Feature::Read, Feature::Balance]);
    let guide =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../GUIDE.md"))
            .unwrap();
    for cmd in pveum_commands(&balance, "flxp@pve", "flxp") {
        assert!(out.contains(&cmd), "{out}");
        assert!(guide.contains(&cmd), "GUIDE.md lacks `{cmd}`");
    }
    for r in REQUIREMENTS {
        assert!(
            guide.contains(&format!("`{}`", r.privilege)),
            "GUIDE.md does not name `{}`",
            r.privilege
        );
    }
    let (code, out, _) = run(&["setup", "token", "--features", "read,create"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("pveum role add FlxpCreateVMs -privs \"VM.Audit VM.Clone"),
        "{out}"
    );
    assert!(!out.contains("VM.Migrate"), "{out}");
    assert!(!out.contains("Sys.PowerMgmt"), "{out}");
    // Power management only with the feature that needs it, on /nodes and nowhere else.
    let (code, out, _) = run(&["setup", "token", "--features", "power"]);
    assert_eq!(code, 0);
    assert!(
        out.contains(
            "pveum role add FlxpBalancePowerNodes -privs \"Sys.Audit Sys.Modify Sys.PowerMgmt\""
        ),
        "{out}"
    );
    assert!(
        out.contains("pveum acl modify /nodes -user flxp@pve -role FlxpBalancePowerNodes\n"),
        "{out}"
    );
    assert_eq!(out.matches("Sys.PowerMgmt").count(), 2, "{out}");
    let (code, _, err) = run(&["setup", "token", "--features", "everything"]);
    assert_eq!(code, 2, "{err}");
}

#[test]
fn generate_writes_completions_and_a_man_page_per_visible_command() {
    let dir = tempfile::tempdir().unwrap();
    let (code, _, err) = run(&["generate", "--out", dir.path().to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    for f in [
        "completions/flxp.bash",
        "completions/_flxp",
        "completions/flxp.fish",
    ] {
        let text = std::fs::read_to_string(dir.path().join(f)).unwrap();
        assert!(text.contains("config"), "{f} lacks the config command");
    }
    let pages: BTreeSet<String> = std::fs::read_dir(dir.path().join("man"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    for p in [
        "flxp.1",
        "flxp-serve.1",
        "flxp-config-check.1",
        "flxp-setup-token.1",
    ] {
        assert!(pages.contains(p), "{pages:?}");
    }
    assert!(!pages.iter().any(|p| p.contains("generate")), "{pages:?}");
    assert!(pages.contains("flxp.toml.5"), "{pages:?}");
    assert!(!pages.iter().any(|p| p.contains("help")), "{pages:?}");
    // Every page has the sections an admin looks for, and names only pages that exist.
    for p in &pages {
        let text = std::fs::read_to_string(dir.path().join("man").join(p)).unwrap();
        for s in [
            ".SH \"EXIT STATUS\"",
            ".SH ENVIRONMENT",
            ".SH FILES",
            ".SH EXAMPLES",
            ".SH \"SEE ALSO\"",
        ] {
            assert!(p == "flxp.toml.5" || text.contains(s), "{p} lacks {s}");
        }
        let plain = text
            .replace("\\-", "-")
            .replace("\\fB", "")
            .replace("\\fR", "");
        for (at, _) in plain.match_indices("flxp") {
            let rest = &plain[at..];
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '.'))
                .unwrap_or(rest.len());
            let (name, after) = rest.split_at(end);
            let Some(section) = after.strip_prefix('(').and_then(|a| a.chars().next()) else {
                continue;
            };
            if section.is_ascii_digit() && after[2..].starts_with(')') {
                let page = format!("{name}.{section}");
                assert!(
                    pages.contains(&page),
                    "{p} refers to {name}({section}), which does not exist"
                );
            }
        }
    }
    let (_, help, _) = run(&["--help"]);
    assert!(!help.contains("generate"), "{help}");
}

/// Runs `flxp -v config check` on a file with no zone, stderr going to a file; with
/// `JOURNAL_STREAM` naming that file when `journal` is set, as systemd does for a unit.
fn log_lines(journal: bool) -> Vec<String> {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("flxp.toml");
    std::fs::write(&cfg, "").unwrap();
    let log = dir.path().join("stderr");
    let file = std::fs::File::create(&log).unwrap();
    let meta = file.metadata().unwrap();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_flxp"));
    cmd.args(["-v", "config", "check", "--config", cfg.to_str().unwrap()])
        .env_remove("RUST_LOG")
        .env_remove("JOURNAL_STREAM")
        .stdout(std::process::Stdio::null())
        .stderr(file);
    if journal {
        cmd.env("JOURNAL_STREAM", format!("{}:{}", meta.dev(), meta.ino()));
    }
    let status = cmd.status().unwrap();
    assert_eq!(status.code(), Some(1));
    std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn under_systemd_log_lines_carry_their_priority_and_no_timestamp() {
    let journal = log_lines(true);
    let read = journal
        .iter()
        .find(|l| l.contains("read the config file"))
        .unwrap_or_else(|| panic!("{journal:?}"));
    assert!(read.starts_with("<7>DEBUG read the config file"), "{read}");
    // Elsewhere as before: the time first, no priority.
    let plain = log_lines(false);
    let read = plain
        .iter()
        .find(|l| l.contains("read the config file"))
        .unwrap_or_else(|| panic!("{plain:?}"));
    assert!(!read.starts_with('<'), "{read}");
    assert!(
        read.starts_with("20") && read.contains("DEBUG read the config file"),
        "{read}"
    );
}

//! Rendering of decisions: aligned tables for people, one JSON document for `--json`.
//!
//! Everything here writes to stdout; logs and warnings for people go to stderr so that `--json`
//! output is exactly one document.

use std::collections::BTreeSet;
use std::io::Write;

use anyhow::{Context, Result};
use comfy_table::{CellAlignment, Table, presets};
use flxp_core::placement::Placement;
use flxp_core::status::{NodeSummary, StatusReport};
use flxp_core::units::{fmt_bytes, fmt_cores, one_decimal};
use serde::Serialize;

use crate::terminal;

/// Prints one pretty JSON document and a newline on stdout.
///
/// A reader that stopped reading (`flxp ... --json | head`) is not an error: the tables ignore it
/// too, and the decision itself succeeded.
pub fn print_json<T: Serialize>(value: &T) -> Result<()> {
    let mut out = std::io::stdout().lock();
    let written = serde_json::to_writer_pretty(&mut out, value)
        .map_err(std::io::Error::from)
        .and_then(|()| writeln!(out));
    match written {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other.context("cannot write JSON to stdout"),
    }
}

/// The one JSON document of a `--json` command that failed: `{"error": "...", "exit_code": N}`.
/// Best effort: when stdout itself is what failed, there is nowhere left to write.
pub fn print_json_error(message: &str, exit_code: u8) {
    let doc = serde_json::json!({ "error": message, "exit_code": exit_code });
    let _ = print_json(&doc);
}

/// A command-line error as one line for `--json`: clap's first paragraph (which holds the
/// arguments it names, such as the missing ones), without its `error: ` prefix or usage text.
pub fn usage_error_line(rendered: &str) -> String {
    let paragraph: Vec<&str> = rendered
        .lines()
        .map(str::trim)
        .take_while(|l| !l.is_empty())
        .collect();
    paragraph.join(" ").trim_start_matches("error: ").to_owned()
}

/// An aligned table without borders, like `kubectl get`.
pub fn table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(presets::NOTHING);
    t.set_header(header.iter().map(|h| h.to_string()));
    t
}

/// Right-aligns the given columns (numbers).
pub fn align_right(t: &mut Table, columns: &[usize]) {
    for &c in columns {
        if let Some(col) = t.column_mut(c) {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
}

/// Prints `text` on stdout, ignoring a closed pipe (`flxp status | head`); control characters
/// from the cluster are shown escaped.
pub fn say(text: impl std::fmt::Display) {
    let text = text.to_string();
    let _ = writeln!(std::io::stdout().lock(), "{}", terminal::lines(&text));
}

/// Prints `text` on stderr, ignoring a closed pipe: losing a log reader must not stop a run
/// (`eprintln!` would panic mid-migration).
pub fn tell(text: impl std::fmt::Display) {
    let text = text.to_string();
    let _ = writeln!(std::io::stderr().lock(), "{}", terminal::lines(&text));
}

/// A table row whose cells are safe for a terminal: a newline or an escape sequence in a name
/// must not split or recolour the table.
fn row(cells: Vec<String>) -> Vec<String> {
    cells
        .into_iter()
        .map(|c| terminal::cell(&c).into_owned())
        .collect()
}

fn print_warnings(warnings: &[impl std::fmt::Display]) {
    for w in warnings {
        tell(format_args!("warning: {w}"));
    }
}

/// The placement for people: the chosen node, and the table of every node with `--explain`
/// (always when no node fits, since then the reasons are the answer).
pub fn print_placement(p: &Placement, explain: bool) {
    print_warnings(&p.warnings);
    match &p.node {
        Some(node) if p.policy == "host" => say(format!("{node} (named host; resources checked)")),
        Some(node) => {
            let score = p.candidates.first().and_then(|c| c.score).unwrap_or(0.0);
            say(format!("{node} (policy {}, score {score:.1})", p.policy));
        }
        None => say("no node fits"),
    }
    if !(explain || p.node.is_none()) {
        return;
    }
    let scorers: BTreeSet<&str> = p
        .candidates
        .iter()
        .flat_map(|c| c.scores.keys().map(String::as_str))
        .collect();
    let mut header = vec!["NODE", "FITS", "SCORE"];
    header.extend(scorers.iter().copied());
    header.push("WHY NOT");
    let mut t = table(&header);
    for c in &p.candidates {
        let mut row = vec![
            c.node.clone(),
            if c.feasible { "yes" } else { "no" }.to_owned(),
            c.score.map_or("-".into(), |s| format!("{s:.1}")),
        ];
        row.extend(
            scorers
                .iter()
                .map(|s| c.scores.get(*s).map_or("-".into(), |v| format!("{v:.1}"))),
        );
        row.push(c.reasons.join("; "));
        t.add_row(self::row(row));
    }
    align_right(&mut t, &(2..3 + scorers.len()).collect::<Vec<_>>());
    say("");
    say(t);
}

/// A load in percent, or `-` when the node reports no capacity for it: its load is unknown, and a
/// 0.0 would read as an empty node (the report's warnings say why).
fn percent_of(percent: f64, has_capacity: bool) -> String {
    if has_capacity {
        one_decimal(percent)
    } else {
        "-".to_owned()
    }
}

/// A node's GUESTS cell, running / all: `3 / 4`, or `1 (+1 arriving) / 1` while a migration
/// to the node is in flight (Proxmox lists the guest on its source until it lands).
fn guests_cell(n: &NodeSummary) -> String {
    if n.arriving == 0 {
        format!("{} / {}", n.running, n.guests)
    } else {
        format!(
            "{} (+{} arriving) / {}",
            n.running.saturating_sub(n.arriving),
            n.arriving,
            n.guests
        )
    }
}

/// What the plan promised and what the round achieved, in the plan's measure.
fn imbalance_line(report: &flxp_engine::ExecutionReport) -> String {
    let m = report.measure;
    match report.imbalance_achieved {
        Some(got) => format!(
            "imbalance: {} achieved (the plan promised {})",
            m.fmt(got),
            m.fmt(report.imbalance_planned)
        ),
        None => format!(
            "imbalance: the plan promised {}; achieved unknown (the cluster could not be read again)",
            m.fmt(report.imbalance_planned)
        ),
    }
}

/// The status report for people.
pub fn print_status(r: &StatusReport) {
    print_warnings(&r.warnings);
    let mut t = table(&[
        "NODE",
        "STATUS",
        "MEMORY",
        "MEM%",
        "CPU",
        "CPU%",
        "GUESTS",
        "LABELS",
        "TAINTS",
        "VIOLATIONS",
    ]);
    for n in &r.nodes {
        let status = if n.maintenance.is_empty() {
            n.status.clone()
        } else {
            format!("{} (maintenance)", n.status)
        };
        t.add_row(row(vec![
            n.node.clone(),
            status,
            format!(
                "{} / {}",
                fmt_bytes(n.figures.mem),
                fmt_bytes(n.figures.maxmem)
            ),
            percent_of(n.figures.mem_percent, n.figures.maxmem > 0),
            format!(
                "{} / {}",
                fmt_cores(n.figures.cpu),
                fmt_cores(n.figures.maxcpu)
            ),
            percent_of(n.figures.cpu_percent, n.figures.maxcpu > 0.0),
            guests_cell(n),
            n.labels.join(","),
            n.taints.join(","),
            n.violations.to_string(),
        ]));
    }
    align_right(&mut t, &[2, 3, 4, 5, 6, 9]);
    say(t);
    say("");
    say(format!(
        "{} nodes, {} guests ({} running); memory spread {:.1} pp, CPU spread {:.1} pp",
        r.nodes.len(),
        r.guests,
        r.running,
        r.memory_spread,
        r.cpu_spread
    ));
    print_maintenance(&r.nodes);
    if !r.violations.is_empty() {
        say(format!("\n{} rule violations:", r.violations.len()));
        for v in &r.violations {
            say(format!("  {v}"));
        }
    }
    if !r.conflicts.is_empty() {
        say(format!("\n{} rule conflicts:", r.conflicts.len()));
        for c in &r.conflicts {
            say(format!("  {c}"));
        }
    }
}

/// Whether each node in maintenance is safe to reboot, and which guests still run there, why.
fn print_maintenance(nodes: &[NodeSummary]) {
    let states: Vec<_> = nodes
        .iter()
        .filter_map(|n| n.maintenance_state.as_ref().map(|s| (&n.node, s)))
        .collect();
    if states.is_empty() {
        return;
    }
    say("\nin maintenance:");
    for (node, state) in states {
        say(format!("  {node}: {state}"));
        for l in state.running() {
            say(format!("    {} {}: {}", l.vmid, l.name, l.reason));
        }
    }
}

/// `flxp balance` / `flxp evacuate --json`: the plan (Contract 3 fields at the top level) and,
/// when it was carried out, what that did.
#[derive(Debug, Serialize)]
pub struct PlanOutput<'a> {
    /// The plan.
    #[serde(flatten)]
    pub plan: &'a flxp_core::balance::Plan,
    /// Whether it was only planned (`--dry-run` or `--from-file`).
    pub dry_run: bool,
    /// What carrying it out did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub execution: Option<&'a flxp_engine::ExecutionReport>,
    /// Why the request stays unmet (the reasons for exit code 3); absent when met.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unmet: Vec<String>,
    /// Running guests an evacuation leaves on the nodes it empties (read after the run, or
    /// what the plan would leave), each with why; absent when none.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub left_running: &'a [flxp_core::left_running::LeftRunning],
}

/// How far the plan is from the fewest migrations and bytes any plan needs to reach what it
/// reaches, e.g. `lower bound: any plan reaching spread 4.2 pp needs at least 3 migrations and
/// 12.0 GiB to copy; this plan: 4 (1.33×) and 14.0 GiB (1.17×)`.
fn bounds_line(plan: &flxp_core::balance::Plan) -> Option<String> {
    let b = &plan.bounds;
    let k = b.migrations?;
    let gap = |g: Option<f64>| g.map_or(String::new(), |g| format!(" ({g:.2}×)"));
    let bytes = b
        .bytes
        .map_or(String::new(), |x| format!(" and {} to copy", fmt_bytes(x)));
    // Moving nothing keeps (or reaches) the spread elsewhere: for evacuation and consolidation
    // the bound is on plans that also empty the same nodes.
    let mut emptied: Vec<&str> = plan
        .migrations
        .iter()
        .filter(|m| m.purpose == flxp_core::balance::Purpose::Evacuate)
        .map(|m| m.from.as_str())
        .collect();
    emptied.sort_unstable();
    emptied.dedup();
    let what = if emptied.is_empty() {
        "reaching".to_owned()
    } else {
        format!("that empties {} and reaches", emptied.join(", "))
    };
    Some(format!(
        "lower bound: any plan {what} {} {} needs at least {k} migration(s){bytes}; this plan: {}{} and {}{}",
        plan.measure.as_str(),
        plan.measure.fmt(plan.imbalance_after),
        plan.migrations.len(),
        gap(b.migrations_gap),
        fmt_bytes(plan.bytes),
        gap(b.bytes_gap)
    ))
}

/// A plan for people: the summary, the migrations in order with why, each node before and after,
/// rules broken before and after, guests that fit nowhere.
/// `unmet`: why the request stays unmet (exit code 3), the headline above the summary.
pub fn print_plan(plan: &flxp_core::balance::Plan, unmet: &[String]) {
    print_warnings(&plan.warnings);
    if !unmet.is_empty() {
        say(format!("not met (exit code 3): {}", unmet.join("; ")));
    }
    say(&plan.summary);
    if let Some(u) = &plan.usage {
        say(format!("usage: {} (from {})", u.mode.as_str(), u.from));
    }
    let measure = plan.measure;
    if !plan.migrations.is_empty() {
        // COPY: what the move copies, memory and local disks (`bytes` in `--json`).
        let mut t = table(&["#", "VMID", "NAME", "TYPE", "FROM", "TO", "COPY", "AFTER"]);
        for (i, m) in plan.migrations.iter().enumerate() {
            let how = if m.online { "" } else { " (offline)" };
            t.add_row(row(vec![
                (i + 1).to_string(),
                m.vmid.to_string(),
                m.name.clone(),
                format!("{}{how}", m.kind.as_str()),
                m.from.clone(),
                m.to.clone(),
                fmt_bytes(m.bytes),
                measure.fmt(m.imbalance_after),
            ]));
        }
        align_right(&mut t, &[0, 1, 6, 7]);
        say("");
        say(t);
        // Reasons are long sentences: below the table rather than in a column that wraps.
        say("\nwhy:");
        for (i, m) in plan.migrations.iter().enumerate() {
            say(format!("  {}. {}", i + 1, m.reason));
        }
        if let Some(line) = bounds_line(plan) {
            say(format!("\n{line}"));
        }
    }
    let mut t = table(&[
        "NODE",
        "STATUS",
        "BEFORE",
        "AFTER",
        "MEMORY AFTER",
        "GUESTS",
    ]);
    for (b, a) in plan.nodes_before.iter().zip(&plan.nodes_after) {
        let status = if b.maintenance {
            format!("{} (maintenance)", b.status)
        } else {
            b.status.clone()
        };
        t.add_row(row(vec![
            b.node.clone(),
            status,
            format!("{}%", one_decimal(b.load)),
            format!("{}%", one_decimal(a.load)),
            format!(
                "{} / {}",
                fmt_bytes(a.figures.mem),
                fmt_bytes(a.figures.maxmem)
            ),
            format!("{} → {}", b.guests, a.guests),
        ]));
    }
    align_right(&mut t, &[2, 3, 4, 5]);
    say("");
    say(format!("{} per node ({}):", plan.metric, measure.as_str()));
    say(t);
    for (title, list) in [
        ("rules broken before", &plan.violations_before),
        ("rules still broken after", &plan.violations_after),
    ] {
        if !list.is_empty() {
            say(format!("\n{title} ({}):", list.len()));
            for v in list.iter() {
                say(format!("  {v}"));
            }
        }
    }
    if !plan.waiting.is_empty() {
        say(format!(
            "\nwaiting for migrations in flight ({}; the next run fixes them once they land):",
            plan.waiting.len()
        ));
        for w in &plan.waiting {
            say(format!("  {w}"));
        }
    }
    if !plan.unplaced.is_empty() {
        say(format!("\nfit nowhere ({}):", plan.unplaced.len()));
        for u in &plan.unplaced {
            say(format!(
                "  {} {} on {} ({}): {}",
                u.vmid, u.name, u.node, u.rule, u.reason
            ));
        }
    }
    print_proposals(plan);
    print_skipped(plan);
}

/// A balance plugin's proposals, one verdict line each, in its order.
fn print_proposals(plan: &flxp_core::balance::Plan) {
    let Some(p) = plan.plugin.as_ref().filter(|p| p.error.is_none()) else {
        return;
    };
    say(format!(
        "\nplugin {} proposed {} migration(s):",
        p.plugin,
        p.proposals.len()
    ));
    for (i, v) in p.proposals.iter().enumerate() {
        let verdict = match (v.refused, &v.why) {
            (Some(kind), why) => format!(
                "refused ({}): {}",
                kind.words(),
                why.as_deref().unwrap_or_default()
            ),
            (None, _) => "accepted".to_owned(),
        };
        let said = v
            .reason
            .as_deref()
            .filter(|r| !r.trim().is_empty())
            .map(|r| format!(" ({})", r.trim()))
            .unwrap_or_default();
        say(format!(
            "  {}. {} → {}{said}: {verdict}",
            i + 1,
            v.vmid,
            v.target
        ));
    }
}

/// Guests the plan leaves where they are. Those on a node in maintenance each get a line (they
/// are why the node does not empty); the others, often many ignored guests, get a count.
fn print_skipped(plan: &flxp_core::balance::Plan) {
    let draining: std::collections::BTreeSet<&str> = plan
        .nodes_before
        .iter()
        .filter(|n| n.maintenance)
        .map(|n| n.node.as_str())
        .collect();
    let (stuck, others): (Vec<_>, Vec<_>) = plan
        .skipped
        .iter()
        .partition(|s| draining.contains(s.node.as_str()));
    if !stuck.is_empty() {
        say(format!(
            "\nstay on a node in maintenance ({}):",
            stuck.len()
        ));
        for s in stuck {
            say(format!(
                "  {} {} on {}: {}",
                s.vmid, s.name, s.node, s.reason
            ));
        }
    }
    if !plan.left_in_place.is_empty() {
        // Counted by reason, so a plan that moves nothing says why (`left_in_place` in --json).
        say("\nleft in place:");
        for l in &plan.left_in_place {
            say(format!("  {}", l.reason));
        }
    } else if !others.is_empty() {
        say(format!(
            "\n{} other guest(s) not movable (ignored, locked, templates, ...): `skipped` in --json",
            others.len()
        ));
    }
}

/// What carrying out a plan did, for people.
pub fn print_execution(report: &flxp_engine::ExecutionReport) {
    say("");
    say(imbalance_line(report));
    say(report.summary());
    for (title, list) in [
        ("failed", &report.failed),
        (
            "outcome unknown (Proxmox could not be read)",
            &report.unknown,
        ),
    ] {
        if list.is_empty() {
            continue;
        }
        let mut t = table(&["VMID", "NAME", "FROM", "TO", "ERROR"]);
        for f in list {
            t.add_row(row(vec![
                f.vmid.to_string(),
                f.name.clone(),
                f.from.clone(),
                f.to.clone(),
                f.error.clone(),
            ]));
        }
        say(format!("\n{title}:"));
        say(t);
    }
    for s in &report.skipped {
        say(format!(
            "dropped {} {} → {}: {}",
            s.vmid,
            s.from,
            s.to,
            s.reasons.join("; ")
        ));
    }
    for r in &report.replans {
        say(format!("replanned ({}): {}", r.reason, r.summary));
    }
    for u in &report.unfinished {
        say(format!(
            "still running in Proxmox: {} {} → {}",
            u.vmid, u.from, u.to
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_execution_shows_the_imbalance_achieved_beside_the_one_planned() {
        let mut r = flxp_engine::ExecutionReport {
            imbalance_planned: 10.9375,
            imbalance_achieved: Some(21.875),
            ..Default::default()
        };
        assert_eq!(
            imbalance_line(&r),
            "imbalance: 21.9 pp achieved (the plan promised 10.9 pp)"
        );
        r.imbalance_achieved = None;
        assert_eq!(
            imbalance_line(&r),
            "imbalance: the plan promised 10.9 pp; achieved unknown (the cluster could not be read again)"
        );
    }

    #[test]
    fn a_guest_arriving_in_flight_is_shown_apart_from_the_node_s_own() {
        use flxp_core::builder::{ClusterBuilder, vm};
        use flxp_core::{Rules, State};
        // 101 and 102 on their way from a to b, where 103 runs: Proxmox lists them on a.
        let mut b = ClusterBuilder::new().nodes(&["a", "b"]).guest(vm(103, "b"));
        for vmid in [101, 102] {
            b = b.guest(vm(vmid, "a")).migrating(vmid, "a", "b");
        }
        let c = b.build();
        let r = flxp_core::status::status(&c, &Rules::compile(&c), &State::new(&c));
        let cells: Vec<String> = r.nodes.iter().map(guests_cell).collect();
        assert_eq!(cells, ["2 / 2", "1 (+2 arriving) / 1"]);
    }

    #[test]
    fn a_usage_error_keeps_the_arguments_it_names_and_drops_the_usage() {
        let missing = "error: the following required arguments were not provided:\n  --zone <ZONE>\n\n\
                       Usage: flxp consolidate --zone <ZONE>\n\nFor more information, try '--help'.\n";
        assert_eq!(
            usage_error_line(missing),
            "the following required arguments were not provided: --zone <ZONE>"
        );
        let unknown =
            "error: unexpected argument '--frobnicate' found\n\nUsage: flxp status [OPTIONS]\n";
        assert_eq!(
            usage_error_line(unknown),
            "unexpected argument '--frobnicate' found"
        );
    }
}

//! Rendering of decisions: aligned tables for people, one JSON document for `--json`.
//!
//! Everything here writes to stdout; logs and warnings for people go to stderr so that `--json`
//! output is exactly one document.

use std::collections::BTreeSet;
use std::io::Write;

use anyhow::{Context, Result};
use comfy_table::{CellAlignment, Table, presets};
use flxp_core::placement::Placement;
use flxp_core::status::StatusReport;
use flxp_core::units::{fmt_bytes, fmt_cores};
use serde::Serialize;

/// Prints one pretty JSON document and a newline on stdout.
pub fn print_json<T: Serialize>(value: &T) -> Result<()> {
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, value).context("cannot write JSON to stdout")?;
    writeln!(out).context("cannot write to stdout")?;
    Ok(())
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

/// Prints `text` on stdout, ignoring a closed pipe (`flxp status | head`).
pub fn say(text: impl std::fmt::Display) {
    let _ = writeln!(std::io::stdout().lock(), "{text}");
}

fn print_warnings(warnings: &[impl std::fmt::Display]) {
    for w in warnings {
        eprintln!("warning: {w}");
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
        t.add_row(row);
    }
    align_right(&mut t, &(2..3 + scorers.len()).collect::<Vec<_>>());
    say("");
    say(t);
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
        t.add_row(vec![
            n.node.clone(),
            status,
            format!("{} / {}", fmt_bytes(n.mem), fmt_bytes(n.maxmem)),
            format!("{:.1}", n.mem_percent),
            format!("{} / {}", fmt_cores(n.cpu), fmt_cores(n.maxcpu)),
            format!("{:.1}", n.cpu_percent),
            format!("{} / {}", n.running, n.guests),
            n.labels.join(","),
            n.taints.join(","),
            n.violations.to_string(),
        ]);
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

//! `flxp maintenance NODE --off`: the guests an evacuation took off the node go back home, the
//! record of where they came from is kept in the node's notes until they are, and `--stay` leaves
//! them where they are.

use super::cli_balance::{DEMO, SimZone, sim_zone};

/// The demo zone at a time scale that keeps the simulator light on a busy machine (a migration
/// takes about a second).
fn zone() -> SimZone {
    sim_zone(DEMO, 50.0, "", |_| {})
}

#[test]
fn guests_evacuated_go_back_home_when_the_maintenance_ends() {
    let z = zone();
    let mut before = z.guests_on("pve4");
    before.sort();
    assert!(before.len() > 2, "{before:?}");
    // 151 is ignored and stays: exit 3, the rest leaves.
    let (code, out, err) = z.run(&["evacuate", "pve4"]);
    assert_eq!(code, 3, "{err}\n{out}");
    assert_eq!(z.guests_on("pve4"), [151]);
    let list: Vec<String> = before.iter().map(u32::to_string).collect();
    let home_line = format!("<!-- flxp-home vmids={} -->", list.join(","));
    assert!(z.notes("pve4").contains(&home_line), "{}", z.notes("pve4"));

    let (code, out, err) = z.run(&["maintenance", "pve4", "--off"]);
    assert_eq!(code, 0, "{err}\n{out}");
    assert!(
        err.contains("pve4: flxp.maintenance removed from its notes"),
        "{err}"
    );
    assert!(out.contains("back home to pve4"), "{out}");
    let mut after = z.guests_on("pve4");
    after.sort();
    assert_eq!(after, before);
    z.assert_in_service("pve4");
    assert!(
        !z.notes("pve4").contains("flxp-home"),
        "{}",
        z.notes("pve4")
    );
}

#[test]
fn with_stay_the_guests_stay_and_their_home_is_kept() {
    let z = zone();
    let (code, _, err) = z.run(&["evacuate", "pve4"]);
    assert_eq!(code, 3, "{err}");
    let (code, out, err) = z.run(&["maintenance", "pve4", "--off", "--stay"]);
    assert_eq!(code, 0, "{err}\n{out}");
    assert_eq!(z.guests_on("pve4"), [151]);
    assert!(
        z.notes("pve4").contains("<!-- flxp-home vmids="),
        "{}",
        z.notes("pve4")
    );
}

#[test]
fn a_return_with_a_failed_migration_says_the_exit_code_it_returns() {
    let z = zone();
    let (code, _, err) = z.run(&["evacuate", "pve4"]);
    assert_eq!(code, 3, "{err}");
    // One guest's way back fails: the run exits 1, and the line naming the guests left away
    // says 1 (it said 3, the code of a guest that cannot go back).
    let away = z
        .guests_on("pve1")
        .into_iter()
        .chain(z.guests_on("pve2"))
        .chain(z.guests_on("pve3"))
        .find(|v| z.notes("pve4").contains(&v.to_string()))
        .unwrap();
    z.sim.world().faults.set(flxp_sim::scenario::FaultSpec {
        fail_migrations: vec![flxp_sim::scenario::FailMigration {
            vmid: away,
            message: Some("migration aborted: no route to host".into()),
        }],
        ..Default::default()
    });
    let (code, out, err) = z.run(&["maintenance", "pve4", "--off"]);
    assert_eq!(code, 1, "{err}\n{out}");
    assert!(
        out.contains("not met (exit code 1): guest(s)") && out.contains(&away.to_string()),
        "{out}"
    );
}

//! `flxp place` as a user runs it.

use std::path::Path;

use super::{example, json, on_file, run, strs, temp_file};

/// The four-node example most tests place on.
fn four_nodes() -> std::path::PathBuf {
    example("pvesh-4node.json")
}

/// Runs `flxp place --from-file FILE --memory MEMORY --cores CORES EXTRA...`.
fn place(file: &Path, memory: &str, cores: &str, extra: &[&str]) -> (i32, String, String) {
    let mut args = vec!["--memory", memory, "--cores", cores];
    args.extend_from_slice(extra);
    on_file("place", file, &args)
}

#[test]
fn json_prints_one_document_with_the_chosen_node() {
    let (code, out, _) = place(&four_nodes(), "4GiB", "2", &["--json"]);
    assert_eq!(code, 0);
    let v = json(&out);
    assert_eq!(v["node"], "pve2");
    assert_eq!(v["candidates"].as_array().unwrap().len(), 4);
    assert_eq!(v["candidates"][0]["feasible"], true);
    assert!(v["candidates"][0]["scores"]["free-memory"].is_number());
    assert!(v["warnings"].is_array());
}

#[test]
fn sizes_accept_every_documented_form_and_agree() {
    let f = four_nodes();
    let outs: Vec<String> = ["4096M", "4G", "4GiB", "4294967296"]
        .iter()
        .map(|m| place(&f, m, "2", &["--json"]).1)
        .collect();
    assert!(outs.windows(2).all(|w| w[0] == w[1]));
}

#[test]
fn nothing_fits_exits_3_with_null_node_and_reasons() {
    let (code, out, _) = place(&four_nodes(), "1T", "2", &["--json"]);
    assert_eq!(code, 3);
    let v = json(&out);
    assert!(v["node"].is_null());
    let reasons = v["candidates"][0]["reasons"][0].as_str().unwrap();
    assert!(reasons.starts_with("memory: needs 1.0 TiB"), "{reasons}");
}

#[test]
fn human_output_names_the_node_and_explains_on_request() {
    let (_d, f) = temp_file(
        "s.json",
        r#"[{"id":"node/a","type":"node","node":"a","status":"online","maxmem":17179869184,"mem":4294967296,"maxcpu":8,"cpu":0.1},
            {"id":"node/b","type":"node","node":"b","status":"online","maxmem":17179869184,"mem":12884901888,"maxcpu":8,"cpu":0.1},
            {"id":"node/c","type":"node","node":"c","status":"offline"}]"#,
    );
    let (code, out, _) = place(&f, "2G", "1", &["--explain"]);
    assert_eq!(code, 0);
    let want = "\
a (policy free-memory, score 100.0)

 NODE  FITS  SCORE  free-memory  WHY NOT                 
 a     yes   100.0        100.0                          
 b     yes    20.0         20.0                          
 c     no        -            -  online: node is offline 

policy free-memory: free-memory 1; soft rules added to every policy unless set to 0: prefer-node 10, prefer-affinity 10, prefer-anti-affinity 10, prefer-no 10
";
    // `--explain` says which soft-rule scorers the policy carries.
    assert_eq!(out, want);
}

#[test]
fn bad_usage_exits_2_and_bad_input_exits_1() {
    let f = &four_nodes();
    let (code, _, err) = place(f, "lots", "2", &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("lots"), "{err}");
    let (code, _, err) = place(f, "1G", "0", &[]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = run(&["place", "--memory", "1G", "--cores", "1"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--from-file"), "{err}");
    let (code, _, err) = place(Path::new("/nonexistent.json"), "1G", "1", &[]);
    assert_eq!(code, 1);
    assert!(err.contains("/nonexistent.json"), "{err}");
    let (_d, bad) = temp_file(
        "bad.json",
        r#"{"resources":[{"id":"qemu/1","type":"qemu","vmid":"x"}]}"#,
    );
    let (code, _, err) = place(&bad, "1G", "1", &[]);
    assert_eq!(code, 1);
    assert!(err.contains("resources[0].vmid"), "{err}");
    let (code, _, err) = place(f, "1G", "1", &["--policy", "nope"]);
    assert_eq!(code, 2, "a flag naming no policy is bad usage");
    assert!(err.contains("unknown policy"), "{err}");
    for (flag, value, want) in [
        (
            "--host",
            "pve9",
            "host \"pve9\" is not a node of the cluster",
        ),
        ("--tag", "flxp.affinity.ü", "is not a valid Proxmox tag"),
    ] {
        let (code, _, err) = place(f, "1G", "1", &[flag, value]);
        assert_eq!(code, 2, "{flag} {value}: {err}");
        assert!(err.contains(want), "{err}");
    }
}

#[test]
fn negative_sizes_and_counts_reach_their_parser_and_exit_2() {
    // `-5G` used to be "unexpected argument '-5' found", naming no option.
    let f = &four_nodes();
    for (memory, cores, want) in [
        (
            "-5G",
            "1",
            "invalid value '-5G' for '--memory <SIZE>': invalid size \"-5G\" (a size cannot be negative)",
        ),
        (
            "-5",
            "1",
            "invalid value '-5' for '--memory <SIZE>': invalid size \"-5\" (a size cannot be negative)",
        ),
        (
            "1G",
            "-1",
            "invalid value '-1' for '--cores <N>': -1 is not a vCPU count",
        ),
        ("1G", "-2x", "invalid value '-2x' for '--cores <N>':"),
    ] {
        let (code, _, err) = place(f, memory, cores, &[]);
        assert_eq!(code, 2, "{memory} {cores}: {err}");
        assert!(err.starts_with(&format!("error: {want}")), "{err}");
    }
}

#[test]
fn named_host_is_used_when_it_has_room() {
    let f = example("rules-hetero.json");
    let (code, out, _) = place(&f, "4G", "2", &["--host", "delta", "--json"]);
    assert_eq!(code, 0);
    let v = json(&out);
    assert_eq!(v["node"], "delta");
    let warnings = v["warnings"].to_string();
    assert!(warnings.contains("taints"), "{warnings}");
}

#[test]
fn json_errors_are_one_document_too_with_the_exit_code() {
    // stdout used to be empty on errors: a script piping `--json` into a parser got nothing.
    let f = four_nodes();
    let f = f.to_str().unwrap();
    let (_d, huge) = temp_file(
        "huge.json",
        r#"[{"type":"node","node":"a","status":"online","maxmem":1,"maxcpu":1},
            {"id":"qemu/100","type":"qemu","vmid":100,"node":"a","status":"running","maxmem":18446744073709551615}]"#,
    );
    let cases: Vec<(Vec<&str>, i32, &str)> = vec![
        (
            vec![
                "place",
                "--from-file",
                f,
                "--memory",
                "lots",
                "--cores",
                "2",
                "--json",
            ],
            2,
            "invalid value 'lots' for '--memory <SIZE>'",
        ),
        (
            vec!["evacuate", "pve9", "--from-file", f, "--json"],
            2,
            "node \"pve9\" is not in the cluster",
        ),
        (
            vec!["status", "--from-file", huge.to_str().unwrap(), "--json"],
            1,
            "invalid resource qemu/100: maxmem 18446744073709551615 bytes is more than 1.0 PiB",
        ),
        (
            vec!["balance", "--from-file", "/nonexistent.json", "--json"],
            1,
            "cannot read snapshot file /nonexistent.json",
        ),
    ];
    for (args, want_code, want) in cases {
        let (code, out, err) = run(&args);
        assert_eq!(code, want_code, "{args:?}: {err}");
        let v: serde_json::Value = serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("{args:?}: stdout is not one JSON document ({e}): {out:?}"));
        assert_eq!(v["exit_code"], want_code, "{args:?}");
        let message = v["error"].as_str().unwrap();
        assert!(message.contains(want), "{args:?}: {message}");
        assert!(err.contains(want), "the error still goes to stderr: {err}");
    }
}

#[test]
fn cores_take_fractions_and_refuse_zero_negative_and_words_naming_the_flag() {
    // A container's cpulimit may be a fraction (0.5 of a CPU); `--cores` takes one like it.
    let f = four_nodes();
    let place = |cores: &str| place(&f, "4GiB", cores, &["--json"]);
    let (code, out, err) = place("0.5");
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    assert_eq!(v["node"], "pve2");
    for bad in ["0", "-1", "abc"] {
        let (code, _, err) = place(bad);
        assert_eq!(code, 2, "{bad}: {err}");
        let want = format!(
            "invalid value '{bad}' for '--cores <N>': {bad} is not a vCPU count (a number above 0 \
             and at most 1048576, such as 2 or 0.5)"
        );
        assert!(err.contains(&want), "{bad}: {err}");
    }
}

/// Three equal nodes, HA starting two guests on node1 and one on node2: none of the three shows
/// in the measurements yet.
const BURST: &str = r#"{"resources":[
  {"id":"node/node1","type":"node","node":"node1","status":"online","maxcpu":16,"cpu":0.1,"maxmem":68719476736,"mem":8589934592},
  {"id":"node/node2","type":"node","node":"node2","status":"online","maxcpu":16,"cpu":0.1,"maxmem":68719476736,"mem":8589934592},
  {"id":"node/node3","type":"node","node":"node3","status":"online","maxcpu":16,"cpu":0.1,"maxmem":68719476736,"mem":8589934592},
  {"id":"qemu/101","type":"qemu","vmid":101,"node":"node1","status":"stopped","maxcpu":4,"maxmem":8589934592,"hastate":"started"},
  {"id":"qemu/102","type":"qemu","vmid":102,"node":"node1","status":"stopped","maxcpu":4,"maxmem":8589934592,"hastate":"started"},
  {"id":"qemu/103","type":"qemu","vmid":103,"node":"node2","status":"stopped","maxcpu":4,"maxmem":8589934592,"hastate":"started"}],
 "ha":{"resources":[{"sid":"vm:101","state":"started"},{"sid":"vm:102","state":"started"},{"sid":"vm:103","state":"started"}],
  "status":[
  {"id":"service:vm:101","type":"service","sid":"vm:101","node":"node1","state":"starting","crm_state":"started","request_state":"started"},
  {"id":"service:vm:102","type":"service","sid":"vm:102","node":"node1","state":"starting","crm_state":"started","request_state":"started"},
  {"id":"service:vm:103","type":"service","sid":"vm:103","node":"node2","state":"starting","crm_state":"started","request_state":"started"}]}}"#;

#[test]
fn pve_dynamic_spreads_a_burst_of_starts_over_the_guests_ha_is_starting() {
    // Proxmox's dynamic mode adds each guest HA reports `starting` at its configured size, so the
    // next start goes to node3 (nothing starting), then node2 (one), node1 last (two). Counted
    // by measurements alone, the three nodes tie and node1 would get the whole burst.
    let (_d, snap) = temp_file("burst.json", BURST);
    let (code, out, err) = place(&snap, "4GiB", "2", &["--policy", "pve-dynamic", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    let order = strs(&v["candidates"], "node");
    assert_eq!(order, ["node3", "node2", "node1"], "{out}");
}

#[test]
fn a_refusal_never_prints_the_need_and_the_room_as_the_same_figure() {
    // 2458 MiB asked, 2457 MiB available: both are "2.4 GiB" at one decimal.
    let (_d, f) = temp_file(
        "s.json",
        r#"[{"id":"node/a","type":"node","node":"a","status":"online","maxmem":8589934592,"mem":6013583360,"maxcpu":8,"cpu":0.1}]"#,
    );
    let (code, out, err) = place(&f, "2458M", "1", &["--json"]);
    assert_eq!(code, 3, "{err}");
    let v = json(&out);
    let reason = v["candidates"][0]["reasons"][0].as_str().unwrap();
    assert!(
        reason.starts_with("memory: needs 2.400 GiB but 2.399 GiB is available"),
        "{reason}"
    );
}

#[test]
fn a_compute_profile_of_the_config_sizes_the_vm() {
    let (_d, config) = temp_file(
        "flxp.toml",
        "[compute-profiles.medium]\ncores = 1\nsockets = 2\nmemory = \"4GiB\"\n",
    );
    let config = config.to_str().unwrap();
    let f = four_nodes();
    let (code, by_profile, err) = on_file(
        "place",
        &f,
        &["--config", config, "--profile", "medium", "--json"],
    );
    assert_eq!(code, 0, "{err}");
    // The profile's memory and its cores × sockets, as given by hand.
    assert_eq!(by_profile, place(&f, "4GiB", "2", &["--json"]).1);

    let (code, _, err) = on_file("place", &f, &["--config", config, "--profile", "large"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(r#"compute profile "large" is not configured; configured: medium"#),
        "{err}"
    );
    let (code, _, err) = on_file(
        "place",
        &f,
        &["--config", config, "--profile", "medium", "--memory", "1G"],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--memory"), "{err}");
    let (code, _, err) = on_file("place", &f, &["--cores", "2"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--memory"), "{err}");
}

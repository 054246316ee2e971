//! `flxp place` as a user runs it.

use super::{example, run, temp_file};

#[test]
fn json_prints_one_document_with_the_chosen_node() {
    let f = example("pvesh-4node.json");
    let (code, out, _) = run(&[
        "place",
        "--from-file",
        f.to_str().unwrap(),
        "--memory",
        "4GiB",
        "--cores",
        "2",
        "--json",
    ]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["node"], "pve2");
    assert_eq!(v["candidates"].as_array().unwrap().len(), 4);
    assert_eq!(v["candidates"][0]["feasible"], true);
    assert!(v["candidates"][0]["scores"]["free-memory"].is_number());
    assert!(v["warnings"].is_array());
}

#[test]
fn sizes_accept_every_documented_form_and_agree() {
    let f = example("pvesh-4node.json");
    let f = f.to_str().unwrap();
    let outs: Vec<String> = ["4096M", "4G", "4GiB", "4294967296"]
        .iter()
        .map(|m| {
            run(&[
                "place",
                "--from-file",
                f,
                "--memory",
                m,
                "--cores",
                "2",
                "--json",
            ])
            .1
        })
        .collect();
    assert!(outs.windows(2).all(|w| w[0] == w[1]));
}

#[test]
fn nothing_fits_exits_3_with_null_node_and_reasons() {
    let f = example("pvesh-4node.json");
    let (code, out, _) = run(&[
        "place",
        "--from-file",
        f.to_str().unwrap(),
        "--memory",
        "1T",
        "--cores",
        "2",
        "--json",
    ]);
    assert_eq!(code, 3);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
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
    let (code, out, _) = run(&[
        "place",
        "--from-file",
        f.to_str().unwrap(),
        "--memory",
        "2G",
        "--cores",
        "1",
        "--explain",
    ]);
    assert_eq!(code, 0);
    let want = "\
a (policy free-memory, score 100.0)

 NODE  FITS  SCORE  free-memory  WHY NOT                 
 a     yes   100.0        100.0                          
 b     yes    20.0         20.0                          
 c     no        -            -  online: node is offline 
";
    assert_eq!(out, want);
}

#[test]
fn bad_usage_exits_2_and_bad_input_exits_1() {
    let f = example("pvesh-4node.json");
    let f = f.to_str().unwrap();
    let (code, _, err) = run(&[
        "place",
        "--from-file",
        f,
        "--memory",
        "lots",
        "--cores",
        "2",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("lots"), "{err}");
    let (code, _, err) = run(&["place", "--from-file", f, "--memory", "1G", "--cores", "0"]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = run(&["place", "--memory", "1G", "--cores", "1"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--from-file"), "{err}");
    let (code, _, err) = run(&[
        "place",
        "--from-file",
        "/nonexistent.json",
        "--memory",
        "1G",
        "--cores",
        "1",
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("/nonexistent.json"), "{err}");
    let (_d, bad) = temp_file(
        "bad.json",
        r#"{"resources":[{"id":"qemu/1","type":"qemu","vmid":"x"}]}"#,
    );
    let (code, _, err) = run(&[
        "place",
        "--from-file",
        bad.to_str().unwrap(),
        "--memory",
        "1G",
        "--cores",
        "1",
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("resources[0].vmid"), "{err}");
    let (code, _, err) = run(&[
        "place",
        "--from-file",
        f,
        "--memory",
        "1G",
        "--cores",
        "1",
        "--policy",
        "nope",
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("unknown policy"), "{err}");
}

#[test]
fn named_host_is_used_when_it_has_room() {
    let f = example("rules-hetero.json");
    let (code, out, _) = run(&[
        "place",
        "--from-file",
        f.to_str().unwrap(),
        "--memory",
        "4G",
        "--cores",
        "2",
        "--host",
        "delta",
        "--json",
    ]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["node"], "delta");
    let warnings = v["warnings"].to_string();
    assert!(warnings.contains("taints"), "{warnings}");
}

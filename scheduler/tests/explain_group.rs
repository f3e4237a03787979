//! `explain` for a member of a pod group held to one rack: every rack's verdict and
//! placement scores, through the binary.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Command;

use serde_json::{Value, json};

const RACK: &str = "example.com/rack";

fn node(name: &str, rack: &str, cpu: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {RACK: rack}},
           "status": {"allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"}}})
}

fn member(i: usize, cpu: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": format!("job-{i}"), "namespace": "default",
                        "labels": {"scheduling.x-k8s.io/pod-group": "job"}},
           "spec": {"schedulerName": "custom-scheduler",
                    "containers": [{"name": "c", "image": "x",
                                    "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}})
}

/// Racks r0 (2 nodes of 4 CPUs), r1 (4 of 4) and r2 (1 of 2); a group of `n` members of
/// 2 CPUs, all needed, held to one rack.
fn dump(dir: &std::path::Path, n: usize) -> String {
    let mut items = vec![node("r0-0", "r0", "4"), node("r0-1", "r0", "4"), node("r2-0", "r2", "2")];
    items.extend((0..4).map(|i| node(&format!("r1-{i}"), "r1", "4")));
    items.push(json!({"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": "job", "namespace": "default",
                     "annotations": {"custom-scheduler/required-topology": RACK}},
        "spec": {"minMember": n}}));
    items.extend((0..n).map(|i| member(i, "2")));
    let path = dir.join("cluster.yaml");
    std::fs::write(&path, serde_json::to_string(&json!({"apiVersion": "v1", "kind": "List", "items": items})).unwrap())
        .unwrap();
    path.display().to_string()
}

fn explain(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_custom-scheduler")).arg("explain").args(args).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    (true, String::from_utf8(out.stdout).unwrap())
}

#[test]
fn explain_shows_each_racks_verdict_and_the_chosen_one() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = dump(dir.path(), 4);
    let (_, out) = explain(&["--cluster", &cluster, "--pod", "default/job-2", "--output", "json"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    let g = &v["group"];
    assert_eq!(g["group"], "default/job");
    assert_eq!(g["topologyKey"], RACK);
    assert_eq!((g["members"].as_u64(), g["need"].as_u64()), (Some(4), Some(4)));
    assert_eq!(g["chosen"], "r0", "{g:#}");
    let placements = g["placements"].as_object().unwrap();
    assert_eq!(placements.len(), 4);
    assert!(placements.values().all(|n| n.as_str().unwrap().starts_with("r0-")), "{placements:?}");
    // r0 is the tightest and holds all four: the search stops there; r2 is ruled out by
    // the capacity bound without placing anyone.
    let domains = g["domains"].as_array().unwrap();
    let by = |d: &str| domains.iter().find(|x| x["domain"] == d).unwrap().clone();
    let r0 = by("r0");
    assert_eq!(
        (r0["verdict"].as_str(), r0["placed"].as_u64(), r0["nodes"].as_u64()),
        (Some("chosen"), Some(4), Some(2))
    );
    assert_eq!(r0["scores"], json!({"TightestFit": 100, "PodGroupPodsCount": 100}));
    assert_eq!(r0["total"], 200);
    assert_eq!(by("r1")["verdict"], "not tried");
    assert!(by("r1").get("placed").is_none());
    assert_eq!(by("r2")["verdict"], "skipped");
    assert_eq!(by("r2")["reason"], "needs 8 cpu, 2 free");
    // The table says the same.
    let (_, table) = explain(&["--cluster", &cluster, "--pod", "default/job-2"]);
    assert!(
        table.contains("Pod group default/job (4 pending, 4 needed) would be placed in example.com/rack r0."),
        "{table}"
    );
    assert!(table.contains("Tightest×1") && table.contains("PodsCount×1"), "{table}");
    let r2 = table.lines().find(|l| l.starts_with("r2 ")).unwrap();
    assert!(r2.contains("skipped") && r2.contains("needs 8 cpu, 2 free"), "{table}");
    // And the HTML report has the domains' table.
    let html = dir.path().join("explain.html");
    explain(&["--cluster", &cluster, "--pod", "default/job-2", "--report", html.to_str().unwrap()]);
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("Pod group default/job by example.com/rack") && page.contains("domain-table"), "{page}");
    assert!(page.contains("needs 8 cpu, 2 free") && page.contains("TightestFit ×1"));
}

#[test]
fn explain_names_the_best_rack_of_a_group_no_rack_holds() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = dump(dir.path(), 9);
    let (_, out) = explain(&["--cluster", &cluster, "--pod", "default/job-0", "--output", "json"]);
    let g = serde_json::from_str::<Value>(&out).unwrap()["group"].clone();
    assert!(g["chosen"].is_null(), "{g:#}");
    assert!(g["placements"].as_object().unwrap().is_empty());
    let message = g["message"].as_str().unwrap();
    assert!(
        message.starts_with("pod group \"default/job\": no example.com/rack domain fits all 9 pods; best: r1 fits 8 ("),
        "{message}"
    );
    // Every rack is below the 18 CPUs needed; the roomiest is tried for the figures.
    let domains = g["domains"].as_array().unwrap();
    assert_eq!(domains[0]["domain"], "r1");
    assert_eq!((domains[0]["verdict"].as_str(), domains[0]["placed"].as_u64()), (Some("too few fit"), Some(8)));
    assert!(domains[1..].iter().all(|d| d["verdict"] == "skipped"), "{domains:?}");
    // The table's heading says it too.
    let (_, plain) = explain(&["--cluster", &cluster, "--pod", "default/job-0"]);
    assert!(plain.contains("fits no example.com/rack domain"), "{plain}");
}

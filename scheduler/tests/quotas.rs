//! ElasticQuotas through the binary: `simulate` and `explain` read them from a dump and
//! CapacityScheduling, enabled as scheduler-plugins' configurations enable it, holds each
//! namespace to its quota.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Command;

use serde_json::{Value, json};

const CLUSTER: &str = "tests/data/quota-cluster.yaml";
const CONFIG: &str = "tests/data/quota-config.yaml";

fn run_json(args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_custom-scheduler")).args(args).output().unwrap();
    assert!(out.status.success(), "{args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn simulate_holds_each_namespace_to_its_quota() {
    let r = run_json(&["simulate", "--cluster", CLUSTER, "--config", CONFIG, "--output", "json"]);
    let placed: Vec<&String> = r["placements"].as_object().unwrap().keys().collect();
    assert_eq!(placed, ["free/f-0", "team-a/a-0", "team-a/a-1", "team-a/a-2"], "{r}");
    let failures = &r["failures"];
    let tail = ". no new claims to deallocate, preemption: 0/2 nodes are available: 2 No preemption victims found \
                for incoming pod.";
    assert_eq!(
        failures["team-a/a-3"],
        format!(
            "0/2 nodes are available: Pod team-a/a-3 is rejected in PreFilter because ElasticQuota team-a is more \
             than Max{tail}"
        )
    );
    assert_eq!(
        failures["team-b/b-0"],
        format!(
            "0/2 nodes are available: Pod team-b/b-0 is rejected in PreFilter because total ElasticQuota used is \
             more than min{tail}"
        )
    );
    assert_eq!(
        r["quotas"],
        json!([
            {"quota": "team-a/team-a", "used": "cpu=4, memory=4Gi", "min": "cpu=2, memory=8Gi, ephemeral-storage=0",
             "max": "cpu=4, memory=16Gi"},
            {"quota": "team-b/team-b", "used": "none", "min": "cpu=2, memory=8Gi, ephemeral-storage=0",
             "max": "cpu=4, memory=16Gi"},
        ])
    );
}

#[test]
fn without_capacity_scheduling_in_the_profile_quotas_do_not_limit() {
    let r = run_json(&["simulate", "--cluster", CLUSTER, "--output", "json"]);
    assert_eq!(r["placements"].as_object().unwrap().len(), 6, "{r}");
}

#[test]
fn explain_names_the_quota_and_its_figures() {
    let dir = tempfile::tempdir().unwrap();
    let pod = dir.path().join("big.yaml");
    let manifest = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "big", "namespace": "team-a"},
        "spec": {"schedulerName": "custom-scheduler",
                 "containers": [{"name": "c", "image": "app:1", "resources": {"requests": {"cpu": "4"}}}]}});
    std::fs::write(&pod, manifest.to_string()).unwrap();
    let args =
        ["explain", "--cluster", CLUSTER, "--config", CONFIG, "--pod", pod.to_str().unwrap(), "--output", "json"];
    let r = run_json(&args);
    let node = &r["failedNodes"]["node-a"];
    assert_eq!(node["plugin"], "CapacityScheduling");
    assert_eq!(node["code"], "Unschedulable");
    assert_eq!(
        node["detail"],
        "ElasticQuota team-a/team-a: used cpu=1, memory=1Gi; min cpu=2, memory=8Gi, ephemeral-storage=0; max cpu=4, \
         memory=16Gi; the pod requests cpu=4"
    );
}

#[test]
fn a_pod_group_is_held_to_its_quota_whole() {
    let cluster = "tests/data/quota-gang-cluster.yaml";
    let r = run_json(&["simulate", "--cluster", cluster, "--config", CONFIG, "--output", "json"]);
    let placed: Vec<&String> = r["placements"].as_object().unwrap().keys().collect();
    assert_eq!(placed, ["team-a/small-0", "team-a/small-1"], "{r}");
    for i in 0..3 {
        let message = r["failures"][format!("team-a/big-{i}")].as_str().unwrap();
        assert!(message.starts_with(r#"pod group "team-a/big": "#), "{message}");
        assert!(message.contains("because ElasticQuota team-a is more than Max"), "{message}");
    }
    // The nodes hold the whole group: without quotas it is placed (and the small one
    // no longer fits).
    let r = run_json(&["simulate", "--cluster", cluster, "--output", "json"]);
    let placed: Vec<&String> = r["placements"].as_object().unwrap().keys().collect();
    assert_eq!(placed, ["team-a/big-0", "team-a/big-1", "team-a/big-2"], "{r}");
}

#[test]
fn a_namespace_within_its_min_takes_back_what_another_borrowed() {
    let profile = "../deploy/examples/quota-profile.yaml";
    let r = run_json(&["simulate", "--cluster", CLUSTER, "--config", profile, "--output", "json"]);
    // team-a ran over its min of 2 CPUs on team-b's idle guarantee; team-b's pod takes one
    // CPU back: one pod of team-a, no more, is evicted, and team-b's pod is placed.
    let preemptions = r["preemptions"].as_array().unwrap();
    assert_eq!(preemptions.len(), 1, "{r}");
    assert_eq!(preemptions[0]["preemptor"], "team-b/b-0");
    let victims = preemptions[0]["victims"].as_array().unwrap();
    assert_eq!(victims.len(), 1, "{r}");
    assert!(victims[0].as_str().unwrap().starts_with("team-a/"), "{r}");
    assert!(r["placements"]["team-b/b-0"].is_string(), "{r}");
    // team-a, over its min, may not evict its own pods of the same priority.
    let message = r["failures"]["team-a/a-3"].as_str().unwrap();
    assert!(message.ends_with("No victims found on node node-b for preemptor pod a-3."), "{message}");
}

#[test]
fn a_quota_tree_divides_the_cluster_by_guarantee_weight_and_demand() {
    let cluster = "tests/data/quota-tree-cluster.yaml";
    let profile = "../deploy/examples/quota-tree-profile.yaml";
    let r = run_json(&["simulate", "--cluster", cluster, "--config", profile, "--output", "json"]);
    let placed: Vec<&String> = r["placements"].as_object().unwrap().keys().collect();
    let want = [
        "team-a/a-0",
        "team-a/a-1",
        "team-a/a-2",
        "team-a/a-3",
        "team-a/a-4",
        "team-b/b-0",
        "team-b/b-1",
        "team-b/b-2",
    ];
    assert_eq!(placed, want, "{r}");
    let message = r["failures"]["team-a/a-5"].as_str().unwrap();
    assert!(
        message.starts_with(
            "0/2 nodes are available: Insufficient quotas, quotaName: team-a, runtime: cpu:5, used: cpu:5, pod's \
             request: cpu:1, exceedDimensions: [cpu]."
        ),
        "{message}"
    );
}

#[test]
fn a_quota_tree_reclaims_for_a_quota_below_its_min_and_no_further() {
    let cluster = "tests/data/quota-tree-reclaim.yaml";
    let profile = "../deploy/examples/quota-tree-profile.yaml";
    let r = run_json(&["simulate", "--cluster", cluster, "--config", profile, "--output", "json"]);
    let victims: Vec<&str> = r["preemptions"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["victims"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()))
        .collect();
    assert_eq!(victims.len(), 2, "{r}");
    assert!(victims.iter().all(|v| v.starts_with("team-a/")), "{r}");
    assert!(r["placements"]["team-b/b-0"].is_string() && r["placements"]["team-b/b-1"].is_string(), "{r}");
    assert!(r["failures"]["team-b/b-2"].as_str().unwrap().contains("No victims found"), "{r}");
}

#[test]
fn explain_shows_the_quota_path_its_shares_and_what_the_pod_would_borrow() {
    let cluster = "tests/data/quota-tree-reclaim.yaml";
    let profile = "../deploy/examples/quota-tree-profile.yaml";
    let r =
        run_json(&["explain", "--cluster", cluster, "--config", profile, "--pod", "team-b/b-0", "--output", "json"]);
    assert_eq!(
        r["notes"],
        json!([
            "quota research: min cpu:4, max cpu:8, used cpu:8, waiting cpu:3, runtime share cpu:8",
            "quota team-b: min cpu:2, max cpu:8, used cpu:0, waiting cpu:3, runtime share cpu:3",
            "the pod requests cpu:1: team-b would use cpu:1, borrowing cpu:0 beyond its min",
            "The pod is judged alone on the cluster as dumped: other pending pods are not placed first"
        ])
    );
    assert_eq!(r["preemption"]["victims"].as_array().unwrap().len(), 1, "{r}");
    let flat =
        run_json(&["explain", "--cluster", CLUSTER, "--config", CONFIG, "--pod", "team-a/a-0", "--output", "json"]);
    let note = flat["notes"][0].as_str().unwrap();
    assert!(note.starts_with("ElasticQuota team-a/team-a (namespace team-a): used cpu=1, memory=1Gi;"), "{note}");
    assert!(note.ends_with("with the pod it would use cpu=2, memory=2Gi, borrowing none beyond its min"), "{note}");
}

/// MultiTenantGPU at a sixteenth of its size, through the binary: with the quota tree no
/// quota passes its max, no gang is placed in part, and reclaims evict few pods; without
/// it, the same invariants of placement hold and nothing is reclaimed.
#[test]
fn the_multi_tenant_gpu_workload_keeps_its_invariants() {
    let args = |config: Option<&str>| {
        let mut a =
            vec!["simulate", "--workload", "MultiTenantGPU", "--nodes", "32", "--seed", "1", "--output", "json"];
        if let Some(c) = config {
            a.extend(["--config", c]);
        }
        run_json(&a)
    };
    let on = args(Some("../deploy/examples/quota-tree-profile.yaml"));
    let w = &on["workload"];
    assert_eq!(w["gpus"], 256, "{w}");
    assert_eq!((w["quotasOverMax"].as_u64(), w["gangsPlacedInPart"].as_u64()), (Some(0), Some(0)), "{w}");
    assert!(w["victimsPerReclaim"]["max"].as_u64().unwrap() <= 4, "{w}");
    assert!(on["scheduled"].as_u64().unwrap() > 100, "{on}");
    let off = args(None);
    assert_eq!(off["workload"]["reclaims"], 0);
    assert_eq!(off["workload"]["gangsPlacedInPart"], 0);
}

#[test]
fn the_simulate_report_page_lists_each_quotas_use() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("report.html");
    let profile = "../deploy/examples/quota-profile.yaml";
    run_json(&[
        "simulate",
        "--cluster",
        CLUSTER,
        "--config",
        profile,
        "--output",
        "json",
        "--report",
        page.to_str().unwrap(),
    ]);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("<section id=\"objects\">"), "no objects section");
    assert!(html.contains("<li>quota team-b/team-b: used cpu=1, memory=1Gi (min cpu=2"), "team-b's line");
}

#[test]
fn devices_allocated_through_dra_are_charged_as_allocated_and_kept_within_the_quota() {
    let cluster = "tests/data/quota-dra-cluster.yaml";
    let r = run_json(&["simulate", "--cluster", cluster, "--config", CONFIG, "--output", "json"]);
    let devices = |claim: &str| r["resourceClaims"][claim]["devices"].as_array().map_or(0, Vec::len);
    // team-a's max of 6 GPUs: four, then the smaller alternative, then nothing.
    assert_eq!((devices("team-a/train-0"), devices("team-a/train-1"), devices("team-a/train-2")), (4, 2, 0), "{r}");
    assert_eq!(
        r["failures"]["team-a/a-2"].as_str().unwrap().split(". ").next(),
        Some("0/1 nodes are available: 1 cannot allocate all claims within what ElasticQuota team-a/team-a leaves")
    );
    // team-b's claim, shared by both its pods, counts once against a max on the class's devices.
    assert_eq!(devices("team-b/shared"), 2);
    assert_eq!(r["resourceClaims"]["team-b/shared"]["reservedFor"], json!(["b-0", "b-1"]));
    let used: Vec<&str> = r["quotas"].as_array().unwrap().iter().map(|q| q["used"].as_str().unwrap()).collect();
    assert_eq!(
        used,
        [
            "cpu=2, gpu.example.com.deviceclass.resource.k8s.io/devices=6, nvidia.com/gpu=6",
            "cpu=2, gpu.example.com.deviceclass.resource.k8s.io/devices=2, nvidia.com/gpu=2"
        ]
    );
    // Without CapacityScheduling the first claims take four GPUs each and leave team-b none.
    let free = run_json(&["simulate", "--cluster", cluster, "--output", "json"]);
    assert_eq!(free["placements"].as_object().unwrap().len(), 3, "{free}");
}

//! End-to-end tests of `explain` and `simulate` through the binary.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Command;

use serde_json::Value;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_custom-scheduler"))
}

fn run_json(args: &[&str]) -> Value {
    let out = bin().args(args).output().unwrap();
    assert!(out.status.success(), "{args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

const DUMP: &str = "tests/data/cluster-dump.yaml";

#[test]
fn explain_reports_feasible_rejected_and_scored_nodes() {
    let r = run_json(&["explain", "--cluster", DUMP, "--pod", "team-a/web-0", "--output", "json"]);
    assert_eq!(r["pod"], "team-a/web-0");
    assert_eq!(r["feasibleNodes"], serde_json::json!(["node-a", "node-b", "node-reject-1"]));
    let gpu = &r["failedNodes"]["node-gpu"];
    assert_eq!(gpu["plugin"], "TaintToleration");
    assert_eq!(gpu["code"], "UnschedulableAndUnresolvable");
    assert_eq!(gpu["reasons"], serde_json::json!(["node(s) had untolerated taint(s)"]));
    assert!(gpu["detail"].as_str().unwrap().contains("dedicated=gpu:NoSchedule"));
    let a = &r["scores"]["node-a"];
    assert_eq!(a["plugins"]["TaintToleration"], 100);
    let total: i64 = [
        ("TaintToleration", 3),
        ("NodeAffinity", 2),
        ("NodeResourcesFit", 1),
        ("PodTopologySpread", 2),
        ("InterPodAffinity", 2),
        ("NodeResourcesBalancedAllocation", 1),
        ("ImageLocality", 1),
    ]
    .iter()
    .map(|(p, w)| a["plugins"][p].as_i64().unwrap() * w)
    .sum();
    assert_eq!(a["total"].as_i64().unwrap(), total);
    assert!(r["selectedNode"].is_string());
    assert!(r["message"].is_null());
}

#[test]
fn explain_gives_kube_schedulers_message_when_nothing_fits() {
    let r = run_json(&["explain", "--cluster", DUMP, "--pod", "default/too-big", "--output", "json"]);
    assert_eq!(r["feasibleNodes"], serde_json::json!([]));
    assert!(r["selectedNode"].is_null());
    assert_eq!(
        r["message"],
        "0/4 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 1 node(s) had untolerated \
         taint(s), 2 Insufficient cpu. no new claims to deallocate, preemption: 0/4 nodes are available: 4 Preemption \
         is not helpful for scheduling."
    );
    assert_eq!(r["failedNodes"]["node-a"]["code"], "UnschedulableAndUnresolvable");
}

#[test]
fn explain_takes_a_pod_manifest_file_and_prints_a_table() {
    let out = bin().args(["explain", "--cluster", DUMP, "--pod", "tests/data/pod-gpu.yaml"]).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("would be scheduled to node-gpu"), "{text}");
    assert!(text.contains("Rejected nodes (3)"), "{text}");
    assert!(text.contains("Insufficient example.com/gpu"), "{text}");
}

#[test]
fn simulate_schedules_the_dump_like_kube_scheduler() {
    let r = run_json(&["simulate", "--cluster", DUMP, "--output", "json"]);
    assert_eq!(r["scheduled"], 3);
    assert_eq!(r["unschedulable"], 2);
    assert_eq!(
        r["failures"]["team-a/trainer"],
        "0/4 nodes are available: 1 Insufficient example.com/gpu, 3 node(s) didn't match Pod's node affinity/selector. \
         no new claims to deallocate, preemption: 0/4 nodes are available: 1 No preemption victims found for incoming \
         pod, 3 Preemption is not helpful for scheduling."
    );
    // web-0 and web-1 repel each other per host and spread per zone.
    let w0 = r["placements"]["team-a/web-0"].as_str().unwrap();
    let w1 = r["placements"]["team-a/web-1"].as_str().unwrap();
    assert_ne!(w0, w1);
    for key in ["podsPerSecond", "seconds"] {
        assert!(r[key].is_number(), "{key}");
    }
    assert!(r["latencyMs"]["p50"].is_number() && r["latencyMs"]["p99"].is_number());
}

#[test]
fn simulate_runs_the_demo_and_writes_a_cluster_that_explain_reads() {
    let dir = std::env::temp_dir().join(format!("cs-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("after.json");
    let r = run_json(&["simulate", "--output", "json", "--write", out.to_str().unwrap()]);
    assert!(r["scheduled"].as_u64().unwrap() > 1100, "{}", r["scheduled"]);
    for pod in ["batch/monster", "default/arm-only", "ml/gpu-no-toleration", "ml/huge-train"] {
        assert!(r["failures"][pod].as_str().unwrap().starts_with("0/312 nodes are available: "), "{pod}");
    }
    let again = run_json(&["simulate", "--cluster", out.to_str().unwrap(), "--output", "json"]);
    assert_eq!(again["scheduled"], 0, "every placed pod is bound in the written cluster");
    assert_eq!(again["unschedulable"], r["unschedulable"]);
    let e = run_json(&["explain", "--cluster", out.to_str().unwrap(), "--pod", "ml/huge-train", "--output", "json"]);
    // The cluster is fuller now than when the pod was first tried, so only the shape is the same.
    let msg = e["message"].as_str().unwrap();
    assert!(msg.starts_with("0/312 nodes are available: ") && msg.contains("307 Insufficient nvidia.com/gpu"), "{msg}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn same_seed_gives_the_same_placements() {
    let a = run_json(&["simulate", "--output", "json", "--seed", "3"]);
    let b = run_json(&["simulate", "--output", "json", "--seed", "3"]);
    assert_eq!(a["placements"], b["placements"]);
}

fn fails_with(args: &[&str], needles: &[&str]) {
    let out = bin().args(args).output().unwrap();
    assert!(!out.status.success(), "{args:?} should fail");
    let err = String::from_utf8_lossy(&out.stderr);
    for n in needles {
        assert!(err.contains(n), "{args:?}: {err}");
    }
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn bad_input_is_a_clear_error() {
    fails_with(&["simulate", "--cluster", "tests/data/bad-quantity.yaml"], &["Node broken-node", "four"]);
    fails_with(
        &["simulate", "--cluster", "tests/data/bad-type.json"],
        &["Pod p", "spec.containers[0].ports[0].containerPort"],
    );
    fails_with(&["simulate", "--cluster", "tests/data/missing.yaml"], &["failed to read", "missing.yaml"]);
    fails_with(&["explain", "--cluster", DUMP, "--pod", "nope/nothing"], &["nope/nothing"]);
    fails_with(&["simulate", "--config", "tests/data/pod-gpu.yaml"], &["pod-gpu.yaml"]);
}

const PREEMPT: &str = "tests/data/preemption.yaml";

#[test]
fn simulate_preempts_low_priority_pods_and_spares_the_budgeted_ones() {
    let r = run_json(&["simulate", "--cluster", PREEMPT, "--output", "json"]);
    // node-a's low pods are protected by a budget allowing no disruption; node-b's are not.
    assert_eq!(r["placements"]["default/urgent"], "node-b");
    assert_eq!(r["preemptions"][0]["preemptor"], "default/urgent");
    assert_eq!(r["preemptions"][0]["node"], "node-b");
    assert_eq!(r["preemptions"][0]["victims"], serde_json::json!(["default/batch-b1", "default/batch-b2"]));
    assert!(r["placements"].get("default/batch-b1").is_none());
    // A pod that may not preempt waits with kube-scheduler's message.
    assert_eq!(
        r["failures"]["default/polite"],
        "0/2 nodes are available: 2 Insufficient cpu. no new claims to deallocate, preemption: not eligible due to \
         preemptionPolicy=Never."
    );
}

#[test]
fn explain_shows_what_preemption_would_do() {
    let r = run_json(&["explain", "--cluster", PREEMPT, "--pod", "default/urgent", "--output", "json"]);
    assert!(r["selectedNode"].is_null());
    assert_eq!(r["preemption"]["node"], "node-b");
    assert_eq!(r["preemption"]["victims"], serde_json::json!(["default/batch-b1", "default/batch-b2"]));
    assert_eq!(r["preemption"]["pdbViolations"], 0);
    let text = String::from_utf8(
        bin().args(["explain", "--cluster", PREEMPT, "--pod", "default/urgent"]).output().unwrap().stdout,
    )
    .unwrap();
    assert!(text.contains("Preemption would nominate it to node-b and evict 2 pod(s)"), "{text}");
}

#[test]
fn simulate_places_pod_groups_whole_or_not_at_all() {
    let r = run_json(&["simulate", "--cluster", "tests/data/gang-cluster.yaml", "--output", "json"]);
    let placed: Vec<&String> = r["placements"].as_object().unwrap().keys().collect();
    assert_eq!(placed, ["ml/small-0", "ml/small-1"], "{r}");
    let failures = r["failures"].as_object().unwrap();
    assert_eq!(failures.len(), 4);
    for (pod, message) in failures {
        assert!(pod.starts_with("ml/big-"), "{pod}");
        assert!(
            message.as_str().unwrap().starts_with(r#"pod group "ml/big": 1 of the 4 pods it needs fit; "#),
            "{message}"
        );
    }
}

const VOLUMES: &str = "tests/data/volumes-cluster.yaml";

#[test]
fn simulate_binds_and_provisions_claims_before_placing_their_pods() {
    let r = run_json(&["simulate", "--cluster", VOLUMES, "--output", "json"]);
    let placed = &r["placements"];
    // The StatefulSet-shaped pods spread over the three zones; each claim got a volume.
    let nodes: std::collections::BTreeSet<&str> =
        (0..3).map(|i| placed[format!("db/db-{i}")].as_str().unwrap()).collect();
    assert_eq!(nodes.len(), 3, "{r}");
    for i in 0..3 {
        assert_eq!(r["claims"][format!("db/data-db-{i}")], format!("pvc-uid-data-db-{i}"), "{r}");
    }
    // The pod whose claim is bound to a zone-b volume goes to zone b.
    assert_eq!(placed["db/pinned"], "node-b");
    // Two new volumes exceed node-c's limit of one, and node-b's three (two attached there).
    assert_eq!(placed["db/two-disks"], "node-a");
    assert_eq!(r["claims"]["db/scratch-1"], "pvc-uid-scratch-1");
    // After a PreFilter rejection kube-scheduler v1.36's message ends with DynamicResources'
    // PostFilter failing ("not found"), and preemption is not tried.
    assert_eq!(
        r["failures"]["db/waiting"],
        "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims. not found"
    );
    assert_eq!(
        r["failures"]["db/orphan"],
        "0/3 nodes are available: persistentvolumeclaim \"missing\" not found. not found"
    );
}

#[test]
fn explain_names_the_volume_plugin_that_rejects_each_node() {
    let r = run_json(&["explain", "--cluster", VOLUMES, "--pod", "db/pinned", "--output", "json"]);
    assert_eq!(r["feasibleNodes"], serde_json::json!(["node-b"]));
    for node in ["node-a", "node-c"] {
        let f = &r["failedNodes"][node];
        assert_eq!(f["plugin"], "VolumeBinding");
        assert_eq!(f["reasons"], serde_json::json!(["node(s) didn't match PersistentVolume's node affinity"]));
        assert_eq!(f["detail"], "volume pv-logs of claim logs-pinned is not reachable from this node");
    }
    let r = run_json(&["explain", "--cluster", VOLUMES, "--pod", "db/two-disks", "--output", "json"]);
    let c = &r["failedNodes"]["node-c"];
    assert_eq!(c["plugin"], "NodeVolumeLimits");
    assert_eq!(c["code"], "Unschedulable");
    assert_eq!(c["reasons"], serde_json::json!(["node(s) exceed max volume count"]));
    assert_eq!(c["detail"], "ebs.csi.aws.com: 0 attached + 2 new > limit 1");
}

#[test]
fn storage_capacity_scoring_is_a_feature_gate() {
    let plugins = |extra: &[&str]| -> Vec<String> {
        let mut args = vec!["explain", "--cluster", VOLUMES, "--pod", "db/db-0", "--output", "json"];
        args.extend_from_slice(extra);
        let r = run_json(&args);
        let node = r["selectedNode"].as_str().unwrap().to_string();
        r["scores"][node]["plugins"].as_object().unwrap().keys().cloned().collect()
    };
    assert!(!plugins(&[]).contains(&"VolumeBinding".to_string()));
    assert!(plugins(&["--feature-gates", "StorageCapacityScoring=true"]).contains(&"VolumeBinding".to_string()));
    fails_with(
        &["explain", "--cluster", VOLUMES, "--pod", "db/db-0", "--feature-gates", "Bogus=true"],
        &["unrecognized feature gate: Bogus"],
    );
}

/// A dump with a driver's ResourceSlice (one GPU on n-a), a DeviceClass, a template and
/// two pods asking for a GPU each: one gets it (its claim made from the template as the
/// resourceclaim controller would), the other waits with kube-scheduler's message, and
/// `explain` names DynamicResources on the node without devices.
#[test]
fn simulate_and_explain_read_dra_objects_from_a_dump() {
    const DRA: &str = "tests/data/dra-cluster.yaml";
    let r = run_json(&["simulate", "--cluster", DRA, "--output", "json"]);
    assert_eq!(r["placements"], serde_json::json!({"default/train-0": "n-a"}));
    assert_eq!(
        r["resourceClaims"],
        serde_json::json!({"default/train-0-gpu": {"devices": ["gpu.example.com/n-a/gpu-0"], "reservedFor": ["train-0"]}})
    );
    assert_eq!(
        r["failures"]["default/train-1"],
        "0/2 nodes are available: 2 cannot allocate all claims. still not schedulable, preemption: 0/2 nodes are \
         available: 2 Preemption is not helpful for scheduling."
    );
    let e = run_json(&["explain", "--cluster", DRA, "--pod", "default/train-1", "--output", "json"]);
    assert_eq!(e["feasibleNodes"], serde_json::json!(["n-a"]));
    assert_eq!(e["failedNodes"]["n-b"]["plugin"], "DynamicResources");
    assert_eq!(e["failedNodes"]["n-b"]["reasons"], serde_json::json!(["cannot allocate all claims"]));
}

#[test]
fn a_configuration_error_is_told_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.yaml");
    std::fs::write(
        &path,
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n\
         - schedulerName: custom-scheduler\n  plugins:\n    multiPoint:\n      enabled:\n      - name: NodeMagic\n",
    )
    .unwrap();
    for mode in ["run", "simulate"] {
        let out = bin().args([mode, "--config", path.to_str().unwrap()]).output().unwrap();
        assert!(!out.status.success(), "{mode}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.matches("unknown plugin \"NodeMagic\"").count(), 1, "{mode}: {stderr}");
        assert!(stderr.contains("config.yaml"), "{mode}: {stderr}");
    }
}

#[test]
fn a_reader_that_goes_away_ends_the_output_quietly() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    // More output than a pipe holds, read one line of, as `| head -1` does.
    let mut child = bin()
        .args(["simulate", "--workload", "SchedulingBasic", "--nodes", "100", "--pods", "3000", "--output", "json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    assert_eq!(first.trim(), "{");
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {stderr}", out.status);
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn simulate_help_and_its_error_list_every_workload() {
    let help = String::from_utf8(bin().args(["simulate", "--help"]).output().unwrap().stdout).unwrap();
    let out = bin().args(["simulate", "--workload", "Nope"]).output().unwrap();
    let error = String::from_utf8_lossy(&out.stderr).to_string();
    for name in scheduler::synthetic::workloads::WORKLOADS.iter().map(|w| w.0).chain(["MultiTenantGPU"]) {
        assert!(help.contains(name), "--help does not name {name}");
        assert!(error.contains(name), "the unknown-workload error does not name {name}: {error}");
    }
}

#[test]
fn a_workload_cannot_be_written_and_an_empty_cluster_warns() {
    let out = bin().args(["simulate", "--workload", "GangTrainingTopology", "--write", "/dev/null"]).output().unwrap();
    assert!(!out.status.success());
    let error = String::from_utf8_lossy(&out.stderr);
    assert!(error.contains("'--workload <WORKLOAD>' cannot be used with '--write <WRITE>'"), "{error}");
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.yaml");
    std::fs::write(&empty, "apiVersion: v1\nkind: List\nitems: []\n").unwrap();
    let out = bin().args(["simulate", "--cluster", empty.to_str().unwrap()]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let warning = String::from_utf8_lossy(&out.stderr);
    assert!(warning.contains("has no nodes: every pod will be unschedulable"), "{warning}");
}

#[test]
fn explain_says_when_the_pod_is_already_bound_and_that_it_judges_it_alone() {
    let r = run_json(&[
        "explain",
        "--cluster",
        "tests/data/cluster-dump.yaml",
        "--pod",
        "default/gpu-2",
        "--output",
        "json",
    ]);
    let notes: Vec<&str> = r["notes"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
    assert_eq!(notes[0], "default/gpu-2 is bound to node-gpu: judged as if it were pending, without itself there");
    assert!(notes.last().unwrap().starts_with("The pod is judged alone"), "{notes:?}");
}

#[test]
fn simulate_groups_unschedulable_pods_by_reason_and_lists_them_on_request() {
    let grouped = String::from_utf8(bin().args(["simulate"]).output().unwrap().stdout).unwrap();
    let (_, pending) = grouped.split_once("Unschedulable pods by reason").expect("the grouped section");
    assert!(pending.contains("ml/train-26, ml/train-36, ml/train-45 and 4 more"), "{pending}");
    let listed = String::from_utf8(bin().args(["simulate", "--list-pending"]).output().unwrap().stdout).unwrap();
    let (_, each) = listed.split_once("\nUnschedulable pods:\n").expect("the per-pod list");
    assert_eq!(each.lines().count(), 13, "{each}");
}

#[test]
fn logs_to_a_file_or_pipe_carry_no_colour_codes() {
    let out = bin()
        .args(["explain", "--cluster", "tests/data/cluster-dump.yaml", "--pod", "default/gpu-2"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("the pod names another scheduler"), "{stderr}");
    assert!(!stderr.contains('\u{1b}'), "{stderr:?}");
}

/// `run` against an API server that refuses connections: one line per watched kind when
/// it starts failing, each naming the server and the cause, nothing from the client's
/// own logging, and no conclusion that a kind is not served.
#[test]
fn an_unreachable_api_server_is_reported_once_per_kind_with_its_address_and_cause() {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let server = format!("https://127.0.0.1:{port}");
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters: [{{name: c, cluster: {{server: \"{server}\"}}}}]\n\
             users: [{{name: u, user: {{token: t}}}}]\ncontexts: [{{name: c, context: {{cluster: c, user: u}}}}]\n"
        ),
    )
    .unwrap();
    let mut child = bin()
        .args(["run", "--listen", "127.0.0.1:0", "--kubeconfig"])
        .arg(&kubeconfig)
        .env_remove("RUST_LOG")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_secs(6));
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    let warnings: Vec<&str> = log.lines().filter(|l| l.contains("WARN")).collect();
    assert!(warnings.len() >= 8, "{log}");
    assert!(log.lines().count() < 40, "{} lines:\n{log}", log.lines().count());
    for w in &warnings {
        assert!(w.contains(&server) && w.contains("Connection refused"), "{w}");
    }
    let mut kinds: Vec<&str> = warnings.iter().filter_map(|w| w.split("kind=\"").nth(1)?.split('"').next()).collect();
    let all = kinds.len();
    kinds.sort();
    kinds.dedup();
    assert_eq!(kinds.len(), all, "a kind reported twice: {log}");
    for absent in ["kube_client", "not served", "Status {", "ERROR"] {
        assert!(!log.contains(absent), "{absent}: {log}");
    }
}

//! Cases where we once differed from kube-scheduler v1.36.2, each one pod on one cluster
//! recorded from a real kube-apiserver on which the real kube-scheduler decided
//! (`kube-scheduler.json`: its node or its message, and where its log gave them, its
//! weighted scores per plugin). `explain` must give the same answer.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Command;

use serde_json::Value;

fn explain(case: &str) -> (Value, Value) {
    let dir = format!("tests/data/kube-differences/{case}");
    let out = Command::new(env!("CARGO_BIN_EXE_custom-scheduler"))
        .args(["explain", "--cluster", &format!("{dir}/dump.yaml"), "--pod", &format!("{dir}/pod.yaml")])
        .args(["--output", "json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{case}: {}", String::from_utf8_lossy(&out.stderr));
    let ours: Value = serde_json::from_slice(&out.stdout).unwrap();
    let kube: Value =
        serde_json::from_str(&std::fs::read_to_string(format!("{dir}/kube-scheduler.json")).unwrap()).unwrap();
    (ours, kube)
}

/// The node kube-scheduler bound the pod to, or its message, and every plugin score and
/// total its log gave, compared with ours.
fn same_answer(case: &str) {
    let (ours, kube) = explain(case);
    match kube["outcome"].as_str().unwrap() {
        "bound" => assert_eq!(ours["selectedNode"], kube["node"], "{case}: {ours}"),
        _ => assert_eq!(ours["message"], kube["message"], "{case}"),
    }
    let Some(scores) = kube["scores"]["plugins"].as_object() else { return };
    let profile = algorithms::config::default_profile("custom-scheduler");
    let weight = |plugin: &str| profile.scores.iter().find(|s| s.plugin.name() == plugin).map_or(1, |s| s.weight);
    for (node, by_plugin) in scores {
        for (plugin, want) in by_plugin.as_object().unwrap() {
            // kube-scheduler's log gives weighted scores; explain gives each plugin's own.
            let got = ours["scores"][node]["plugins"][plugin].as_i64().unwrap() * weight(plugin);
            assert_eq!(Some(got), want.as_i64(), "{case}: {plugin} on {node}: {}", ours["scores"][node]);
        }
        if let Some(total) = kube["scores"]["totals"][node].as_i64() {
            assert_eq!(ours["scores"][node]["total"].as_i64(), Some(total), "{case}: total on {node}");
        }
    }
}

#[test]
fn fractional_memory_requests_are_summed_before_they_are_rounded_up() {
    same_answer("fractional-memory-sum");
    same_answer("s41-c02");
    // The same rounding once added `Insufficient memory` to kube-scheduler's message.
    same_answer("s63-c02");
}

#[test]
fn a_pod_with_only_pod_level_requests_scores_by_its_containers_defaults() {
    same_answer("podlevel-fit-score");
}

#[test]
fn a_gpu_pod_with_a_container_without_requests_scores_as_kube_scheduler_scores_it() {
    same_answer("s100-c05");
}

#[test]
fn dynamic_resources_scores_with_kube_schedulers_default_weight() {
    same_answer("dra-score-weight");
}

#[test]
fn a_filter_plugins_error_is_worded_as_kube_schedulers_framework_words_it() {
    same_answer("dra-filter-error-prefix");
}

#[test]
fn a_placed_pods_pod_level_requests_count_on_its_node_for_scoring() {
    same_answer("podlevel-existing-fit");
}

#[test]
fn a_selectors_error_comes_before_any_count_of_free_devices() {
    // Two devices wanted, one free: kube-scheduler evaluates the selector on it.
    same_answer("dra-cel-error-too-few-devices");
    // An `All` request's selectors are evaluated before the search, whatever an earlier
    // request of the claim finds.
    same_answer("dra-cel-error-all-mode");
}

/// In the preemption dry run, a terminating lower-priority pod taken off a node comes off
/// PodTopologySpread's counts although its PreFilter never counted it (kube-scheduler's
/// RemovePod): the node passes the spread check and fails on pod affinity instead.
#[test]
fn a_terminating_victim_comes_off_the_spread_counts_in_the_preemption_dry_run() {
    same_answer("preemption-spread-after-victims");
}

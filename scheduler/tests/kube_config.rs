//! kube-scheduler v1.36.2's own configuration (`kube-scheduler --write-config-to`), its
//! profile renamed, is accepted by `simulate`, `extender` and `run`, with the placements
//! they make without a configuration. The kube-scheduler binary comes from `KUBE_ASSETS`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod realapi;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use algorithms::builders::{NodeBuilder, PodBuilder};
use serde_json::Value;
use testing::api;

const DUMP: &str = "tests/data/cluster-dump.yaml";

/// kube-scheduler's configuration as it writes it, as YAML text, with its profile named
/// `custom-scheduler`; `None` when the binaries are not configured outside CI.
fn kube_config(test: &str, dir: &Path) -> Option<(PathBuf, Value)> {
    let assets = testing::assets_or_skip(test)?;
    let written = dir.join("kube-scheduler-config.yaml");
    let out = Command::new(assets.kube_scheduler())
        // It writes the configuration and exits before it would connect to anything.
        .arg("--master=https://127.0.0.1:1")
        // No serving port: tests running side by side would compete for the default one.
        .arg("--secure-port=0")
        .arg(format!("--write-config-to={}", written.display()))
        .output()
        .unwrap();
    assert!(out.status.success(), "kube-scheduler --write-config-to: {}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&written).unwrap();
    assert!(text.contains("NodeDeclaredFeatures") && text.contains("placementScore"), "{text}");
    let renamed = text.replace("schedulerName: default-scheduler", "schedulerName: custom-scheduler");
    let path = dir.join("config.yaml");
    std::fs::write(&path, &renamed).unwrap();
    Some((path, serde_yaml::from_str(&renamed).unwrap()))
}

fn simulate(args: &[&str]) -> Value {
    let out = Command::new(realapi::BIN).arg("simulate").args(args).args(["--output", "json"]).output().unwrap();
    assert!(out.status.success(), "simulate {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn simulate_and_the_extender_accept_kube_schedulers_own_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let Some((config, _)) =
        kube_config("simulate_and_the_extender_accept_kube_schedulers_own_configuration", dir.path())
    else {
        return;
    };
    let config = config.to_str().unwrap();
    for cluster in [&["--cluster", DUMP][..], &[][..]] {
        let plain = simulate(cluster);
        let with = simulate(&[cluster, &["--config", config]].concat());
        assert_eq!(with["placements"], plain["placements"], "{cluster:?}");
        assert_eq!(with["failures"], plain["failures"], "{cluster:?}");
        assert!(plain["scheduled"].as_u64().unwrap() > 0);
    }

    // The extender starts with it and answers.
    let port = testing::free_port().unwrap();
    let mut child = Command::new(realapi::BIN)
        .args(["extender", "--listen", &format!("127.0.0.1:{port}"), "--config", config])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let healthy = rt.block_on(async {
        for _ in 0..100 {
            let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
            if realapi::http_get(addr, "/healthz").await.is_some_and(|b| b.contains("ok")) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        false
    });
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    assert!(healthy, "the extender did not come up: {}", String::from_utf8_lossy(&out.stderr));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_accepts_kube_schedulers_own_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let Some((_, config)) = kube_config("run_accepts_kube_schedulers_own_configuration", dir.path()) else {
        return;
    };
    let Some(p) = realapi::plane("run_accepts_kube_schedulers_own_configuration").await else {
        return;
    };
    let client = &p.client;
    for i in 0..3 {
        let node = NodeBuilder::new(&format!("node-{i}")).capacity("4", "16Gi", "110").build();
        api::create_node(client, &node).await.unwrap();
    }
    api::create_namespace(client, "cfg").await.unwrap();
    let pods: Vec<_> = (0..12)
        .map(|i| {
            let mut pod = PodBuilder::new(&format!("p-{i}")).scheduler("custom-scheduler").req("500m", "1Gi").build();
            pod.metadata.namespace = Some("cfg".into());
            pod
        })
        .collect();
    api::create_pods(client, &pods, 4).await.unwrap();
    // Its leader election (a Lease in kube-system) and client rate (50/s) included.
    let ours = realapi::Ours::start(&p.plane, "custom-scheduler", Some(config), &[]);
    let bound = api::wait_bound(client, "cfg", 12, Duration::from_secs(60)).await;
    let errors = testing::check::placement_errors(&api::nodes(client).await.unwrap(), &bound);
    assert!(errors.is_empty(), "{errors:?}");
    // Spread by LeastAllocated: four pods a node.
    let mut per_node = std::collections::BTreeMap::<String, usize>::new();
    for pod in &bound {
        *per_node.entry(api::node_of(pod).unwrap().to_string()).or_default() += 1;
    }
    assert_eq!(per_node.values().copied().collect::<Vec<_>>(), [4, 4, 4], "{per_node:?}");
    let log = std::fs::read_to_string(ours.process.log()).unwrap();
    assert!(!log.contains("unknown plugin"), "{log}");
}

/// Our default profile against kube-scheduler v1.36.2's own, as it writes it: the same
/// plugins in the same order, each scoring plugin with the same weight. The plugins it
/// lists that are not plugins here are the queue's order, scheduling gates and the
/// binder, which the scheduler runs itself.
#[test]
fn the_default_profile_orders_and_weighs_plugins_as_kube_schedulers_own() {
    use algorithms::plugins::registry::PLUGINS;
    let dir = tempfile::tempdir().unwrap();
    let Some((_, config)) =
        kube_config("the_default_profile_orders_and_weighs_plugins_as_kube_schedulers_own", dir.path())
    else {
        return;
    };
    let theirs: Vec<(String, i64)> = config["profiles"][0]["plugins"]["multiPoint"]["enabled"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["name"].as_str().unwrap().to_string(), p["weight"].as_i64().unwrap_or(0)))
        .collect();
    let ran_by_the_scheduler = ["SchedulingGates", "PrioritySort", "DefaultBinder"];
    let gates = algorithms::features::FeatureGates::default();
    let ours: Vec<(String, i64)> = PLUGINS
        .iter()
        .filter(|p| p.in_default)
        .map(|p| {
            let built = (p.build)(p.name, None, gates).unwrap();
            (p.name.to_string(), if built.score.is_some() { p.weight } else { 0 })
        })
        .collect();
    let expected: Vec<(String, i64)> =
        theirs.into_iter().filter(|(name, _)| !ran_by_the_scheduler.contains(&name.as_str())).collect();
    assert_eq!(ours, expected);
}

/// A file with misspelt fields: kube-scheduler v1.36.2 refuses it, and so does every mode
/// here, naming the same fields in the same order.
#[test]
fn misspelt_fields_are_refused_as_kube_scheduler_refuses_them() {
    let Some(assets) = testing::assets_or_skip("misspelt_fields_are_refused_as_kube_scheduler_refuses_them") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
percentageOfNodesToScor: 50
profile: [{schedulerName: other}]
profiles:
  - schedulerName: custom-scheduler
    pluginConfg: []
    plugins:
      score: {enabeld: [{name: ImageLocality}]}
clientConnection: {qpss: 5}
leaderElection: {leaderElect: false, resourceNamespac: x}
",
    )
    .unwrap();
    let out = Command::new(assets.kube_scheduler())
        .args(["--master=https://127.0.0.1:1", "--secure-port=0", "--config"])
        .arg(&config)
        .arg(format!("--write-config-to={}", dir.path().join("written.yaml").display()))
        .output()
        .unwrap();
    assert!(!out.status.success());
    // Its log quotes the error inside a structured field.
    let theirs = String::from_utf8_lossy(&out.stderr).replace("\\\"", "\"");
    let start = theirs.find("strict decoding error:").unwrap_or_else(|| panic!("{theirs}"));
    let end = start + theirs[start..].rfind("\"\"").map_or(theirs[start..].trim_end().len() - 1, |i| i + 1);
    let list = &theirs[start..end];
    assert!(list.contains("unknown field \"profiles[0].plugins.score.enabeld\""), "{list}");

    let config = config.to_str().unwrap();
    let cluster = "tests/data/cluster-dump.yaml";
    let port = format!("127.0.0.1:{}", testing::free_port().unwrap());
    for args in [
        &["simulate", "--config", config][..],
        &["explain", "--cluster", cluster, "--pod", "default/any", "--config", config],
        &["extender", "--listen", &port, "--config", config],
        &["run", "--kubeconfig", "/nonexistent", "--config", config],
    ] {
        let out = Command::new(realapi::BIN).args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(list), "{args:?}: ours {stderr}\ntheirs {list}");
    }
}

/// Every plugin argument kube-scheduler v1.36.2 writes for its default profile gives the
/// plugin the same settings here as no arguments do: each plugin is built from
/// kube-scheduler's arguments and from none, and the two are compared whole (weights
/// and scores, timeouts, strategies, default constraints). A plugin kube-scheduler
/// configures that is not compared here fails the test.
#[test]
fn every_default_plugin_argument_is_kube_schedulers_own() {
    use algorithms::plugins::roles::parse;
    use algorithms::plugins::{
        balanced_allocation::BalancedAllocation, dynamic_resources::DynamicResourcesArgs,
        inter_pod_affinity::InterPodAffinity, node_affinity::NodeAffinity, node_resources_fit::NodeResourcesFit,
        pod_topology_spread::PodTopologySpread, volume_binding::VolumeBindingArgs,
    };
    use algorithms::preemption::PreemptionArgs;
    fn same<T: std::fmt::Debug>(name: &str, theirs: T, ours: T) {
        assert_eq!(
            format!("{theirs:?}"),
            format!("{ours:?}"),
            "{name}: built from kube-scheduler's args, then from none"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let Some((_, config)) = kube_config("every_default_plugin_argument_is_kube_schedulers_own", dir.path()) else {
        return;
    };
    let mut compared = Vec::new();
    for entry in config["profiles"][0]["pluginConfig"].as_array().unwrap() {
        let name = entry["name"].as_str().unwrap();
        let args = Some(&entry["args"]);
        match name {
            "DefaultPreemption" => {
                same(name, PreemptionArgs::from_args(args).unwrap(), PreemptionArgs::from_args(None).unwrap())
            }
            "DynamicResources" => {
                same(name, parse::<DynamicResourcesArgs>(name, args).unwrap(), parse(name, None).unwrap())
            }
            "InterPodAffinity" => same(
                name,
                InterPodAffinity::new(&parse(name, args).unwrap()).unwrap(),
                InterPodAffinity::new(&parse(name, None).unwrap()).unwrap(),
            ),
            "NodeAffinity" => same(
                name,
                NodeAffinity::new(&parse(name, args).unwrap()),
                NodeAffinity::new(&parse(name, None).unwrap()),
            ),
            "NodeResourcesBalancedAllocation" => same(
                name,
                BalancedAllocation::new(&parse(name, args).unwrap()).unwrap(),
                BalancedAllocation::new(&parse(name, None).unwrap()).unwrap(),
            ),
            "NodeResourcesFit" => same(
                name,
                NodeResourcesFit::new(&parse(name, args).unwrap()).unwrap(),
                NodeResourcesFit::new(&parse(name, None).unwrap()).unwrap(),
            ),
            "PodTopologySpread" => same(
                name,
                PodTopologySpread::new(&parse(name, args).unwrap()).unwrap(),
                PodTopologySpread::new(&parse(name, None).unwrap()).unwrap(),
            ),
            "VolumeBinding" => same(name, parse::<VolumeBindingArgs>(name, args).unwrap(), parse(name, None).unwrap()),
            other => panic!("kube-scheduler configures {other}, which this test does not compare"),
        }
        compared.push(name);
    }
    assert_eq!(compared.len(), 8, "{compared:?}");
}

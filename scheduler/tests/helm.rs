//! The Helm chart in deploy/helm/custom-scheduler: every value is used by a template, and
//! (where helm is installed) each mode renders into the objects it should hold, with a
//! configuration the scheduler accepts and arguments its command line accepts.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::Command;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use serde::Deserialize;
use serde_json::Value;

const CHART: &str = "../deploy/helm/custom-scheduler";
const BIN: &str = env!("CARGO_BIN_EXE_custom-scheduler");

/// Every leaf of `value` as a dotted path.
fn leaves(value: &Value, prefix: &str, out: &mut Vec<String>) {
    match value.as_object() {
        Some(map) if !map.is_empty() => {
            for (k, v) in map {
                let path = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                leaves(v, &path, out);
            }
        }
        _ => out.push(prefix.to_string()),
    }
}

/// Whether `.Values.<path>` is read whole somewhere (not only through a longer path).
fn read_whole(templates: &str, path: &str) -> bool {
    let needle = format!(".Values.{path}");
    templates.match_indices(&needle).any(|(at, _)| {
        let next = templates[at + needle.len()..].chars().next();
        !matches!(next, Some(c) if c.is_ascii_alphanumeric() || c == '_' || c == '.')
    })
}

#[test]
fn every_chart_value_is_used_by_a_template() {
    let chart: Value = serde_yaml::from_str(&std::fs::read_to_string(Path::new(CHART).join("Chart.yaml")).unwrap())
        .expect("Chart.yaml is YAML");
    assert_eq!(chart["apiVersion"], "v2");
    assert_eq!(chart["name"], "custom-scheduler");
    let values: Value = serde_yaml::from_str(&std::fs::read_to_string(Path::new(CHART).join("values.yaml")).unwrap())
        .expect("values.yaml is YAML");
    let mut templates = String::new();
    for entry in std::fs::read_dir(Path::new(CHART).join("templates")).unwrap() {
        templates.push_str(&std::fs::read_to_string(entry.unwrap().path()).unwrap());
    }
    let mut paths = Vec::new();
    leaves(&values, "", &mut paths);
    assert!(paths.len() > 20, "{paths:?}");
    let unused: Vec<&String> = paths
        .iter()
        .filter(|p| {
            // A value counts as used when it, or an object holding it, is read whole.
            let parts: Vec<&str> = p.split('.').collect();
            !(1..=parts.len()).any(|n| read_whole(&templates, &parts[..n].join(".")))
        })
        .collect();
    assert!(unused.is_empty(), "values no template reads: {unused:?}");
}

/// `helm template` of the chart with `--set` pairs, as JSON documents; `Err` holds helm's
/// message when it refuses.
fn render(helm: &Path, set: &[&str]) -> Result<Vec<Value>, String> {
    render_as(helm, "rel", "sched", set)
}

/// [`render`] as release `release` in `namespace`.
fn render_as(helm: &Path, release: &str, namespace: &str, set: &[&str]) -> Result<Vec<Value>, String> {
    let mut cmd = Command::new(helm);
    cmd.args(["template", release, CHART, "--namespace", namespace]);
    for s in set {
        cmd.args(["--set", s]);
    }
    let out = cmd.output().unwrap();
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let text = String::from_utf8(out.stdout).unwrap();
    Ok(serde_yaml::Deserializer::from_str(&text)
        .map(|doc| Value::deserialize(doc).unwrap())
        .filter(|doc| !doc.is_null())
        .collect())
}

fn typed<T: serde::de::DeserializeOwned>(doc: &Value) -> T {
    serde_path_to_error::deserialize(doc.clone())
        .unwrap_or_else(|e| panic!("{} {}: {} at {}", doc["kind"], doc["metadata"]["name"], e.inner(), e.path()))
}

/// Checks every object and returns their kinds, sorted.
fn check(docs: &[Value], replicas: i32, image: &str) -> Vec<String> {
    let mut kinds = Vec::new();
    for doc in docs {
        let kind = doc["kind"].as_str().unwrap().to_string();
        if !kind.starts_with("Cluster") {
            assert_eq!(doc["metadata"]["namespace"], "sched", "{kind}");
        }
        assert_eq!(doc["metadata"]["labels"]["app.kubernetes.io/instance"], "rel", "{kind}");
        match kind.as_str() {
            "ServiceAccount" => drop(typed::<ServiceAccount>(doc)),
            "ClusterRole" => drop(typed::<ClusterRole>(doc)),
            "ClusterRoleBinding" => drop(typed::<ClusterRoleBinding>(doc)),
            "Role" => drop(typed::<Role>(doc)),
            "RoleBinding" => drop(typed::<RoleBinding>(doc)),
            "Service" => drop(typed::<Service>(doc)),
            "ServiceMonitor" => assert_eq!(doc["spec"]["endpoints"][0]["path"], "/metrics"),
            "ConfigMap" => {
                let cm: ConfigMap = typed(doc);
                let text = &cm.data.unwrap()["config.yaml"];
                let cfg = scheduler::config_file::parse(text, "config.yaml").unwrap();
                cfg.build_profiles().unwrap();
            }
            "Deployment" => {
                let d: Deployment = typed(doc);
                let spec = d.spec.unwrap();
                assert_eq!(spec.replicas, Some(replicas));
                let pod = spec.template.spec.unwrap();
                let c = &pod.containers[0];
                assert_eq!(c.image.as_deref(), Some(image));
                let sc = c.security_context.as_ref().unwrap();
                assert_eq!(sc.read_only_root_filesystem, Some(true));
                assert_eq!(sc.run_as_non_root, Some(true));
                assert_eq!(pod.security_context.unwrap().run_as_non_root, Some(true));
                // The command line accepts the arguments: clap checks those before `--help`.
                let mut args = c.args.clone().unwrap();
                args.push("--help".into());
                let out = Command::new(BIN).args(&args).output().unwrap();
                assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
            }
            other => panic!("unexpected kind {other}"),
        }
        kinds.push(kind);
    }
    kinds.sort();
    kinds
}

#[test]
fn the_chart_renders_each_mode() {
    let Some(helm) = testing::tools::find("helm", "HELM", &["version"], "the_chart_renders_each_mode") else {
        return;
    };
    let docs = render(&helm, &[]).unwrap();
    assert_eq!(
        check(&docs, 2, "custom-scheduler:0.1.0"),
        [
            "ClusterRole",
            "ClusterRole",
            "ClusterRoleBinding",
            "ConfigMap",
            "Deployment",
            "Role",
            "RoleBinding",
            "Service",
            "ServiceAccount"
        ]
    );
    let config = docs.iter().find(|d| d["kind"] == "ConfigMap").unwrap()["data"]["config.yaml"].as_str().unwrap();
    let cfg: Value = serde_yaml::from_str(config).unwrap();
    assert_eq!(cfg["leaderElection"]["leaderElect"], true);
    assert_eq!(cfg["leaderElection"]["resourceNamespace"], "sched");
    assert_eq!(cfg["profiles"][0]["schedulerName"], "custom-scheduler");

    let docs = render(
        &helm,
        &[
            "mode=extender",
            "replicas=3",
            "image.tag=v9",
            "serviceMonitor.enabled=true",
            "extender.managedResources={example.com/gpu,nvidia.com/gpu}",
        ],
    )
    .unwrap();
    assert_eq!(
        check(&docs, 3, "custom-scheduler:v9"),
        [
            "ClusterRole",
            "ClusterRole",
            "ClusterRoleBinding",
            "ConfigMap",
            "Deployment",
            "Service",
            "ServiceAccount",
            "ServiceMonitor"
        ]
    );
    let deployment = docs.iter().find(|d| d["kind"] == "Deployment").unwrap();
    let args = deployment["spec"]["template"]["spec"]["containers"][0]["args"].to_string();
    assert!(args.contains(r#""--managed-resource","example.com/gpu","--managed-resource","nvidia.com/gpu""#), "{args}");
    // The extender is not elected and deletes nothing.
    let role = docs.iter().find(|d| d["kind"] == "ClusterRole").unwrap();
    assert!(!role["rules"].to_string().contains("delete"), "{role}");

    let docs = render(&helm, &["leaderElection.enabled=false", "serviceAccount.create=false"]).unwrap();
    let kinds = check(&docs, 2, "custom-scheduler:0.1.0");
    assert!(!kinds.iter().any(|k| k == "Role" || k == "ServiceAccount"), "{kinds:?}");

    let refused = render(&helm, &["mode=both"]).unwrap_err();
    assert!(refused.contains("mode must be scheduler or extender"), "{refused}");
}

#[test]
fn the_chart_carries_the_same_crds_as_deploy() {
    for name in ["podgroups.scheduling.x-k8s.io.yaml", "elasticquotas.scheduling.x-k8s.io.yaml"] {
        let chart = std::fs::read_to_string(Path::new(CHART).join("crds").join(name)).unwrap();
        let deploy = std::fs::read_to_string(Path::new("../deploy/crds").join(name)).unwrap();
        assert_eq!(chart, deploy, "deploy/crds and the chart's crds/ differ on {name}");
    }
}

/// In extender mode, a release named `custom-scheduler` in namespace `custom-scheduler`
/// serves the address every kube-scheduler example of `deploy/extender/kube-scheduler/`
/// calls, as deploy/extender's kustomization does.
#[test]
fn the_extender_examples_call_the_service_the_chart_creates() {
    let Some(helm) =
        testing::tools::find("helm", "HELM", &["version"], "the_extender_examples_call_the_service_the_chart_creates")
    else {
        return;
    };
    let docs = render_as(&helm, "custom-scheduler", "custom-scheduler", &["mode=extender"]).unwrap();
    let service = docs.iter().find(|d| d["kind"] == "Service").unwrap();
    let port = service["spec"]["ports"][0]["port"].as_u64().unwrap();
    let address = format!(
        "http://{}.{}.svc:{port}/",
        service["metadata"]["name"].as_str().unwrap(),
        service["metadata"]["namespace"].as_str().unwrap()
    );
    let dir = Path::new("../deploy/extender/kube-scheduler");
    let mut examples = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let config: Value = serde_yaml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let url = config["extenders"][0]["urlPrefix"].as_str().unwrap();
        assert!(url.starts_with(&address), "{}: {url} is not the chart's {address}", path.display());
        examples += 1;
    }
    assert_eq!(examples, 3);
}

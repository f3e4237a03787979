//! Every manifest under deploy/ parses into typed Kubernetes objects, and the
//! configurations in it are accepted by the scheduler.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use serde::Deserialize;
use serde_json::Value;

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            // The Helm chart's templates are not YAML until rendered: tests/helm.rs.
            if path.file_name().is_some_and(|n| n == "helm") {
                continue;
            }
            yaml_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(path);
        }
    }
}

fn typed<T: serde::de::DeserializeOwned>(doc: &Value, file: &Path) -> T {
    serde_path_to_error::deserialize(doc.clone())
        .unwrap_or_else(|e| panic!("{}: {} at {}", file.display(), e.inner(), e.path()))
}

#[test]
fn every_manifest_is_a_valid_kubernetes_object() {
    let mut files = Vec::new();
    yaml_files(Path::new("../deploy"), &mut files);
    assert!(files.len() >= 10, "{files:?}");
    let mut kinds = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let doc = Value::deserialize(doc).unwrap();
            if doc.is_null() {
                continue;
            }
            let kind = doc["kind"].as_str().unwrap_or_else(|| panic!("{}: no kind", file.display())).to_string();
            match kind.as_str() {
                "Namespace" => drop(typed::<Namespace>(&doc, file)),
                "ServiceAccount" => drop(typed::<ServiceAccount>(&doc, file)),
                "ClusterRole" => drop(typed::<ClusterRole>(&doc, file)),
                "ClusterRoleBinding" => drop(typed::<ClusterRoleBinding>(&doc, file)),
                "Role" => drop(typed::<Role>(&doc, file)),
                "RoleBinding" => drop(typed::<RoleBinding>(&doc, file)),
                "Service" => drop(typed::<Service>(&doc, file)),
                "Pod" => drop(typed::<Pod>(&doc, file)),
                "Deployment" => {
                    let d: Deployment = typed(&doc, file);
                    let spec = d.spec.unwrap().template.spec.unwrap();
                    let c = &spec.containers[0];
                    assert!(c.liveness_probe.is_some() && c.readiness_probe.is_some(), "{}: probes", file.display());
                    let sc = c.security_context.as_ref().unwrap();
                    assert_eq!(sc.read_only_root_filesystem, Some(true), "{}", file.display());
                    assert_eq!(
                        sc.run_as_non_root.or(spec.security_context.as_ref().and_then(|s| s.run_as_non_root)),
                        Some(true)
                    );
                }
                "ConfigMap" => {
                    let cm: ConfigMap = typed(&doc, file);
                    for (key, value) in cm.data.unwrap_or_default() {
                        if key.ends_with(".yaml") {
                            let cfg = scheduler::config_file::parse(&value, &key).unwrap();
                            cfg.build_profiles().unwrap();
                        }
                    }
                }
                "Kustomization" => {
                    let dir = file.parent().unwrap();
                    for r in doc["resources"].as_array().unwrap() {
                        let listed = dir.join(r.as_str().unwrap());
                        let found = listed.is_file() || listed.join("kustomization.yaml").is_file();
                        assert!(found, "{}: lists {} which is missing", file.display(), listed.display());
                    }
                }
                "CustomResourceDefinition" => {
                    let crd: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition =
                        typed(&doc, file);
                    assert_eq!(crd.spec.group, "scheduling.x-k8s.io", "{}", file.display());
                    assert!(["PodGroup", "ElasticQuota"].contains(&crd.spec.names.kind.as_str()), "{}", file.display());
                }
                "PodGroup" => {
                    let (key, spec) = scheduler::gang::parse_pod_group(&doc).unwrap();
                    assert_eq!((key.as_str(), spec.min_member), ("default/train", 4), "{}", file.display());
                }
                "KubeSchedulerConfiguration" => {
                    let cfg = scheduler::config_file::parse(&text, &file.display().to_string()).unwrap();
                    let profiles = cfg.build_profiles().unwrap();
                    if file.to_string_lossy().contains("kube-scheduler") {
                        assert!(!cfg.extenders.is_empty(), "{}: extender stanza", file.display());
                    } else if file.to_string_lossy().contains("quota") {
                        // The quota profile examples: their quota plugin at PreFilter, and
                        // as the only PostFilter.
                        let plugin =
                            if file.to_string_lossy().contains("tree") { "ElasticQuota" } else { "CapacityScheduling" };
                        let p = &profiles[0];
                        assert_eq!(p.filters.last().map(|f| f.name()), Some(plugin));
                        let post: Vec<&str> = p.post_filters.iter().map(|f| f.name()).collect();
                        assert_eq!(post, [plugin]);
                    } else {
                        // The gpu profile example: DevicePacking on top of the defaults.
                        let scores: Vec<&str> = profiles[0].scores.iter().map(|s| s.plugin.name()).collect();
                        assert!(scores.contains(&"DevicePacking") && scores.len() == 9, "{scores:?}");
                    }
                }
                other => panic!("{}: unexpected kind {other}", file.display()),
            }
            kinds.push(kind);
        }
    }
    for k in ["Deployment", "ClusterRole", "ConfigMap", "KubeSchedulerConfiguration", "Pod", "Service", "PodGroup"] {
        assert!(kinds.iter().any(|x| x == k), "no {k} in deploy/");
    }
}

#[test]
fn rbac_grants_exactly_what_the_scheduler_uses() {
    let text = std::fs::read_to_string("../deploy/scheduler/rbac.yaml").unwrap();
    let mut rules: Vec<(String, String, Vec<String>)> = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(&text) {
        let doc = Value::deserialize(doc).unwrap();
        if doc["kind"] == "ClusterRole" || doc["kind"] == "Role" {
            let role_rules: Vec<k8s_openapi::api::rbac::v1::PolicyRule> = typed(&doc["rules"], Path::new("rbac.yaml"));
            for r in role_rules {
                for g in r.api_groups.clone().unwrap_or_default() {
                    for res in r.resources.clone().unwrap_or_default() {
                        let mut verbs = r.verbs.clone();
                        verbs.sort();
                        rules.push((g.clone(), res, verbs));
                    }
                }
            }
        }
    }
    let has = |g: &str, res: &str, verb: &str| {
        rules.iter().any(|(rg, rr, v)| rg == g && rr == res && v.iter().any(|x| x == verb))
    };
    for (g, res, verb) in [
        ("", "nodes", "watch"),
        ("", "pods", "list"),
        ("", "pods/binding", "create"),
        ("", "pods/status", "patch"),
        ("", "namespaces", "watch"),
        ("events.k8s.io", "events", "create"),
        ("coordination.k8s.io", "leases", "update"),
        ("", "pods", "delete"),
        ("policy", "poddisruptionbudgets", "watch"),
        ("scheduling.x-k8s.io", "podgroups", "watch"),
        ("scheduling.x-k8s.io", "podgroups/status", "patch"),
        ("resource.k8s.io", "resourceclaims", "watch"),
        ("resource.k8s.io", "resourceclaims", "patch"),
        ("resource.k8s.io", "resourceclaims", "create"),
        ("resource.k8s.io", "resourceclaims", "delete"),
        ("resource.k8s.io", "resourceclaims/status", "patch"),
        ("resource.k8s.io", "resourceslices", "watch"),
        ("resource.k8s.io", "deviceclasses", "watch"),
    ] {
        assert!(has(g, res, verb), "missing {verb} on {g}/{res}: {rules:?}");
    }
    assert!(!rules.iter().any(|(_, _, v)| v.iter().any(|x| x == "*")), "over-broad rule: {rules:?}");
    // Only preemption deletes pods, and DynamicResources the claims it made for pods'
    // extended resources; nothing else is deleted.
    let deletes = |g: &str, r: &str| (g.is_empty() && r == "pods") || (g == "resource.k8s.io" && r == "resourceclaims");
    assert!(
        !rules.iter().any(|(g, r, v)| v.iter().any(|x| x == "delete") && !deletes(g, r)),
        "delete beyond pods and resource claims: {rules:?}"
    );
}

/// `kubectl kustomize` renders each kustomization into the objects it should hold (skipped,
/// with a line saying so, where kubectl is not installed).
#[test]
fn kustomizations_render_the_expected_objects() {
    let Some(kubectl) = testing::tools::find(
        "kubectl",
        "KUBECTL",
        &["version", "--client"],
        "kustomizations_render_the_expected_objects",
    ) else {
        return;
    };
    let cases: [(&str, &[&str]); 2] = [
        (
            "scheduler",
            &[
                "CustomResourceDefinition",
                "CustomResourceDefinition",
                "Namespace",
                "ServiceAccount",
                "ClusterRole",
                "ClusterRoleBinding",
                "Role",
                "RoleBinding",
                "ConfigMap",
                "Deployment",
                "Service",
            ],
        ),
        ("extender", &["Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Deployment", "Service"]),
    ];
    for (dir, kinds) in cases {
        let out =
            std::process::Command::new(&kubectl).args(["kustomize", &format!("../deploy/{dir}")]).output().unwrap();
        assert!(out.status.success(), "{dir}: {}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8(out.stdout).unwrap();
        let mut found = Vec::new();
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let doc = Value::deserialize(doc).unwrap();
            let kind = doc["kind"].as_str().unwrap().to_string();
            if !matches!(kind.as_str(), "Namespace" | "CustomResourceDefinition") && !kind.starts_with("Cluster") {
                assert_eq!(doc["metadata"]["namespace"], "custom-scheduler", "{dir}: {kind}");
            }
            if kind == "Deployment" {
                let d: Deployment = typed(&doc, Path::new(dir));
                assert_eq!(d.spec.as_ref().unwrap().replicas, Some(2));
                let image = d.spec.unwrap().template.spec.unwrap().containers[0].image.clone().unwrap();
                // The tag deploy/README.md builds and the chart's default image carry.
                assert_eq!(image, format!("custom-scheduler:{}", chart_app_version()));
            }
            found.push(kind);
        }
        found.sort();
        let mut want: Vec<String> = kinds.iter().map(|k| k.to_string()).collect();
        want.sort();
        assert_eq!(found, want, "{dir}");
    }
}

/// The Helm chart's `appVersion`: its default image tag.
fn chart_app_version() -> String {
    let chart: Value =
        serde_yaml::from_str(&std::fs::read_to_string("../deploy/helm/custom-scheduler/Chart.yaml").unwrap()).unwrap();
    chart["appVersion"].as_str().unwrap().to_string()
}

/// deploy/README.md builds the image under the tag the manifests and the chart use.
#[test]
fn the_documented_build_tags_the_image_the_manifests_and_the_chart_run() {
    let readme = std::fs::read_to_string("../deploy/README.md").unwrap();
    let build = readme.lines().find(|l| l.starts_with("docker build")).unwrap();
    assert!(build.contains(&format!("-t custom-scheduler:{} ", chart_app_version())), "{build}");
}

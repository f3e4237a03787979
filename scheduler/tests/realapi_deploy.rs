//! The deploy manifests, as their kustomizations list them, are accepted by a real
//! kube-apiserver v1.36.2 with a server-side dry run (the namespace is created for real so
//! that namespaced objects can be checked in it).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod realapi;

use kube::api::{Api, DynamicObject, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::pinned_kind;
use realapi::plane;
use serde::Deserialize;
use serde_json::Value;

/// The objects of `deploy/<dir>` as its kustomization lists them, with its namespace set.
fn objects(dir: &str) -> Vec<Value> {
    let base = std::path::Path::new("../deploy").join(dir);
    let k: Value = serde_yaml::from_str(&std::fs::read_to_string(base.join("kustomization.yaml")).unwrap()).unwrap();
    let ns = k["namespace"].as_str().unwrap_or("default").to_string();
    let mut out = Vec::new();
    for r in k["resources"].as_array().unwrap() {
        let listed = base.join(r.as_str().unwrap());
        if listed.is_dir() {
            // Another kustomization (the CRDs): its files, cluster-scoped.
            let inner = listed.strip_prefix("../deploy").unwrap().to_str().unwrap().to_string();
            out.extend(objects(&inner));
            continue;
        }
        let text = std::fs::read_to_string(listed).unwrap();
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let mut doc = Value::deserialize(doc).unwrap();
            if doc.is_null() {
                continue;
            }
            if doc["metadata"].get("namespace").is_some() {
                doc["metadata"]["namespace"] = Value::String(ns.clone());
            }
            out.push(doc);
        }
    }
    out
}

/// Creates each object with a server-side dry run (namespaces are skipped: the test
/// creates the one it needs for real).
async fn dry_run(client: &kube::Client, what: &str, docs: Vec<Value>) {
    let dry = PostParams { dry_run: true, ..Default::default() };
    for doc in docs {
        let kind = doc["kind"].as_str().unwrap().to_string();
        let name = doc["metadata"]["name"].as_str().unwrap().to_string();
        if kind == "Namespace" {
            continue;
        }
        let (group, version) = match doc["apiVersion"].as_str().unwrap().split_once('/') {
            Some((g, v)) => (g.to_string(), v.to_string()),
            None => (String::new(), doc["apiVersion"].as_str().unwrap().to_string()),
        };
        let (resource, caps) = pinned_kind(client, &GroupVersionKind::gvk(&group, &version, &kind))
            .await
            .unwrap_or_else(|e| panic!("{what}: {kind} {name}: {e}"));
        let api: Api<DynamicObject> = match caps.scope {
            kube::discovery::Scope::Namespaced => {
                Api::namespaced_with(client.clone(), doc["metadata"]["namespace"].as_str().unwrap(), &resource)
            }
            kube::discovery::Scope::Cluster => Api::all_with(client.clone(), &resource),
        };
        let obj: DynamicObject = serde_json::from_value(doc.clone()).unwrap();
        api.create(&dry, &obj).await.unwrap_or_else(|e| panic!("{what}: {kind} {name} refused: {e}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deploy_objects_pass_a_server_side_dry_run() {
    let Some(p) = plane("the_deploy_objects_pass_a_server_side_dry_run").await else {
        return;
    };
    let client = &p.client;
    testing::api::create_namespace(client, "custom-scheduler").await.unwrap();
    for dir in ["scheduler", "extender"] {
        let list = objects(dir);
        assert!(list.len() >= 6, "{dir}: {}", list.len());
        dry_run(client, dir, list).await;
    }

    // `kubectl apply -k … --dry-run=server`, as the deploy README says, where kubectl is installed.
    let Some(kubectl) =
        testing::tools::find("kubectl", "KUBECTL", &["version", "--client"], "kubectl apply -k --dry-run=server")
    else {
        return;
    };
    for dir in ["scheduler", "extender"] {
        let out = std::process::Command::new(&kubectl)
            .arg("--kubeconfig")
            .arg(p.plane.kubeconfig())
            .args(["apply", "-k", &format!("../deploy/{dir}"), "--dry-run=server"])
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{dir}: {said}{}", String::from_utf8_lossy(&out.stderr));
        assert!(said.contains("deployment.apps/custom-scheduler"), "{dir}: {said}");
        assert!(said.contains("(server dry run)"), "{dir}: {said}");
    }
}

/// The ServiceMonitor kind, as the Prometheus Operator's CRD would add it (no operator
/// runs here; only the kind needs to exist for the dry run).
fn service_monitor_crd() -> Value {
    serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "servicemonitors.monitoring.coreos.com"},
        "spec": {
            "group": "monitoring.coreos.com",
            "scope": "Namespaced",
            "names": {"plural": "servicemonitors", "singular": "servicemonitor", "kind": "ServiceMonitor", "listKind": "ServiceMonitorList"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
            }]
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_helm_chart_objects_pass_a_server_side_dry_run() {
    let test = "the_helm_chart_objects_pass_a_server_side_dry_run";
    let Some(helm) = testing::tools::find("helm", "HELM", &["version"], test) else {
        return;
    };
    let Some(p) = plane(test).await else {
        return;
    };
    let client = &p.client;
    testing::api::create_namespace(client, "sched").await.unwrap();
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(client.clone());
    crds.create(&PostParams::default(), &serde_json::from_value(service_monitor_crd()).unwrap()).await.unwrap();
    for (what, set) in
        [("scheduler mode", vec![]), ("extender mode", vec!["mode=extender", "serviceMonitor.enabled=true"])]
    {
        let mut cmd = std::process::Command::new(&helm);
        cmd.args(["template", "rel", "../deploy/helm/custom-scheduler", "--namespace", "sched"]);
        for s in set {
            cmd.args(["--set", s]);
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{what}: {}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8(out.stdout).unwrap();
        let docs: Vec<Value> = serde_yaml::Deserializer::from_str(&text)
            .map(|d| Value::deserialize(d).unwrap())
            .filter(|d| !d.is_null())
            .collect();
        assert!(docs.len() >= 6, "{what}: {}", docs.len());
        // The CRD's kind is discovered once it is established.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let gvk = GroupVersionKind::gvk("monitoring.coreos.com", "v1", "ServiceMonitor");
            if pinned_kind(client, &gvk).await.is_ok() {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "the ServiceMonitor kind never appeared");
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        dry_run(client, what, docs).await;
    }
}

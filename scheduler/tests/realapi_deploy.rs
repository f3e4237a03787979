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
    let ns = k["namespace"].as_str().unwrap().to_string();
    let mut out = Vec::new();
    for r in k["resources"].as_array().unwrap() {
        let text = std::fs::read_to_string(base.join(r.as_str().unwrap())).unwrap();
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deploy_objects_pass_a_server_side_dry_run() {
    let Some(p) = plane("the_deploy_objects_pass_a_server_side_dry_run").await else {
        return;
    };
    let client = &p.client;
    testing::api::create_namespace(client, "custom-scheduler").await.unwrap();
    let dry = PostParams { dry_run: true, ..Default::default() };
    for dir in ["scheduler", "extender"] {
        let list = objects(dir);
        assert!(list.len() >= 6, "{dir}: {}", list.len());
        for doc in list {
            let kind = doc["kind"].as_str().unwrap().to_string();
            let name = doc["metadata"]["name"].as_str().unwrap().to_string();
            if kind == "Namespace" {
                continue;
            }
            let (group, version) = match doc["apiVersion"].as_str().unwrap().split_once('/') {
                Some((g, v)) => (g.to_string(), v.to_string()),
                None => (String::new(), doc["apiVersion"].as_str().unwrap().to_string()),
            };
            let (resource, caps) = pinned_kind(client, &GroupVersionKind::gvk(&group, &version, &kind)).await.unwrap();
            let api: Api<DynamicObject> = match caps.scope {
                kube::discovery::Scope::Namespaced => {
                    Api::namespaced_with(client.clone(), doc["metadata"]["namespace"].as_str().unwrap(), &resource)
                }
                kube::discovery::Scope::Cluster => Api::all_with(client.clone(), &resource),
            };
            let obj: DynamicObject = serde_json::from_value(doc.clone()).unwrap();
            api.create(&dry, &obj).await.unwrap_or_else(|e| panic!("{dir}: {kind} {name} refused: {e}"));
        }
    }
}

//! Helpers of the DRA tests: objects from JSON, a side (kube-controller-manager and a
//! scheduler) started, pods waited for.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, PostParams};
use serde_json::json;
use testing::api::wait_for;

use super::{Ours, Plane, pod_scheduled};

/// The test namespace.
pub const NS: &str = "default";

/// Creates an object from JSON.
pub async fn create<K>(api: Api<K>, v: serde_json::Value) -> K
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + serde::Serialize,
{
    let obj: K = serde_json::from_value(v).unwrap();
    api.create(&PostParams::default(), &obj).await.unwrap()
}

/// The pod named, in the test namespace.
pub async fn pod_named(client: &Client, name: &str) -> Pod {
    Api::<Pod>::namespaced(client.clone(), NS).get(name).await.unwrap()
}

/// The pod's unschedulable message, once it has one.
pub async fn wait_message(client: &Client, name: &str) -> String {
    wait_for(&format!("{name} to be reported unschedulable"), Duration::from_secs(30), || async {
        let p = pod_named(client, name).await;
        let (status, reason, message) = pod_scheduled(&p)?;
        (status == "False" && reason.as_deref() == Some("Unschedulable")).then_some(message).flatten()
    })
    .await
}

/// kube-controller-manager and the scheduler named (ours, or kube-scheduler v1.36.2 as
/// `default-scheduler`), running until the value is dropped.
pub fn start_side(p: &Plane, scheduler: &str) -> (testing::Process, Box<dyn std::any::Any>) {
    let kcm = testing::start_controller_manager(&p.plane, "kube-controller-manager", &[]).unwrap();
    let running: Box<dyn std::any::Any> = if scheduler == "custom-scheduler" {
        Box::new(Ours::start(&p.plane, "custom-scheduler", None, &[]))
    } else {
        let config = json!({"profiles": [{"schedulerName": "default-scheduler"}]});
        Box::new(testing::start_kube_scheduler(&p.plane, "kube-scheduler", config).unwrap())
    };
    (kcm, running)
}

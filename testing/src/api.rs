//! Creating objects as kubectl would and reading back what a scheduler did.

use std::future::Future;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, Error};

/// Creates a node, then writes its status (a create ignores `status`), adding a `Ready`
/// condition and, where absent, capacity equal to allocatable.
pub async fn create_node(client: &Client, node: &Node) -> Result<Node, Error> {
    let api: Api<Node> = Api::all(client.clone());
    let mut bare = node.clone();
    let mut status = bare.status.take().unwrap_or_default();
    bare.metadata.resource_version = None;
    bare.metadata.uid = None;
    let created = api.create(&PostParams::default(), &bare).await?;
    if status.capacity.is_none() {
        status.capacity = status.allocatable.clone();
    }
    if status.conditions.is_none() {
        status.conditions = Some(vec![k8s_openapi::api::core::v1::NodeCondition {
            type_: "Ready".into(),
            status: "True".into(),
            reason: Some("KubeletReady".into()),
            ..Default::default()
        }]);
    }
    let name = created.metadata.name.clone().unwrap_or_default();
    let patch = serde_json::json!({ "status": status });
    api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch)).await
}

/// Creates a namespace (an existing one is fine).
pub async fn create_namespace(client: &Client, name: &str) -> Result<(), Error> {
    let api: Api<Namespace> = Api::all(client.clone());
    let ns = Namespace { metadata: ObjectMeta { name: Some(name.into()), ..Default::default() }, ..Default::default() };
    match api.create(&PostParams::default(), &ns).await {
        Ok(_) => Ok(()),
        Err(Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Creates a pod in its namespace, dropping the fields the server sets.
pub async fn create_pod(client: &Client, pod: &Pod) -> Result<Pod, Error> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let mut bare = pod.clone();
    bare.metadata.uid = None;
    bare.metadata.resource_version = None;
    bare.metadata.creation_timestamp = None;
    bare.status = None;
    api.create(&PostParams::default(), &bare).await
}

/// Creates nodes, `concurrency` at a time.
pub async fn create_nodes(client: &Client, nodes: &[Node], concurrency: usize) -> Result<(), Error> {
    stream::iter(nodes.iter().map(|n| create_node(client, n)))
        .buffer_unordered(concurrency.max(1))
        .try_for_each(|_| async { Ok(()) })
        .await
}

/// Creates pods, `concurrency` at a time.
pub async fn create_pods(client: &Client, pods: &[Pod], concurrency: usize) -> Result<(), Error> {
    stream::iter(pods.iter().map(|p| create_pod(client, p)))
        .buffer_unordered(concurrency.max(1))
        .try_for_each(|_| async { Ok(()) })
        .await
}

/// Every pod of a namespace.
pub async fn pods(client: &Client, namespace: &str) -> Result<Vec<Pod>, Error> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    Ok(api.list(&ListParams::default()).await?.items)
}

/// Every node.
pub async fn nodes(client: &Client) -> Result<Vec<Node>, Error> {
    let api: Api<Node> = Api::all(client.clone());
    Ok(api.list(&ListParams::default()).await?.items)
}

/// Every `events.k8s.io/v1` event of a namespace.
pub async fn events(client: &Client, namespace: &str) -> Result<Vec<Event>, Error> {
    let api: Api<Event> = Api::namespaced(client.clone(), namespace);
    Ok(api.list(&ListParams::default()).await?.items)
}

/// The node a pod is bound to.
pub fn node_of(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref().and_then(|s| s.node_name.as_deref())
}

/// `namespace/name`.
pub fn key(meta: &ObjectMeta) -> String {
    format!("{}/{}", meta.namespace.as_deref().unwrap_or(""), meta.name.as_deref().unwrap_or(""))
}

/// Calls `check` every 100 ms until it returns `Some`, failing the test with `what` after
/// `timeout`.
#[allow(clippy::panic)] // a test helper: failing the test is the point
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        if Instant::now() >= deadline {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until at least `n` pods of the namespace are bound; returns the pods.
pub async fn wait_bound(client: &Client, namespace: &str, n: usize, timeout: Duration) -> Vec<Pod> {
    wait_for(&format!("{n} bound pods in {namespace}"), timeout, || async {
        let list = pods(client, namespace).await.ok()?;
        (list.iter().filter(|p| node_of(p).is_some()).count() >= n).then_some(list)
    })
    .await
}

/// Creates any object given as JSON, as `kubectl create` would (its kind's plural taken
/// as the lowercased kind plus `s`), retrying for up to 30 s while its kind is not served
/// yet (a CRD just installed).
pub async fn create_object(client: &Client, object: &serde_json::Value) -> Result<(), Error> {
    use kube::api::DynamicObject;
    use kube::core::{ApiResource, GroupVersionKind};
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, object["kind"].as_str().unwrap_or_default());
    let resource = ApiResource::from_gvk(&gvk);
    let obj: DynamicObject = serde_json::from_value(object.clone()).map_err(Error::SerdeError)?;
    let api: Api<DynamicObject> = match obj.metadata.namespace.as_deref() {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    let t = Instant::now();
    loop {
        match api.create(&PostParams::default(), &obj).await {
            Ok(_) => return Ok(()),
            Err(Error::Api(s)) if s.code == 404 && t.elapsed() < Duration::from_secs(30) => {
                tokio::time::sleep(Duration::from_millis(500)).await
            }
            Err(e) => return Err(e),
        }
    }
}

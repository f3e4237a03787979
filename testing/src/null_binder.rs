//! The null binder: binds every pending pod of a namespace round-robin over the nodes and
//! records a `Scheduled` event for it, with no scheduling at all. Run the way a scheduler
//! is run, it measures how fast the API server takes the writes a scheduler must make.

use std::num::NonZeroU32;
use std::sync::Arc;

use futures::StreamExt;
use governor::{Quota, RateLimiter};
use k8s_openapi::api::core::v1::{Binding, Node, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Error};
use tokio::sync::Semaphore;

/// Binds the namespace's pending pods; returns how many were bound.
pub async fn run(client: Client, namespace: &str, qps: u32, concurrency: usize) -> Result<usize, Error> {
    let nodes: Vec<String> = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let pending: Vec<Pod> = pods_api.list(&ListParams::default().fields("spec.nodeName=")).await?.items;
    let rate = NonZeroU32::new(qps).unwrap_or(NonZeroU32::MIN);
    let limiter = RateLimiter::direct(Quota::per_second(rate).allow_burst(rate));
    let recorder =
        Arc::new(Recorder::new(client.clone(), Reporter { controller: "null-binder".into(), instance: None }));
    // Events go out beside the binds, as a scheduler sends them, not in a bind's slot.
    let events = Arc::new(Semaphore::new(concurrency.max(1)));
    let bound = futures::stream::iter(pending.iter().enumerate())
        .map(|(i, pod)| {
            let node = nodes.get(i % nodes.len().max(1)).cloned().unwrap_or_default();
            let (api, limiter, recorder, events) = (&pods_api, &limiter, recorder.clone(), events.clone());
            async move {
                let name = pod.metadata.name.clone().unwrap_or_default();
                let binding = Binding {
                    metadata: ObjectMeta {
                        name: Some(name.clone()),
                        namespace: pod.metadata.namespace.clone(),
                        ..Default::default()
                    },
                    target: ObjectReference {
                        kind: Some("Node".into()),
                        name: Some(node.clone()),
                        ..Default::default()
                    },
                };
                limiter.until_ready().await;
                let ok = api
                    .create_subresource::<_, serde_json::Value>("binding", &name, &PostParams::default(), &binding)
                    .await
                    .is_ok();
                if ok && let Ok(permit) = events.acquire_owned().await {
                    limiter.until_ready().await;
                    let ev = Event {
                        type_: EventType::Normal,
                        reason: "Scheduled".into(),
                        note: Some(format!("Successfully assigned {namespace}/{name} to {node}")),
                        action: "Binding".into(),
                        secondary: None,
                    };
                    let reference = ObjectReference {
                        api_version: Some("v1".into()),
                        kind: Some("Pod".into()),
                        name: Some(name),
                        namespace: Some(namespace.to_string()),
                        uid: pod.metadata.uid.clone(),
                        ..Default::default()
                    };
                    tokio::spawn(async move {
                        let _ = recorder.publish(&ev, &reference).await;
                        drop(permit);
                    });
                }
                ok
            }
        })
        .buffer_unordered(concurrency.max(1))
        .filter(|ok| std::future::ready(*ok))
        .count()
        .await;
    // Let the last events land before exiting.
    let _ = events.acquire_many(u32::try_from(concurrency.max(1)).unwrap_or(u32::MAX)).await;
    Ok(bound)
}

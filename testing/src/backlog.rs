//! The side-by-side backlog: nodes with 4 CPUs and 32Gi over three zones, a tenth of
//! them tainted with 4 GPUs; pods of 100m and 500Mi, a fifth with a zone selector and a
//! tenth tolerating the taint with one GPU.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, Node, NodeSpec, NodeStatus, Pod, PodSpec, ResourceRequirements, Taint, Toleration,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The zone label.
pub const ZONE: &str = "topology.kubernetes.io/zone";
/// The GPU resource and taint key.
pub const GPU: &str = "nvidia.com/gpu";

fn quantities(list: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
    list.iter().map(|(k, v)| ((*k).to_string(), Quantity((*v).to_string()))).collect()
}

/// Node `i` of the backlog.
pub fn node(i: usize) -> Node {
    let name = format!("node-{i:05}");
    let gpu = i % 10 == 9;
    let mut alloc = vec![("cpu", "4"), ("memory", "32Gi"), ("pods", "110")];
    if gpu {
        alloc.push((GPU, "4"));
    }
    let labels = [("kubernetes.io/hostname".to_string(), name.clone()), (ZONE.to_string(), format!("zone-{}", i % 3))];
    Node {
        metadata: ObjectMeta { name: Some(name), labels: Some(labels.into()), ..Default::default() },
        spec: Some(NodeSpec {
            taints: gpu.then(|| {
                vec![Taint {
                    key: GPU.into(),
                    value: Some("present".into()),
                    effect: "NoSchedule".into(),
                    time_added: None,
                }]
            }),
            ..Default::default()
        }),
        status: Some(NodeStatus { allocatable: Some(quantities(&alloc)), ..Default::default() }),
    }
}

/// Pod `j` of the backlog, for the scheduler named `scheduler`.
pub fn pod(j: usize, namespace: &str, scheduler: &str) -> Pod {
    let mut requests = quantities(&[("cpu", "100m"), ("memory", "500Mi")]);
    let mut limits = BTreeMap::new();
    let mut tolerations = None;
    let mut node_selector = None;
    if j % 10 == 3 {
        requests.insert(GPU.into(), Quantity("1".into()));
        limits.insert(GPU.into(), Quantity("1".into()));
        tolerations = Some(vec![Toleration {
            key: Some(GPU.into()),
            operator: Some("Exists".into()),
            effect: Some("NoSchedule".into()),
            ..Default::default()
        }]);
    } else if j.is_multiple_of(5) {
        node_selector = Some([(ZONE.to_string(), format!("zone-{}", j % 3))].into());
    }
    Pod {
        metadata: ObjectMeta {
            name: Some(format!("pod-{j:05}")),
            namespace: Some(namespace.into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            scheduler_name: Some(scheduler.into()),
            containers: vec![Container {
                name: "app".into(),
                image: Some("app:1".into()),
                resources: Some(ResourceRequirements {
                    requests: Some(requests),
                    limits: (!limits.is_empty()).then_some(limits),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            tolerations,
            node_selector,
            ..Default::default()
        }),
        status: None,
    }
}

/// `n` nodes.
pub fn nodes(n: usize) -> Vec<Node> {
    (0..n).map(node).collect()
}

/// `m` pods.
pub fn pods(m: usize, namespace: &str, scheduler: &str) -> Vec<Pod> {
    (0..m).map(|j| pod(j, namespace, scheduler)).collect()
}

//! Volume binding by `custom-scheduler run` on a real kube-apiserver v1.36.2. No
//! kube-controller-manager and no CSI provisioner run: the test plays both. As the PV
//! controller it binds a claim to the volume whose claimRef the scheduler wrote; as the
//! external provisioner it answers `volume.kubernetes.io/selected-node` with a volume in
//! that node's zone, bound to the claim.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod realapi;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use algorithms::builders::{NodeBuilder, PodBuilder, affinity_term};
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use kube::api::{Api, Patch, PatchParams, PostParams};
use realapi::{Ours, plane};
use serde_json::json;
use testing::api::{self, node_of};

const NS: &str = "default";
const DRIVER: &str = "csi.example.com";
const ZONE: &str = "topology.kubernetes.io/zone";
const SELECTED: &str = "volume.kubernetes.io/selected-node";

async fn create<K>(api: Api<K>, v: serde_json::Value) -> K
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + serde::Serialize,
{
    let obj: K = serde_json::from_value(v).unwrap();
    api.create(&PostParams::default(), &obj).await.unwrap()
}

async fn claim(client: &kube::Client, name: &str, class: &str) -> PersistentVolumeClaim {
    create(
        Api::namespaced(client.clone(), NS),
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": class,
                     "resources": {"requests": {"storage": "1Gi"}}}}),
    )
    .await
}

fn with_claims(name: &str, claims: &[&str]) -> PodBuilder {
    claims
        .iter()
        .enumerate()
        .fold(PodBuilder::new(name).namespace(NS).scheduler("custom-scheduler").req("100m", "128Mi"), |p, (i, c)| {
            p.claim(&format!("v{i}"), c)
        })
}

/// Completes a binding: the claim names the volume and says binding completed; both report Bound.
async fn complete(client: &kube::Client, claim: &str, volume: &str) {
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), NS);
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let pp = PatchParams::default();
    pvs.patch_status(volume, &pp, &Patch::Merge(json!({"status": {"phase": "Bound"}}))).await.unwrap();
    let patch = json!({"metadata": {"annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
                       "spec": {"volumeName": volume}});
    pvcs.patch(claim, &pp, &Patch::Merge(patch)).await.unwrap();
    pvcs.patch_status(claim, &pp, &Patch::Merge(json!({"status": {"phase": "Bound"}}))).await.unwrap();
}

/// One pass of the PV controller and the provisioner over the namespace's claims.
/// Claims in `withheld` are left alone. Returns the claims it bound.
async fn controllers(client: &kube::Client, withheld: &BTreeSet<String>) -> Vec<String> {
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), NS);
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let nodes: Api<Node> = Api::all(client.clone());
    let mut bound = Vec::new();
    let Ok(claims) = pvcs.list(&Default::default()).await else { return bound };
    let Ok(volumes) = pvs.list(&Default::default()).await else { return bound };
    for c in claims {
        let name = c.metadata.name.clone().unwrap();
        let spec = c.spec.clone().unwrap();
        if spec.volume_name.is_some() || withheld.contains(&name) {
            continue;
        }
        let uid = c.metadata.uid.clone().unwrap();
        // The PV controller: a volume the scheduler bound to this claim.
        let chosen = volumes.iter().find(|v| {
            v.spec
                .as_ref()
                .and_then(|s| s.claim_ref.as_ref())
                .is_some_and(|r| r.name.as_deref() == Some(&name) && r.uid.as_deref() == Some(&uid))
        });
        if let Some(v) = chosen {
            complete(client, &name, v.metadata.name.as_deref().unwrap()).await;
            bound.push(name);
            continue;
        }
        // The provisioner: a volume in the selected node's zone.
        let Some(node) = c.metadata.annotations.as_ref().and_then(|a| a.get(SELECTED)) else { continue };
        let zone = nodes.get(node).await.unwrap().metadata.labels.unwrap()[ZONE].clone();
        let pv_name = format!("pv-{name}");
        let pv = json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": pv_name},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                     "storageClassName": spec.storage_class_name,
                     "persistentVolumeReclaimPolicy": "Delete",
                     "csi": {"driver": DRIVER, "volumeHandle": format!("vol-{name}")},
                     "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                  "namespace": NS, "name": name, "uid": uid},
                     "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                         {"key": ZONE, "operator": "In", "values": [zone]}]}]}}}});
        let _: PersistentVolume = create(Api::all(client.clone()), pv).await;
        complete(client, &name, &pv_name).await;
        bound.push(name);
    }
    bound
}

/// Three nodes, one per zone, each with `cpu`; the CSI driver attaches at most two
/// volumes per node.
const ZONES: [(&str, &str); 3] = [("n-a", "zone-a"), ("n-b", "zone-b"), ("n-c", "zone-c")];

async fn zonal_nodes(client: &kube::Client, cpu: &str) {
    let nodes: Vec<Node> =
        ZONES.iter().map(|(n, z)| NodeBuilder::new(n).capacity(cpu, "16Gi", "110").label(ZONE, z).build()).collect();
    api::create_nodes(client, &nodes, 3).await.unwrap();
    for (n, _) in ZONES {
        let _: CSINode = create(
            Api::all(client.clone()),
            json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": n},
                "spec": {"drivers": [{"name": DRIVER, "nodeID": n, "allocatable": {"count": 2}}]}}),
        )
        .await;
    }
}

/// The zone a PV's node affinity names.
async fn volume_zone(client: &kube::Client, claim: &str) -> String {
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), NS);
    let volume = pvcs.get(claim).await.unwrap().spec.unwrap().volume_name.unwrap();
    let pv = Api::<PersistentVolume>::all(client.clone()).get(&volume).await.unwrap();
    let terms = pv.spec.unwrap().node_affinity.unwrap().required.unwrap().node_selector_terms;
    terms[0].match_expressions.as_ref().unwrap()[0].values.as_ref().unwrap()[0].clone()
}

async fn bound_pods(client: &kube::Client) -> BTreeMap<String, String> {
    api::pods(client, NS)
        .await
        .unwrap()
        .iter()
        .filter_map(|p: &Pod| Some((p.metadata.name.clone()?, node_of(p)?.to_string())))
        .collect()
}

/// Nodes n-a and n-b in zones zone-a and zone-b, and the WaitForFirstConsumer class
/// `zonal` of the test's provisioner.
async fn two_zones_and_a_zonal_class(client: &kube::Client) {
    let nodes: Vec<Node> = [("n-a", "zone-a"), ("n-b", "zone-b")]
        .iter()
        .map(|(n, z)| NodeBuilder::new(n).capacity("4", "16Gi", "110").label(ZONE, z).build())
        .collect();
    api::create_nodes(client, &nodes, 2).await.unwrap();
    let _: StorageClass = create(
        Api::all(client.clone()),
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "zonal"},
            "provisioner": DRIVER, "volumeBindingMode": "WaitForFirstConsumer"}),
    )
    .await;
}

/// Starts the controllers the test plays, every 100 ms; claims in `withheld` wait.
fn play_controllers(client: &kube::Client, withheld: Arc<Mutex<BTreeSet<String>>>) -> tokio::task::JoinHandle<()> {
    let client = client.clone();
    tokio::spawn(async move {
        loop {
            let hold = withheld.lock().unwrap().clone();
            controllers(&client, &hold).await;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_not_bound_in_time_sends_its_pod_back_until_it_is() {
    let Some(p) = plane("a_claim_not_bound_in_time_sends_its_pod_back_until_it_is").await else {
        return;
    };
    let client = &p.client;
    two_zones_and_a_zonal_class(client).await;
    let withheld: Arc<Mutex<BTreeSet<String>>> = Arc::new(Mutex::new(["slow-data".to_string()].into()));
    let played = play_controllers(client, withheld.clone());
    let config = json!({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": "custom-scheduler",
                      "pluginConfig": [{"name": "VolumeBinding", "args": {"bindTimeoutSeconds": 2}}]}],
    });
    let _ours = Ours::start(&p.plane, "custom-scheduler", Some(config), &[]);
    claim(client, "slow-data", "zonal").await;
    api::create_pod(client, &with_claims("slow", &["slow-data"]).build()).await.unwrap();
    // The provisioner does not answer within bindTimeoutSeconds: the pod is sent back
    // with kube-scheduler's SchedulerError, unbound.
    let (reason, message) = api::wait_for("slow's PreBind failure reported", Duration::from_secs(30), || async {
        let pod = Api::<Pod>::namespaced(client.clone(), NS).get("slow").await.ok()?;
        let (_, reason, message) = realapi::pod_scheduled(&pod)?;
        Some((reason?, message?))
    })
    .await;
    assert_eq!(reason, "SchedulerError");
    assert!(message.starts_with("running PreBind plugin \"VolumeBinding\": binding volumes: timed out"), "{message}");
    assert!(!bound_pods(client).await.contains_key("slow"));
    // The provisioner answers: the retried pod goes to the node its claim was provisioned for.
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), NS);
    let selected = pvcs.get("slow-data").await.unwrap().metadata.annotations.unwrap()[SELECTED].clone();
    withheld.lock().unwrap().clear();
    let node =
        api::wait_for("slow bound", Duration::from_secs(60), || async { bound_pods(client).await.remove("slow") })
            .await;
    assert_eq!(node, selected);
    let zone = if node == "n-a" { "zone-a" } else { "zone-b" };
    assert_eq!(volume_zone(client, "slow-data").await, zone);
    played.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_are_bound_in_the_pods_zone_before_the_pods() {
    let Some(p) = plane("claims_are_bound_in_the_pods_zone_before_the_pods").await else {
        return;
    };
    let client = &p.client;
    let zones = ZONES;
    zonal_nodes(client, "4").await;
    let _: StorageClass = create(
        Api::all(client.clone()),
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "zonal"},
            "provisioner": DRIVER, "volumeBindingMode": "WaitForFirstConsumer"}),
    )
    .await;
    let _: StorageClass = create(
        Api::all(client.clone()),
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "local"},
            "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "WaitForFirstConsumer"}),
    )
    .await;

    // The controllers the test plays; claims in `withheld` wait.
    let withheld: Arc<Mutex<BTreeSet<String>>> = Arc::new(Mutex::new(["data-web-2".to_string()].into()));
    let played = play_controllers(client, withheld.clone());
    let _ours = Ours::start(&p.plane, "custom-scheduler", None, &[]);

    // A StatefulSet-shaped set: one WaitForFirstConsumer claim per replica, one replica per node.
    for i in 0..3 {
        claim(client, &format!("data-web-{i}"), "zonal").await;
        let pod = with_claims(&format!("web-{i}"), &[&format!("data-web-{i}")])
            .label("app", "web")
            .pod_anti_affinity(affinity_term(&[("app", "web")], "kubernetes.io/hostname"))
            .build();
        api::create_pod(client, &pod).await.unwrap();
    }
    api::wait_for("web-0 and web-1 bound", Duration::from_secs(60), || async {
        let b = bound_pods(client).await;
        (b.contains_key("web-0") && b.contains_key("web-1")).then_some(())
    })
    .await;
    // web-2's claim has its node selected, but the provisioner holds it back: the pod waits.
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), NS);
    api::wait_for("data-web-2's node selected", Duration::from_secs(30), || async {
        pvcs.get("data-web-2").await.ok()?.metadata.annotations?.get(SELECTED).cloned()
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!bound_pods(client).await.contains_key("web-2"), "web-2 was bound before its claim");
    withheld.lock().unwrap().clear();
    let placed = api::wait_for("every replica bound", Duration::from_secs(60), || async {
        let b = bound_pods(client).await;
        (0..3).all(|i| b.contains_key(&format!("web-{i}"))).then_some(b)
    })
    .await;
    let by_node: BTreeMap<&str, &str> = zones.iter().copied().collect();
    let used: BTreeSet<&String> = (0..3).map(|i| &placed[&format!("web-{i}")]).collect();
    assert_eq!(used.len(), 3, "{placed:?}");
    for i in 0..3 {
        let node = &placed[&format!("web-{i}")];
        assert_eq!(volume_zone(client, &format!("data-web-{i}")).await, by_node[node.as_str()], "web-{i}");
    }

    // A claim bound to a zone-b volume takes its pod to zone b.
    let logs_pv = json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-logs"},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "local",
                 "csi": {"driver": DRIVER, "volumeHandle": "vol-logs"},
                 "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                     {"key": ZONE, "operator": "In", "values": ["zone-b"]}]}]}}}});
    let _: PersistentVolume = create(Api::all(client.clone()), logs_pv).await;
    let pp = PatchParams::default();
    Api::<PersistentVolume>::all(client.clone())
        .patch_status("pv-logs", &pp, &Patch::Merge(json!({"status": {"phase": "Available"}})))
        .await
        .unwrap();
    // A static volume for a WaitForFirstConsumer claim: the scheduler picks it (writes its
    // claimRef) for the pod's node; the test, as the PV controller, completes the binding.
    claim(client, "logs", "local").await;
    api::create_pod(client, &with_claims("logger", &["logs"]).build()).await.unwrap();
    let node =
        api::wait_for("logger bound", Duration::from_secs(60), || async { bound_pods(client).await.remove("logger") })
            .await;
    assert_eq!(node, "n-b");
    let bound_claim = pvcs.get("logs").await.unwrap();
    assert_eq!(bound_claim.spec.unwrap().volume_name.as_deref(), Some("pv-logs"));

    // Three new volumes on a node whose driver attaches two: rejected everywhere.
    for c in ["g-1", "g-2", "g-3"] {
        claim(client, c, "zonal").await;
    }
    api::create_pod(client, &with_claims("greedy", &["g-1", "g-2", "g-3"]).build()).await.unwrap();
    let message = api::wait_for("greedy reported unschedulable", Duration::from_secs(30), || async {
        let pod = Api::<Pod>::namespaced(client.clone(), NS).get("greedy").await.ok()?;
        realapi::pod_scheduled(&pod)?.2
    })
    .await;
    assert!(message.starts_with("0/3 nodes are available: 3 node(s) exceed max volume count."), "{message}");
    assert!(!bound_pods(client).await.contains_key("greedy"));
    for c in ["g-1", "g-2", "g-3"] {
        let annotations = pvcs.get(c).await.unwrap().metadata.annotations.unwrap_or_default();
        assert!(!annotations.contains_key(SELECTED), "{c} had a node selected for a pod that does not fit");
    }

    // A pod whose claim does not exist yet is retried when the claim appears.
    api::create_pod(client, &with_claims("late", &["late-claim"]).build()).await.unwrap();
    let message = api::wait_for("late reported unschedulable", Duration::from_secs(30), || async {
        let pod = Api::<Pod>::namespaced(client.clone(), NS).get("late").await.ok()?;
        realapi::pod_scheduled(&pod)?.2
    })
    .await;
    assert!(
        message.starts_with("0/3 nodes are available: persistentvolumeclaim \"late-claim\" not found."),
        "{message}"
    );
    claim(client, "late-claim", "zonal").await;
    api::wait_for("late bound once its claim exists", Duration::from_secs(30), || async {
        bound_pods(client).await.remove("late")
    })
    .await;
    played.abort();
}

/// The `PodScheduled` message of each pod once it has one.
async fn messages(client: &kube::Client, names: &[String]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for n in names {
        let Ok(pod) = Api::<Pod>::namespaced(client.clone(), NS).get(n).await else { continue };
        if let Some((_, _, Some(m))) = realapi::pod_scheduled(&pod) {
            out.insert(n.clone(), m);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volume_messages_are_kube_schedulers() {
    let Some(p) = plane("volume_messages_are_kube_schedulers").await else {
        return;
    };
    let client = &p.client;
    zonal_nodes(client, "8").await;
    for (name, mode) in [("zonal", "WaitForFirstConsumer"), ("fast", "Immediate")] {
        let _: StorageClass = create(
            Api::all(client.clone()),
            json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
                "provisioner": DRIVER, "volumeBindingMode": mode}),
        )
        .await;
    }
    // The same pods for kube-scheduler (k-) and for us (c-), each with its own claims.
    let mut unschedulable = Vec::new();
    for (prefix, scheduler) in [("k", "kube"), ("c", "custom-scheduler")] {
        let c = |n: &str| format!("{prefix}-{n}");
        for g in ["g1", "g2", "g3"] {
            claim(client, &c(g), "zonal").await;
        }
        claim(client, &c("imm"), "fast").await;
        let pods =
            [("greedy", vec![c("g1"), c("g2"), c("g3")]), ("waiting", vec![c("imm")]), ("orphan", vec![c("missing")])];
        for (name, claims) in pods {
            let refs: Vec<&str> = claims.iter().map(String::as_str).collect();
            let mut pod = with_claims(&c(name), &refs).build();
            pod.spec.as_mut().unwrap().scheduler_name = Some(scheduler.into());
            api::create_pod(client, &pod).await.unwrap();
            unschedulable.push(c(name));
        }
    }
    let config = json!({"profiles": [{"schedulerName": "kube"}]});
    let _kube = testing::start_kube_scheduler(&p.plane, "kube-scheduler", config).unwrap();
    let _ours = Ours::start(&p.plane, "custom-scheduler", None, &[]);
    let got = api::wait_for("every pod's PodScheduled message", Duration::from_secs(60), || async {
        let m = messages(client, &unschedulable).await;
        (m.len() == unschedulable.len()).then_some(m)
    })
    .await;
    for name in ["greedy", "waiting", "orphan"] {
        let (kube, ours) = (&got[&format!("k-{name}")], &got[&format!("c-{name}")]);
        assert_eq!(ours.replace("c-", ""), kube.replace("k-", ""), "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_whose_volume_is_being_provisioned_is_nominated_to_its_node_before_it_is_bound() {
    let Some(p) = plane("a_pod_whose_volume_is_being_provisioned_is_nominated_to_its_node_before_it_is_bound").await
    else {
        return;
    };
    let client = &p.client;
    two_zones_and_a_zonal_class(client).await;
    // The provisioner holds the claim back until the test has seen the nomination.
    let withheld: Arc<Mutex<BTreeSet<String>>> = Arc::new(Mutex::new(["data".to_string()].into()));
    let played = play_controllers(client, withheld.clone());
    let _ours = Ours::start(&p.plane, "custom-scheduler", None, &[]);
    claim(client, "data", "zonal").await;
    api::create_pod(client, &with_claims("app", &["data"]).build()).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), NS);
    let (nominated, selected) =
        api::wait_for("app nominated while its volume is provisioned", Duration::from_secs(30), || async {
            let pod = pods.get("app").await.ok()?;
            assert!(node_of(&pod).is_none(), "bound before its volume was provisioned");
            let nominated = pod.status?.nominated_node_name?;
            let selected = pvcs.get("data").await.ok()?.metadata.annotations?.get(SELECTED)?.clone();
            Some((nominated, selected))
        })
        .await;
    assert_eq!(nominated, selected, "nominated to the node its claim is provisioned for");
    withheld.lock().unwrap().clear();
    let node =
        api::wait_for("app bound", Duration::from_secs(60), || async { bound_pods(client).await.remove("app") }).await;
    assert_eq!(node, nominated);
    // A pod with nothing to wait for is bound without a nomination.
    api::create_pod(client, &with_claims("plain", &[]).build()).await.unwrap();
    api::wait_for("plain bound", Duration::from_secs(30), || async { bound_pods(client).await.remove("plain") }).await;
    let plain = pods.get("plain").await.unwrap();
    assert_eq!(plain.status.and_then(|s| s.nominated_node_name), None);
    played.abort();
}

//! Queueing hints of the default filters, as a table: for a pod a plugin rejected, which
//! cluster events are worth another attempt.

use std::sync::Arc;

use crate::builders::{NodeBuilder, PodBuilder, affinity_term, node_term};
use crate::config::default_profile;
use crate::events::{ClusterEvent, QueueingHint};
use crate::node_info::NodeInfo;
use crate::pod_info::PodInfo;

fn node(b: NodeBuilder) -> Arc<NodeInfo> {
    Arc::new(NodeInfo::from_node(&b.build()).unwrap_or_default())
}

fn placed(b: PodBuilder) -> Arc<PodInfo> {
    Arc::new(b.node_name("n").info())
}

fn added(b: NodeBuilder) -> ClusterEvent {
    ClusterEvent::NodeAdded(node(b))
}

fn updated(old: NodeBuilder, new: NodeBuilder) -> ClusterEvent {
    ClusterEvent::NodeUpdated { old: node(old), new: node(new) }
}

fn hint(plugin: &str, pod: &PodInfo, event: &ClusterEvent) -> QueueingHint {
    let profile = default_profile("custom-scheduler");
    let Some(filter) = profile.filters.iter().find(|f| f.name() == plugin) else { return QueueingHint::Queue };
    filter.queueing_hint(pod, event)
}

#[test]
fn each_filter_retries_only_on_events_that_can_help() {
    use QueueingHint::{Queue, Skip};
    let n = || NodeBuilder::new("n").capacity("4", "8Gi", "110");
    let plain = PodBuilder::new("p").req("1", "1Gi").info();
    let big = PodBuilder::new("big").req("6", "1Gi").info();
    let selective = PodBuilder::new("s").node_selector("disk", "ssd").info();
    let with_port = PodBuilder::new("hp").host_port("", "TCP", 80).info();
    let affine = PodBuilder::new("a").pod_affinity(affinity_term(&[("app", "db")], "zone")).info();
    let anti =
        PodBuilder::new("x").label("app", "web").pod_anti_affinity(affinity_term(&[("app", "web")], "zone")).info();
    let spread = PodBuilder::new("sp").label("app", "s").spread(1, "zone", "DoNotSchedule", &[("app", "s")]).info();
    let zonal = PodBuilder::new("z").required_node_affinity(vec![node_term("zone", "In", &["a"])]).info();
    let cases: Vec<(&str, &PodInfo, ClusterEvent, QueueingHint)> = vec![
        ("NodeUnschedulable", &plain, added(n()), Queue),
        ("NodeUnschedulable", &plain, added(n().unschedulable(true)), Skip),
        ("NodeUnschedulable", &plain, updated(n().unschedulable(true), n()), Queue),
        ("NodeUnschedulable", &plain, updated(n(), n().label("k", "v")), Skip),
        ("NodeUnschedulable", &plain, ClusterEvent::PodDeleted(placed(PodBuilder::new("o"))), Skip),
        ("TaintToleration", &plain, added(n().taint("k", "v", "NoSchedule")), Skip),
        ("TaintToleration", &plain, added(n().taint("k", "v", "PreferNoSchedule")), Queue),
        ("TaintToleration", &plain, updated(n().taint("k", "v", "NoSchedule"), n()), Queue),
        ("TaintToleration", &plain, updated(n().taint("k", "v", "NoSchedule"), n().taint("k", "w", "NoExecute")), Skip),
        ("NodeAffinity", &selective, added(n().label("disk", "ssd")), Queue),
        ("NodeAffinity", &selective, added(n().label("disk", "hdd")), Skip),
        ("NodeAffinity", &selective, updated(n(), n().label("disk", "ssd")), Queue),
        ("NodeAffinity", &selective, updated(n().label("disk", "ssd"), n().label("disk", "ssd").label("x", "y")), Skip),
        ("NodeAffinity", &zonal, added(n().label("zone", "a")), Queue),
        ("NodeAffinity", &zonal, added(n().label("zone", "b")), Skip),
        ("NodeAffinity", &selective, ClusterEvent::NodeDeleted(node(n())), Skip),
        ("NodeResourcesFit", &big, added(n()), Skip),
        ("NodeResourcesFit", &big, added(n().capacity("8", "8Gi", "110")), Queue),
        ("NodeResourcesFit", &big, updated(n(), n().capacity("8", "8Gi", "110")), Queue),
        ("NodeResourcesFit", &plain, ClusterEvent::PodDeleted(placed(PodBuilder::new("o").req("1", "1Gi"))), Queue),
        ("NodeResourcesFit", &plain, ClusterEvent::PodAdded(placed(PodBuilder::new("o"))), Skip),
        (
            "NodePorts",
            &with_port,
            ClusterEvent::PodDeleted(placed(PodBuilder::new("o").host_port("", "TCP", 80))),
            Queue,
        ),
        (
            "NodePorts",
            &with_port,
            ClusterEvent::PodDeleted(placed(PodBuilder::new("o").host_port("", "TCP", 81))),
            Skip,
        ),
        ("NodePorts", &with_port, added(n()), Queue),
        ("InterPodAffinity", &affine, ClusterEvent::PodAdded(placed(PodBuilder::new("o").label("app", "db"))), Queue),
        ("InterPodAffinity", &affine, ClusterEvent::PodAdded(placed(PodBuilder::new("o").label("app", "web"))), Skip),
        ("InterPodAffinity", &anti, ClusterEvent::PodDeleted(placed(PodBuilder::new("o").label("app", "web"))), Queue),
        ("InterPodAffinity", &anti, ClusterEvent::PodDeleted(placed(PodBuilder::new("o").label("app", "db"))), Skip),
        (
            "InterPodAffinity",
            &plain,
            ClusterEvent::PodDeleted(placed(
                PodBuilder::new("o").pod_anti_affinity(affinity_term(&[("app", "db")], "zone")),
            )),
            Skip,
        ),
        (
            "InterPodAffinity",
            &anti,
            ClusterEvent::PodDeleted(placed(
                PodBuilder::new("o").pod_anti_affinity(affinity_term(&[("app", "web")], "zone")),
            )),
            Queue,
        ),
        (
            "InterPodAffinity",
            &anti,
            ClusterEvent::PodUpdated {
                old: placed(PodBuilder::new("o").label("app", "web")),
                new: placed(PodBuilder::new("o").label("app", "api")),
            },
            Queue,
        ),
        ("InterPodAffinity", &affine, updated(n(), n().label("zone", "a")), Queue),
        ("InterPodAffinity", &affine, updated(n().label("zone", "a"), n().label("zone", "a")), Skip),
        ("PodTopologySpread", &spread, ClusterEvent::PodDeleted(placed(PodBuilder::new("o").label("app", "s"))), Queue),
        ("PodTopologySpread", &spread, ClusterEvent::PodAdded(placed(PodBuilder::new("o").label("app", "s"))), Queue),
        ("PodTopologySpread", &spread, ClusterEvent::PodAdded(placed(PodBuilder::new("o").label("app", "t"))), Skip),
        (
            "PodTopologySpread",
            &spread,
            ClusterEvent::PodAdded(placed(PodBuilder::new("o").namespace("other").label("app", "s"))),
            Skip,
        ),
        ("PodTopologySpread", &spread, added(n().label("zone", "c")), Queue),
        ("PodTopologySpread", &spread, added(n()), Skip),
        ("PodTopologySpread", &spread, ClusterEvent::NodeDeleted(node(n().label("zone", "c"))), Queue),
    ];
    for (i, (plugin, pod, event, want)) in cases.iter().enumerate() {
        assert_eq!(hint(plugin, pod, event), *want, "case {i}: {plugin} {} for {}", event.label(), pod.name);
    }
}

#[test]
fn volume_filters_retry_on_the_storage_events_that_can_help() {
    use crate::events::{ObjectAction, ObjectEvent};
    use QueueingHint::{Queue, Skip};
    let storage = |kind, action, key: &str| ClusterEvent::Object(ObjectEvent { kind, action, key: key.into() });
    let with_claim = PodBuilder::new("p").claim("v", "data").info();
    let user = placed(PodBuilder::new("u").claim("v", "data"));
    let stranger = placed(PodBuilder::new("s").claim("v", "other"));
    let cases = [
        ("VolumeZone", storage(crate::volumes::kinds::CLAIM, ObjectAction::Add, "default/data"), Queue),
        ("VolumeZone", storage(crate::volumes::kinds::CLAIM, ObjectAction::Update, "default/other"), Skip),
        ("VolumeZone", storage(crate::volumes::kinds::VOLUME, ObjectAction::Update, "pv"), Queue),
        ("VolumeZone", storage(crate::volumes::kinds::CLASS, ObjectAction::Add, "sc"), Queue),
        ("VolumeZone", storage(crate::volumes::kinds::CLASS, ObjectAction::Update, "sc"), Skip),
        ("VolumeZone", added(NodeBuilder::new("x")), Queue),
        ("VolumeZone", ClusterEvent::PodDeleted(user.clone()), Skip),
        ("VolumeRestrictions", ClusterEvent::PodDeleted(user.clone()), Queue),
        ("VolumeRestrictions", ClusterEvent::PodDeleted(stranger.clone()), Skip),
        ("VolumeRestrictions", storage(crate::volumes::kinds::CLAIM, ObjectAction::Add, "default/data"), Queue),
        ("VolumeRestrictions", storage(crate::volumes::kinds::VOLUME, ObjectAction::Add, "pv"), Skip),
        ("NodeVolumeLimits", ClusterEvent::PodDeleted(user), Queue),
        ("NodeVolumeLimits", ClusterEvent::PodDeleted(placed(PodBuilder::new("none"))), Skip),
        ("NodeVolumeLimits", storage(crate::volumes::kinds::CSI_NODE, ObjectAction::Update, "n"), Queue),
        ("NodeVolumeLimits", storage(crate::volumes::kinds::CLAIM, ObjectAction::Add, "default/data"), Queue),
        ("NodeVolumeLimits", storage(crate::volumes::kinds::CLAIM, ObjectAction::Add, "default/other"), Skip),
        ("NodeVolumeLimits", ClusterEvent::PodAdded(stranger), Skip),
        ("VolumeBinding", updated(NodeBuilder::new("x"), NodeBuilder::new("x").label("zone", "z")), Queue),
        ("VolumeBinding", updated(NodeBuilder::new("x"), NodeBuilder::new("x").taint("k", "v", "NoSchedule")), Skip),
    ];
    for (plugin, event, want) in cases {
        assert_eq!(hint(plugin, &with_claim, &event), want, "{plugin} on {}", event.label());
    }
    // Other filters are not woken by storage events.
    let plain = PodBuilder::new("p").req("1", "1Gi").info();
    for plugin in ["NodeResourcesFit", "PodTopologySpread", "InterPodAffinity", "NodeAffinity", "TaintToleration"] {
        assert_eq!(
            hint(plugin, &plain, &storage(crate::volumes::kinds::VOLUME, ObjectAction::Add, "pv")),
            Skip,
            "{plugin}"
        );
    }
}

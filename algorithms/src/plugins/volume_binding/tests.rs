//! Cases of kube-scheduler's volume_binding_test.go and binder_test.go (FindPodVolumes
//! with and without provisioning, storage capacity, assume and revert), in our terms.

use std::sync::Arc;

use k8s_openapi::api::core::v1 as core;

use super::*;
use crate::builders::{NodeBuilder, PodBuilder, filter_all, snapshot};
use crate::status::Code;
use crate::volumes::builders::{GI, bound_claim, capacity, claim, claimed, class, on, sized_claim, volume};
use crate::volumes::{CsiDriver, StorageClass, Volume, VolumeClaim};

const HOST: &str = "kubernetes.io/hostname";

#[derive(Default)]
struct World {
    claims: Vec<VolumeClaim>,
    volumes: Vec<Volume>,
    classes: Vec<StorageClass>,
    capacity_driver: bool,
    capacities: Vec<crate::volumes::Capacity>,
}

fn classes() -> Vec<StorageClass> {
    let mut topo = class("wait-topo", "csi.example.com", true);
    topo.allowed_topologies = vec![vec![(HOST.to_string(), vec!["node-a".to_string()])]];
    vec![
        class("immediate-sc", "", false),
        class("wait-sc", "", true),
        class("wait-hdd-sc", "", true),
        class("no-provisioner", "kubernetes.io/no-provisioner", true),
        class("provisioned", "csi.example.com", true),
        topo,
    ]
}

fn state(w: World) -> VolumeState {
    let mut s = VolumeState::default();
    for c in w.claims {
        s.upsert_claim(c);
    }
    for v in w.volumes {
        s.upsert_volume(v);
    }
    for c in if w.classes.is_empty() { classes() } else { w.classes } {
        s.upsert_class(c);
    }
    if w.capacity_driver {
        s.upsert_driver(CsiDriver { name: "csi.example.com".into(), storage_capacity: true });
    }
    for c in w.capacities {
        s.upsert_capacity(c);
    }
    s
}

fn nodes(names: &[&str]) -> Vec<core::Node> {
    names.iter().map(|n| NodeBuilder::new(n).build()).collect()
}

fn run(pod: core::Pod, nodes: &[core::Node], w: World) -> Vec<Status> {
    let mut snap = snapshot(nodes, &[]);
    snap.objects = Arc::new(crate::objects::ClusterObjects::default().with(state(w)));
    filter_all(&VolumeBinding::default(), &pod, &snap)
}

fn pod(claims: &[&str]) -> core::Pod {
    claims.iter().fold(PodBuilder::new("pod-a"), |p, c| p.claim(&format!("vol-{c}"), c)).build()
}

fn reasons(st: &Status) -> Vec<String> {
    st.reasons.iter().map(|r| r.to_string()).collect()
}

fn ok() -> (Code, Vec<&'static str>) {
    (Code::Success, vec![])
}

fn no(rs: &[&'static str]) -> (Code, Vec<&'static str>) {
    (Code::UnschedulableAndUnresolvable, rs.to_vec())
}

fn check(name: &str, got: &[Status], want: &[(Code, Vec<&str>)]) {
    assert_eq!(got.len(), want.len(), "{name}");
    for (g, (code, rs)) in got.iter().zip(want) {
        assert_eq!(g.code, *code, "{name}: {g:?}");
        assert_eq!(reasons(g), *rs, "{name}");
    }
}

#[test]
fn plugin_table() {
    let affine = on(volume("pv-a", "wait-sc", GI), &[("foo", "bar")]);
    let cases: Vec<(&str, core::Pod, World, Vec<(Code, Vec<&str>)>)> = vec![
        ("pod without claims skips", PodBuilder::new("p").build(), World::default(), vec![ok()]),
        (
            "all bound",
            pod(&["pvc-a"]),
            World {
                claims: vec![bound_claim("pvc-a", "wait-sc", "pv-a")],
                volumes: vec![claimed(volume("pv-a", "wait-sc", GI), &bound_claim("pvc-a", "wait-sc", "pv-a"))],
                ..Default::default()
            },
            vec![ok()],
        ),
        ("missing claim", pod(&["pvc-a"]), World::default(), vec![no(&["persistentvolumeclaim \"pvc-a\" not found"])]),
        (
            "one of two claims missing",
            pod(&["pvc-a", "pvc-b"]),
            World {
                claims: vec![bound_claim("pvc-a", "wait-sc", "pv-a")],
                volumes: vec![volume("pv-a", "wait-sc", GI)],
                ..Default::default()
            },
            vec![no(&["persistentvolumeclaim \"pvc-b\" not found"])],
        ),
        (
            "unbound immediate claim",
            pod(&["pvc-a"]),
            World { claims: vec![claim("pvc-a", "immediate-sc")], ..Default::default() },
            vec![no(&[ERR_UNBOUND_IMMEDIATE])],
        ),
        (
            "claim without class binds immediately",
            pod(&["pvc-a"]),
            World { claims: vec![claim("pvc-a", "")], ..Default::default() },
            vec![no(&[ERR_UNBOUND_IMMEDIATE])],
        ),
        (
            "claim of an unknown class binds immediately",
            pod(&["pvc-a"]),
            World { claims: vec![claim("pvc-a", "nowhere")], ..Default::default() },
            vec![no(&[ERR_UNBOUND_IMMEDIATE])],
        ),
        (
            "pre-bound claim without bind-completed waits like an immediate one",
            pod(&["pvc-a"]),
            World {
                claims: vec![VolumeClaim { volume_name: "pv-a".into(), ..claim("pvc-a", "wait-sc") }],
                volumes: vec![volume("pv-a", "wait-sc", GI)],
                ..Default::default()
            },
            vec![no(&[ERR_UNBOUND_IMMEDIATE])],
        ),
        (
            "unbound claim, no volumes, no provisioner",
            pod(&["pvc-a"]),
            World { claims: vec![claim("pvc-a", "wait-sc")], ..Default::default() },
            vec![no(&[ERR_BIND_CONFLICT])],
        ),
        (
            "bound and unbound both unsatisfied: two reasons in order",
            pod(&["pvc-a", "pvc-b"]),
            World {
                claims: vec![bound_claim("pvc-a", "wait-sc", "pv-a"), claim("pvc-b", "wait-sc")],
                volumes: vec![claimed(affine.clone(), &bound_claim("pvc-a", "wait-sc", "pv-a"))],
                ..Default::default()
            },
            vec![no(&[ERR_NODE_CONFLICT, ERR_BIND_CONFLICT])],
        ),
        (
            "bound claim whose volume is missing",
            pod(&["pvc-a"]),
            World { claims: vec![bound_claim("pvc-a", "wait-sc", "pv-a")], ..Default::default() },
            vec![no(&[ERR_PV_NOT_EXIST])],
        ),
        (
            "lost claim",
            pod(&["pvc-a"]),
            World {
                claims: vec![VolumeClaim { phase: "Lost".into(), ..bound_claim("pvc-a", "wait-sc", "pv-a") }],
                ..Default::default()
            },
            vec![no(&["persistentvolumeclaim \"pvc-a\" bound to non-existent persistentvolume \"pv-a\""])],
        ),
        (
            "claim being deleted",
            pod(&["pvc-a"]),
            World { claims: vec![VolumeClaim { deleting: true, ..claim("pvc-a", "wait-sc") }], ..Default::default() },
            vec![no(&["persistentvolumeclaim \"pvc-a\" is being deleted"])],
        ),
    ];
    for (name, p, w, want) in cases {
        check(name, &run(p, &nodes(&["node-a"]), w), &want);
    }
}

#[test]
fn static_volumes_smallest_fit_on_the_node() {
    let pv = |n: &str, node: &str, size: i64| on(volume(n, "wait-sc", size * GI), &[(HOST, node)]);
    let w = || World {
        claims: vec![sized_claim("small", "wait-sc", GI), sized_claim("big", "wait-sc", 5 * GI)],
        volumes: vec![pv("pv-2", "node-b", 1), pv("pv-1a", "node-a", 5), pv("pv-1b", "node-a", 10)],
        ..Default::default()
    };
    let st = state(w());
    let p = PodBuilder::new("p").claim("v1", "big").claim("v2", "small").info();
    let s = pre_filter(&p, &st).unwrap().unwrap();
    let node_a = crate::NodeInfo::from_node(&NodeBuilder::new("node-a").build()).unwrap();
    let (b, verdict) = find_pod_volumes(&s, &node_a).unwrap();
    assert!(verdict.reasons().is_empty());
    let got: Vec<(&str, &str)> = b.static_bindings.iter().map(|(c, v)| (c.name.as_str(), v.name.as_str())).collect();
    // Claims are matched by increasing size: the 1Gi claim takes the 5Gi volume.
    assert_eq!(got, vec![("small", "pv-1a"), ("big", "pv-1b")]);
    // node-b has one 1Gi volume: the small claim fits, the big one has no volume.
    let node_b = crate::NodeInfo::from_node(&NodeBuilder::new("node-b").build()).unwrap();
    let (_, verdict) = find_pod_volumes(&s, &node_b).unwrap();
    assert_eq!(verdict.reasons(), vec![ERR_BIND_CONFLICT]);
    // Volumes of other classes, modes, selectors, phases and pre-bound to other claims are not candidates.
    let mut w = w();
    w.claims = vec![VolumeClaim { access_modes: vec!["ReadWriteMany".into()], ..sized_claim("small", "wait-sc", GI) }];
    let p = PodBuilder::new("p").claim("v", "small").build();
    check("access modes", &run(p.clone(), &nodes(&["node-a"]), w), &[no(&[ERR_BIND_CONFLICT])]);
    let other = claim("other", "wait-sc");
    for v in [
        Volume { phase: "Released".into(), ..pv("x", "node-a", 5) },
        Volume { class: "wait-hdd-sc".into(), ..pv("x", "node-a", 5) },
        Volume { block: true, ..pv("x", "node-a", 5) },
        Volume { deleting: true, ..pv("x", "node-a", 5) },
        Volume { attributes_class: "gold".into(), ..pv("x", "node-a", 5) },
        claimed(pv("x", "node-a", 5), &other),
        pv("x", "node-a", 0),
    ] {
        let w =
            World { claims: vec![sized_claim("small", "wait-sc", GI)], volumes: vec![v.clone()], ..Default::default() };
        check(&format!("{v:?}"), &run(p.clone(), &nodes(&["node-a"]), w), &[no(&[ERR_BIND_CONFLICT])]);
    }
}

#[test]
fn volume_pre_bound_to_the_claim_is_the_only_choice() {
    let c = sized_claim("c", "wait-sc", GI);
    let mine =
        Volume { phase: "Pending".into(), ..claimed(on(volume("mine", "wait-sc", 2 * GI), &[(HOST, "node-b")]), &c) };
    let w = World {
        claims: vec![c],
        volumes: vec![mine, on(volume("free", "wait-sc", GI), &[(HOST, "node-a")])],
        ..Default::default()
    };
    let p = PodBuilder::new("p").claim("v", "c").build();
    // On node-a a free volume exists, but the pre-bound one decides: no match there.
    check("pre-bound", &run(p, &nodes(&["node-a", "node-b"]), w), &[no(&[ERR_BIND_CONFLICT]), ok()]);
}

#[test]
fn provisioning_table() {
    let p = || PodBuilder::new("p").claim("v", "c").build();
    let cases: Vec<(&str, VolumeClaim, bool, Vec<crate::volumes::Capacity>, Vec<(Code, Vec<&str>)>)> = vec![
        ("provisioner without capacity tracking", sized_claim("c", "provisioned", GI), false, vec![], vec![ok(), ok()]),
        ("no provisioner", claim("c", "no-provisioner"), false, vec![], vec![no(&[ERR_BIND_CONFLICT]); 2]),
        ("allowed topologies", claim("c", "wait-topo"), false, vec![], vec![ok(), no(&[ERR_BIND_CONFLICT])]),
        (
            "selected node elsewhere",
            VolumeClaim { selected_node: Some("node-b".into()), ..claim("c", "provisioned") },
            false,
            vec![],
            vec![no(&[ERR_BIND_CONFLICT]), ok()],
        ),
        (
            "tracked capacity, none published",
            sized_claim("c", "provisioned", GI),
            true,
            vec![],
            vec![no(&[ERR_NOT_ENOUGH_SPACE]); 2],
        ),
        (
            "network-attached capacity covers every node",
            sized_claim("c", "provisioned", GI),
            true,
            vec![capacity("net", "provisioned", None, Some(GI), None)],
            vec![ok(), ok()],
        ),
        (
            "local capacity on one node",
            sized_claim("c", "provisioned", GI),
            true,
            vec![capacity("local", "provisioned", Some((HOST, "node-b")), Some(GI), None)],
            vec![no(&[ERR_NOT_ENOUGH_SPACE]), ok()],
        ),
        (
            "capacity of another class",
            sized_claim("c", "provisioned", GI),
            true,
            vec![capacity("x", "wait-sc", None, Some(10 * GI), None)],
            vec![no(&[ERR_NOT_ENOUGH_SPACE]); 2],
        ),
        (
            "insufficient capacity",
            sized_claim("c", "provisioned", GI),
            true,
            vec![capacity("x", "provisioned", None, Some(1 << 20), None)],
            vec![no(&[ERR_NOT_ENOUGH_SPACE]); 2],
        ),
        (
            "maximum volume size below the request",
            sized_claim("c", "provisioned", GI),
            true,
            vec![capacity("x", "provisioned", None, Some(GI), Some(1 << 20))],
            vec![no(&[ERR_NOT_ENOUGH_SPACE]); 2],
        ),
        (
            "neither capacity nor maximum",
            sized_claim("c", "provisioned", GI),
            true,
            vec![capacity("x", "provisioned", None, None, None)],
            vec![no(&[ERR_NOT_ENOUGH_SPACE]); 2],
        ),
        ("no storage request: no capacity check", claim("c", "provisioned"), true, vec![], vec![ok(), ok()]),
    ];
    for (name, c, tracked, caps, want) in cases {
        let w = World { claims: vec![c], capacity_driver: tracked, capacities: caps, ..Default::default() };
        check(name, &run(p(), &nodes(&["node-a", "node-b"]), w), &want);
    }
}

#[test]
fn a_selected_claim_whose_class_lost_its_provisioner_cannot_bind() {
    let w = World {
        claims: vec![VolumeClaim { selected_node: Some("node-a".into()), ..claim("c", "wait-sc") }],
        classes: vec![class("wait-sc", "csi.example.com", true)],
        ..Default::default()
    };
    let mut st = state(w);
    st.remove_class("wait-sc");
    st.upsert_class(class("wait-sc", "", true));
    let p = PodBuilder::new("p").claim("v", "c").info();
    let s = pre_filter(&p, &st).unwrap().unwrap();
    let node = crate::NodeInfo::from_node(&NodeBuilder::new("node-a").build()).unwrap();
    assert_eq!(filter_node(&s, &node).reasons[0], ERR_BIND_CONFLICT);
}

#[test]
fn ephemeral_claims_must_belong_to_the_pod() {
    let p = PodBuilder::new("pod-a").ephemeral("scratch").build();
    let owned =
        VolumeClaim { controller_uid: Some("uid-pod-a".into()), ..bound_claim("pod-a-scratch", "wait-sc", "pv") };
    let w = |c: Option<VolumeClaim>| World {
        claims: c.into_iter().collect(),
        volumes: vec![volume("pv", "wait-sc", GI)],
        ..Default::default()
    };
    check("owned", &run(p.clone(), &nodes(&["n"]), w(Some(owned.clone()))), &[ok()]);
    check(
        "missing",
        &run(p.clone(), &nodes(&["n"]), w(None)),
        &[no(&["waiting for ephemeral volume controller to create the persistentvolumeclaim \"pod-a-scratch\""])],
    );
    check(
        "not owned",
        &run(p, &nodes(&["n"]), w(Some(VolumeClaim { controller_uid: None, ..owned }))),
        &[no(&["PVC default/pod-a-scratch was not created for pod default/pod-a (pod is not owner)"])],
    );
}

#[test]
fn assumed_bindings_are_seen_by_the_next_pod_and_reverted() {
    let w = World {
        claims: vec![sized_claim("c1", "wait-sc", GI), sized_claim("c2", "wait-sc", GI), claim("c3", "provisioned")],
        volumes: vec![volume("only", "wait-sc", GI)],
        ..Default::default()
    };
    let mut st = state(w);
    let node = crate::NodeInfo::from_node(&NodeBuilder::new("node-a").build()).unwrap();
    let first = PodBuilder::new("p1").claim("v", "c1").claim("w", "c3").info();
    let s = pre_filter(&first, &st).unwrap().unwrap();
    let (b, _) = find_pod_volumes(&s, &node).unwrap();
    let assumed = assume(&mut st, "node-a", &b);
    let pv = st.volume("only").unwrap();
    assert_eq!(pv.claim_ref.as_ref().map(|r| r.name.as_str()), Some("c1"));
    assert_eq!(pv.annotations.get("pv.kubernetes.io/bound-by-controller").map(String::as_str), Some("yes"));
    assert_eq!(st.claim("default/c3").unwrap().selected_node.as_deref(), Some("node-a"));
    assert_eq!(assumed.provisions[0].selected_node.as_deref(), Some("node-a"));
    // The same pod finds the same bindings again (the volume is pre-bound to its claim now).
    let again = pre_filter(&first, &st).unwrap().unwrap();
    assert_eq!(find_pod_volumes(&again, &node).unwrap().0.static_bindings[0].1.name, "only");
    // Another pod no longer finds the volume.
    let second = PodBuilder::new("p2").claim("v", "c2").info();
    let s2 = pre_filter(&second, &st).unwrap().unwrap();
    assert_eq!(find_pod_volumes(&s2, &node).unwrap().1.reasons(), vec![ERR_BIND_CONFLICT]);
    revert(&mut st, &assumed);
    assert!(st.volume("only").unwrap().claim_ref.is_none());
    assert!(st.claim("default/c3").unwrap().selected_node.is_none());
    let s2 = pre_filter(&second, &st).unwrap().unwrap();
    assert!(find_pod_volumes(&s2, &node).unwrap().1.reasons().is_empty());
}

#[test]
fn an_api_update_replaces_the_assumption() {
    let mut st = state(World { claims: vec![claim("c", "provisioned")], ..Default::default() });
    st.assume_claim(VolumeClaim { selected_node: Some("n".into()), ..claim("c", "provisioned") });
    assert!(st.is_assumed_claim("default/c"));
    st.upsert_claim(VolumeClaim { resource_version: "2".into(), ..bound_claim("c", "provisioned", "pv") });
    assert!(!st.is_assumed_claim("default/c"));
    assert!(st.claim("default/c").unwrap().fully_bound());
}

#[test]
fn hints_follow_the_pods_claims() {
    use crate::events::{ObjectAction, ObjectEvent};
    let p = PodBuilder::new("pod-a").claim("v", "mine").ephemeral("e").info();
    let ev = |kind, action, key: &str| ClusterEvent::Object(ObjectEvent { kind, action, key: key.into() });
    let vb = VolumeBinding::default();
    let cases = [
        (ev(crate::volumes::kinds::CLAIM, ObjectAction::Add, "default/mine"), QueueingHint::Queue),
        (ev(crate::volumes::kinds::CLAIM, ObjectAction::Update, "default/pod-a-e"), QueueingHint::Queue),
        (ev(crate::volumes::kinds::CLAIM, ObjectAction::Add, "other/mine"), QueueingHint::Skip),
        (ev(crate::volumes::kinds::CLAIM, ObjectAction::Add, "default/theirs"), QueueingHint::Skip),
        (ev(crate::volumes::kinds::VOLUME, ObjectAction::Add, "pv"), QueueingHint::Queue),
        (ev(crate::volumes::kinds::CAPACITY, ObjectAction::Update, "default/cap"), QueueingHint::Queue),
        (ev(crate::volumes::kinds::CSI_DRIVER, ObjectAction::Update, "d"), QueueingHint::Skip),
        (ev(crate::volumes::kinds::VOLUME, ObjectAction::Delete, "pv"), QueueingHint::Skip),
    ];
    for (e, want) in cases {
        assert_eq!(vb.queueing_hint(&p, &e), want, "{e:?}");
    }
}

/// Scores of every node with scoring on and `shape` (kube-scheduler's tests use
/// 0→0, 100→10 unless they say otherwise).
fn scores(pod: core::Pod, nodes: &[core::Node], w: World, shape: &[(i64, i64)]) -> Vec<i64> {
    let mut snap = snapshot(nodes, &[]);
    snap.objects = Arc::new(crate::objects::ClusterObjects::default().with(state(w)));
    let shape = shape.iter().map(|&(utilization, score)| ShapePoint { utilization, score }).collect();
    let plugin = VolumeBinding { args: VolumeBindingArgs::default(), shape: Some(shape) };
    crate::builders::score_all(&plugin, &pod, &snap)
}

const RISING: &[(i64, i64)] = &[(0, 0), (100, 10)];

#[test]
fn static_volumes_with_close_capacity_score_higher() {
    let pv = |n: &str, class: &str, node: &str, size: i64| on(volume(n, class, size * GI), &[(HOST, node)]);
    let one = World {
        claims: vec![sized_claim("pvc-a", "wait-sc", 50 * GI)],
        volumes: vec![
            pv("pv-a-0", "wait-sc", "node-a", 200),
            pv("pv-a-1", "wait-sc", "node-a", 200),
            pv("pv-b-0", "wait-sc", "node-b", 100),
            pv("pv-b-1", "wait-sc", "node-b", 100),
        ],
        ..Default::default()
    };
    let three = nodes(&["node-a", "node-b", "node-c"]);
    assert_eq!(scores(pod(&["pvc-a"]), &three, one, RISING), vec![25, 50, 0]);
    let two_classes = World {
        claims: vec![sized_claim("pvc-0", "wait-sc", 50 * GI), sized_claim("pvc-1", "wait-hdd-sc", 100 * GI)],
        volumes: vec![
            pv("a-0", "wait-sc", "node-a", 200),
            pv("a-1", "wait-sc", "node-a", 200),
            pv("a-2", "wait-hdd-sc", "node-a", 200),
            pv("a-3", "wait-hdd-sc", "node-a", 200),
            pv("b-0", "wait-sc", "node-b", 100),
            pv("b-1", "wait-sc", "node-b", 100),
            pv("b-2", "wait-hdd-sc", "node-b", 100),
            pv("b-3", "wait-hdd-sc", "node-b", 100),
        ],
        ..Default::default()
    };
    assert_eq!(scores(pod(&["pvc-0", "pvc-1"]), &three, two_classes, RISING), vec![38, 75, 0]);
}

#[test]
fn zonal_volumes_with_close_capacity_score_higher() {
    let zonal =
        |n: &str, zone: &str, size: i64| on(volume(n, "wait-sc", size * GI), &[("region", "region-a"), ("zone", zone)]);
    let names = ["zone-a-node-a", "zone-a-node-b", "zone-b-node-a", "zone-b-node-b", "zone-c-node-a", "zone-c-node-b"];
    let ns: Vec<core::Node> =
        names.iter().map(|n| NodeBuilder::new(n).label("region", "region-a").label("zone", &n[..6]).build()).collect();
    let w = || World {
        claims: vec![sized_claim("pvc-a", "wait-sc", 50 * GI)],
        volumes: vec![
            zonal("a-0", "zone-a", 200),
            zonal("a-1", "zone-a", 200),
            zonal("b-0", "zone-b", 100),
            zonal("b-1", "zone-b", 100),
        ],
        ..Default::default()
    };
    assert_eq!(scores(pod(&["pvc-a"]), &ns, w(), RISING), vec![25, 25, 50, 50, 0, 0]);
    let custom = &[(0, 0), (50, 3), (100, 5)];
    assert_eq!(scores(pod(&["pvc-a"]), &ns, w(), custom), vec![15, 15, 30, 30, 0, 0]);
}

#[test]
fn provisioning_scores_by_the_capacity_it_would_draw_from() {
    let node = |n: &str| NodeBuilder::new(n).label("nodeKey", n).build();
    let ns = vec![node("node-a"), node("node-b"), node("node-c")];
    let caps = |sizes: [i64; 3]| {
        ["node-a", "node-b", "node-c"]
            .iter()
            .zip(sizes)
            .map(|(n, s)| capacity(&format!("cap-{n}"), "provisioned", Some(("nodeKey", n)), Some(s * GI), None))
            .collect::<Vec<_>>()
    };
    let w = |claims: Vec<VolumeClaim>, sizes: [i64; 3], volumes: Vec<Volume>| World {
        claims,
        volumes,
        capacity_driver: true,
        capacities: caps(sizes),
        ..Default::default()
    };
    let dynamic = || sized_claim("pvc-dynamic", "provisioned", 10 * GI);
    assert_eq!(
        scores(pod(&["pvc-dynamic"]), &ns, w(vec![dynamic()], [100, 50, 10], vec![]), RISING),
        vec![10, 20, 100]
    );
    // With a static binding on the node, only static volumes count.
    let statics: Vec<Volume> = ["node-a", "node-b", "node-c"]
        .iter()
        .map(|n| on(volume(&format!("pv-{n}"), "wait-sc", 100 * GI), &[("nodeKey", n)]))
        .collect();
    let both = w(vec![dynamic(), sized_claim("pvc-static", "wait-sc", 50 * GI)], [100, 50, 10], statics);
    assert_eq!(scores(pod(&["pvc-dynamic", "pvc-static"]), &ns, both, RISING), vec![50, 50, 50]);
    // Two claims of one class: the capacity is taken once, the requests add up.
    let two = w(
        vec![sized_claim("d1", "provisioned", 50 * GI), sized_claim("d2", "provisioned", 50 * GI)],
        [100, 100, 100],
        vec![],
    );
    assert_eq!(scores(pod(&["d1", "d2"]), &ns[..1], two, RISING), vec![100]);
    let least = || w(vec![dynamic()], [100, 20, 10], vec![]);
    assert_eq!(scores(pod(&["pvc-dynamic"]), &ns, least(), RISING), vec![10, 50, 100]);
    assert_eq!(scores(pod(&["pvc-dynamic"]), &ns, least(), &[(0, 10), (100, 0)]), vec![90, 50, 0]);
}

#[test]
fn a_shape_needs_the_scoring_gate() {
    let args = VolumeBindingArgs { shape: vec![ShapePoint { utilization: 0, score: 10 }], ..Default::default() };
    assert!(VolumeBinding::new(args.clone(), false).unwrap_err().contains("StorageCapacityScoring"));
    assert!(VolumeBinding::new(VolumeBindingArgs::default(), false).unwrap().shape.is_none());
    // With the gate: the shape given, or the default one.
    assert_eq!(VolumeBinding::new(args.clone(), true).unwrap().shape, Some(args.shape));
    assert_eq!(VolumeBinding::new(VolumeBindingArgs::default(), true).unwrap().shape, Some(DEFAULT_SHAPE.to_vec()));
    // The gate reaches the plugin through the profile: VolumeBinding scores, weight 1.
    let gates = crate::features::FeatureGates { storage_capacity_scoring: true, ..Default::default() };
    let profile = crate::config::default_profile_with("s", gates);
    assert!(profile.scores.iter().any(|s| s.plugin.name() == NAME && s.weight == 1));
    assert!(crate::config::default_profile("s").scores.iter().all(|s| s.plugin.name() != NAME));
}

#[test]
fn details_name_the_claim_and_why() {
    crate::status::with_details(true, details_name_the_claim_and_why_with_details_on);
}

fn details_name_the_claim_and_why_with_details_on() {
    let w = World { claims: vec![claim("c", "wait-topo")], ..Default::default() };
    let st = run(PodBuilder::new("p").claim("v", "c").build(), &nodes(&["node-a", "node-b"]), w);
    assert!(st[0].is_success());
    assert_eq!(
        st[1].detail.as_deref(),
        Some("claim c: no available volume fits here, and class wait-topo does not allow this node's topology")
    );
    let w = World { claims: vec![bound_claim("c", "wait-sc", "gone")], ..Default::default() };
    let st = run(PodBuilder::new("p").claim("v", "c").build(), &nodes(&["node-a"]), w);
    assert_eq!(st[0].detail.as_deref(), Some("claim c is bound to missing volume gone"));
}

//! Cases of kube-scheduler's volume_zone_test.go (single zone, multi-zone, binding modes).

use std::sync::Arc;

use super::*;
use crate::builders::{NodeBuilder, PodBuilder, filter_all, snapshot};
use crate::status::Code;
use crate::volumes::Volume;
use crate::volumes::builders::{bound_claim, claim, class, volume};

fn labelled(name: &str, labels: &[(&str, &str)]) -> Volume {
    let mut v = volume(name, "", 1);
    v.labels = labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    v
}

fn world() -> VolumeState {
    let mut s = VolumeState::default();
    let vols = [
        labelled("Vol_1", &[(BETA_ZONE, "us-west1-a")]),
        labelled("Vol_2", &[(BETA_REGION, "us-west1"), ("uselessLabel", "none")]),
        labelled("Vol_3", &[(BETA_ZONE, "us-west1-c__us-west1-a")]),
        labelled("Vol_Stable_1", &[(ZONE, "us-west1-a")]),
        labelled("Vol_Stable_2", &[(REGION, "us-west1")]),
        labelled("Vol_Stable_3", &[(ZONE, "us-west1-a"), (REGION, "us-west1-a")]),
        labelled("Vol_Multi", &[(ZONE, "us-west1-c__us-west1-a")]),
    ];
    for v in vols {
        s.upsert_claim(bound_claim(&format!("PVC{}", &v.name[3..]), "", &v.name));
        s.upsert_volume(v);
    }
    s.upsert_claim(bound_claim("PVC_4", "", "Vol_not_exist"));
    s.upsert_claim(claim("PVC_NoSC", "Class_0"));
    s.upsert_claim(claim("PVC_EmptySC", ""));
    s.upsert_claim(claim("PVC_WaitSC", "Class_Wait"));
    s.upsert_claim(claim("PVC_ImmediateSC", "Class_Immediate"));
    s.upsert_class(class("Class_Wait", "", true));
    s.upsert_class(class("Class_Immediate", "", false));
    s
}

fn run(claim: Option<&str>, node_labels: &[(&str, &str)]) -> Status {
    let node = node_labels.iter().fold(NodeBuilder::new("host1").no_labels(), |n, (k, v)| n.label(k, v)).build();
    let mut snap = snapshot(&[node], &[]);
    snap.objects = Arc::new(crate::objects::ClusterObjects::default().with(world()));
    let pod = match claim {
        Some(c) => PodBuilder::new("pod_1").claim("vol", c).build(),
        None => PodBuilder::new("pod_1").build(),
    };
    filter_all(&VolumeZone, &pod, &snap).remove(0)
}

#[test]
fn zone_table() {
    let conflict = Some(ERR_REASON);
    let cases: &[(&str, Option<&str>, &[(&str, &str)], Option<&str>)] = &[
        ("pod without volume", None, &[(BETA_ZONE, "us-west1-a")], None),
        ("node without labels", Some("PVC_1"), &[], None),
        ("beta zone label matched", Some("PVC_1"), &[(BETA_ZONE, "us-west1-a")], None),
        ("beta region label matched", Some("PVC_2"), &[(BETA_REGION, "us-west1")], None),
        ("beta region label doesn't match", Some("PVC_2"), &[(BETA_REGION, "no_us-west1")], conflict),
        ("beta zone label doesn't match", Some("PVC_1"), &[(BETA_ZONE, "no_us-west1-a")], conflict),
        ("zone label matched", Some("PVC_Stable_1"), &[(ZONE, "us-west1-a")], None),
        ("region label matched", Some("PVC_Stable_2"), &[(REGION, "us-west1")], None),
        ("region label doesn't match", Some("PVC_Stable_2"), &[(REGION, "no_us-west1")], conflict),
        ("zone label doesn't match", Some("PVC_Stable_1"), &[(ZONE, "no_us-west1-a")], conflict),
        ("pv with zone and region, node with only zone", Some("PVC_Stable_3"), &[(ZONE, "us-west1-a")], conflict),
        ("pv with zone, node with beta zone", Some("PVC_Stable_1"), &[(BETA_ZONE, "us-west1-a")], conflict),
        ("pv with beta label, node with ga label, matched", Some("PVC_1"), &[(ZONE, "us-west1-a")], None),
        ("pv with beta label, node with ga label, no match", Some("PVC_1"), &[(ZONE, "us-west1-b")], conflict),
        ("multi-zone beta matched", Some("PVC_3"), &[(BETA_ZONE, "us-west1-a")], None),
        ("multi-zone ga matched", Some("PVC_Multi"), &[(ZONE, "us-west1-a")], None),
        ("multi-zone ga doesn't match", Some("PVC_Multi"), &[(ZONE, "us-west1-b")], conflict),
        ("unbound wait claim is left to VolumeBinding", Some("PVC_WaitSC"), &[(ZONE, "x")], None),
    ];
    for (name, claim, labels, want) in cases {
        let st = run(*claim, labels);
        match want {
            None => assert!(st.is_success(), "{name}: {st:?}"),
            Some(r) => {
                assert_eq!(st.code, Code::UnschedulableAndUnresolvable, "{name}");
                assert_eq!(st.message(), *r, "{name}");
            }
        }
    }
}

#[test]
fn unusable_claims_reject_the_pod() {
    let cases = [
        ("PVC_EmptySC", "PersistentVolumeClaim had no pv name and storageClass name"),
        ("PVC_NoSC", "storageclass.storage.k8s.io \"Class_0\" not found"),
        ("PVC_ImmediateSC", "PersistentVolume had no name"),
        ("PVC_4", "persistentvolume \"Vol_not_exist\" not found"),
        ("PVC_none", "persistentvolumeclaim \"PVC_none\" not found"),
    ];
    for (claim, msg) in cases {
        let st = run(Some(claim), &[(ZONE, "us-west1-a")]);
        assert_eq!((st.code, st.message().as_str()), (Code::UnschedulableAndUnresolvable, msg), "{claim}");
    }
}

#[test]
fn empty_zone_elements_are_ignored() {
    assert_eq!(zones("a__b").map(|z| z.len()), Some(2));
    assert!(zones("a__").is_none());
    assert!(zones("").is_none());
}

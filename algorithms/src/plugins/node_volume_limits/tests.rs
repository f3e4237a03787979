//! Cases of kube-scheduler's csi_test.go (TestCSILimits), without VolumeAttachments.

use std::sync::Arc;

use k8s_openapi::api::core::v1 as core;

use super::*;
use crate::builders::{NodeBuilder, PodBuilder, filter_all, snapshot};
use crate::status::Code;
use crate::volumes::builders::{bound_claim, claim, class, csi, csi_node, volume};
use crate::volumes::{Volume, VolumeClaim};

const EBS: &str = "ebs.csi.aws.com";
const GCE: &str = "pd.csi.storage.gke.io";
const AWS: &str = "kubernetes.io/aws-ebs";
const NODE: &str = "node-for-max-pd-test-1";

/// Limits come from a CSINode (`Some(max)`), a CSINode without limits (`Some(None)`), or none.
type Limits = Option<Option<i64>>;

fn in_tree_ebs(name: &str) -> Volume {
    let mut v = volume(name, "", 1);
    v.handle = Some(VolumeHandle { driver: AWS.into(), handle: name.into() });
    v
}

fn world(drivers: &[&str], limits: Limits, extra_claims: Vec<VolumeClaim>) -> VolumeState {
    let mut s = VolumeState::default();
    for d in drivers {
        for j in 0..4 {
            let name = format!("csi-{d}-{j}");
            let v = match *d {
                AWS => in_tree_ebs(&name),
                "kubernetes.io/hostpath" => volume(&name, "", 1),
                _ => csi(volume(&name, "", 1), d),
            };
            s.upsert_volume(v);
            s.upsert_claim(bound_claim(&name, "", &name));
        }
    }
    s.upsert_claim(claim("csi-4", "csi-sc"));
    s.upsert_claim(claim("csi-5", ""));
    s.upsert_claim(VolumeClaim { volume_name: "missing-in-action".into(), ..claim("csi-6", "csi-sc") });
    s.upsert_class(class("csi-sc", drivers[0], false));
    for c in extra_claims {
        s.upsert_claim(c);
    }
    if let Some(max) = limits {
        let pairs: Vec<(&str, Option<i64>)> = drivers.iter().map(|d| (*d, max)).collect();
        s.upsert_csi_node(csi_node(NODE, &pairs, &[AWS]));
    }
    s
}

fn claims_pod(name: &str, claims: &[String]) -> core::Pod {
    claims.iter().enumerate().fold(PodBuilder::new(name), |p, (i, c)| p.claim(&format!("v{i}"), c)).build()
}

fn inline_ebs(name: &str, id: &str) -> core::Pod {
    PodBuilder::new(name)
        .volume(core::Volume {
            name: "inline".into(),
            aws_elastic_block_store: Some(core::AWSElasticBlockStoreVolumeSource {
                volume_id: id.into(),
                ..Default::default()
            }),
            ..Default::default()
        })
        .build()
}

fn run(new: core::Pod, existing: Vec<core::Pod>, st: VolumeState) -> Status {
    let node = NodeBuilder::new(NODE).build();
    let placed: Vec<core::Pod> = existing
        .into_iter()
        .map(|mut p| {
            p.spec.get_or_insert_with(Default::default).node_name = Some(NODE.into());
            p
        })
        .collect();
    let mut snap = snapshot(&[node], &placed);
    snap.objects = Arc::new(crate::objects::ClusterObjects::default().with(st));
    filter_all(&NodeVolumeLimits, &new, &snap).remove(0)
}

#[test]
fn csi_limits_table() {
    let c = |d: &str, j: usize| format!("csi-{d}-{j}");
    let pod = |name: &str, cs: Vec<String>| claims_pod(name, &cs);
    let ebs_one = || pod("ebs-one", vec![c(EBS, 0)]);
    let ebs_two = || pod("ebs-two", vec![c(EBS, 1), c(EBS, 2)]);
    let running = || pod("running", vec![c(EBS, 3)]);
    let pending = || pod("pending", vec!["csi-4".into()]);
    let unbound2 = || pod("unbound2", vec!["csi-4".into()]);
    let missing_pv = || pod("missing-pv", vec!["csi-6".into()]);
    let no_sc = || pod("no-sc", vec!["csi-5".into()]);
    let gce_two = || pod("gce-two", vec![c(GCE, 1), c(GCE, 2)]);
    let in_tree_one = || pod("in-tree-one", vec![c(AWS, 0)]);
    let in_tree_two = || pod("in-tree-two", vec![c(AWS, 1), c(AWS, 2)]);
    let hostpath_one = || pod("hostpath-one", vec![c("kubernetes.io/hostpath", 0)]);
    let fail = false;
    let fit = true;
    let cases: Vec<(&str, core::Pod, Vec<core::Pod>, Vec<&str>, Limits, bool)> = vec![
        (
            "fits when the limit covers the volumes",
            ebs_one(),
            vec![running(), ebs_two()],
            vec![EBS],
            Some(Some(4)),
            fit,
        ),
        ("doesn't fit over the limit", ebs_one(), vec![running(), ebs_two()], vec![EBS], Some(Some(2)), fail),
        ("fits when the driver reports no limit", ebs_one(), vec![running(), ebs_two()], vec![EBS], Some(None), fit),
        ("counts pending claims", ebs_one(), vec![pending(), ebs_two()], vec![EBS], Some(Some(2)), fail),
        (
            "counts a shared pending claim once",
            ebs_one(),
            vec![pending(), unbound2(), ebs_two()],
            vec![EBS],
            Some(Some(4)),
            fit,
        ),
        (
            "counts a claim bound to a missing volume by its class",
            ebs_one(),
            vec![missing_pv(), ebs_two()],
            vec![EBS],
            Some(Some(2)),
            fail,
        ),
        ("does not count claims without a class", ebs_one(), vec![running(), no_sc()], vec![EBS], Some(Some(2)), fit),
        (
            "counts volumes of the same driver",
            ebs_one(),
            vec![gce_two(), ebs_two()],
            vec![EBS, GCE],
            Some(Some(2)),
            fail,
        ),
        ("does not count other drivers", gce_two(), vec![ebs_two(), running()], vec![EBS, GCE], Some(Some(2)), fit),
        ("counts migrated in-tree volumes", in_tree_one(), vec![in_tree_two()], vec![AWS, EBS], Some(Some(2)), fail),
        ("no CSINode: no limit", inline_ebs("inline", "aws-inline1"), vec![in_tree_two()], vec![AWS, EBS], None, fit),
        ("counts unbound in-tree claims", pending(), vec![in_tree_two()], vec![AWS, EBS], Some(Some(2)), fail),
        (
            "no limit reported for the in-tree driver",
            in_tree_one(),
            vec![in_tree_two()],
            vec![AWS, EBS],
            Some(None),
            fit,
        ),
        (
            "non-migratable in-tree volumes do not count",
            hostpath_one(),
            vec![ebs_two()],
            vec!["kubernetes.io/hostpath", EBS],
            Some(Some(2)),
            fit,
        ),
        (
            "counts inline in-tree volumes",
            inline_ebs("inline", "aws-inline1"),
            vec![in_tree_two()],
            vec![AWS, EBS],
            Some(Some(2)),
            fail,
        ),
        (
            "counts in-tree and CSI volumes together",
            in_tree_one(),
            vec![ebs_two()],
            vec![AWS, EBS],
            Some(Some(2)),
            fail,
        ),
        (
            "counts in-tree, inline and CSI volumes",
            inline_ebs("inline", "aws-inline1"),
            vec![ebs_two(), in_tree_one()],
            vec![AWS, EBS],
            Some(Some(3)),
            fail,
        ),
        (
            "an inline volume with an attached handle costs nothing",
            inline_ebs("inline", &c(EBS, 1)),
            vec![ebs_two(), in_tree_one()],
            vec![AWS, EBS],
            Some(Some(3)),
            fit,
        ),
        (
            "counts in-tree volumes when scheduling CSI ones",
            ebs_one(),
            vec![in_tree_two()],
            vec![AWS, EBS],
            Some(Some(2)),
            fail,
        ),
    ];
    for (name, new, existing, drivers, limits, want_fit) in cases {
        let st = run(new, existing, world(&drivers, limits, Vec::new()));
        if want_fit {
            assert!(st.is_success(), "{name}: {st:?}");
        } else {
            assert_eq!((st.code, st.message()), (Code::Unschedulable, ERR_REASON.to_string()), "{name}");
        }
    }
}

#[test]
fn ephemeral_volumes() {
    let eph = |name: &str, vols: &[&str]| {
        let mut p = vols.iter().fold(PodBuilder::new(name).namespace("test"), |p, v| p.ephemeral(v)).build();
        p.metadata.uid = Some("12345".into());
        p
    };
    let owned =
        |n: &str| VolumeClaim { namespace: "test".into(), controller_uid: Some("12345".into()), ..claim(n, "csi-sc") };
    let running = claims_pod("running", &[format!("csi-{EBS}-3")]);
    let ebs_two = claims_pod("ebs-two", &[format!("csi-{EBS}-1"), format!("csi-{EBS}-2")]);
    let st = run(eph("abc", &["xyz"]), vec![], world(&[EBS], Some(None), vec![]));
    assert_eq!(st.code, Code::UnschedulableAndUnresolvable);
    assert_eq!(st.message(), "looking up PVC test/abc-xyz: persistentvolumeclaim \"abc-xyz\" not found");
    let not_owned = VolumeClaim { controller_uid: None, ..owned("abc-xyz") };
    let st = run(eph("abc", &["xyz"]), vec![], world(&[EBS], Some(None), vec![not_owned]));
    assert_eq!(
        (st.code, st.message()),
        (Code::Error, "PVC test/abc-xyz was not created for pod test/abc (pod is not owner)".into())
    );
    assert!(run(eph("abc", &["xyz"]), vec![], world(&[EBS], Some(None), vec![owned("abc-xyz")])).is_success());
    let st = run(
        eph("abc", &["xyz"]),
        vec![running.clone(), ebs_two.clone()],
        world(&[EBS], Some(Some(2)), vec![owned("abc-xyz")]),
    );
    assert_eq!(st.message(), ERR_REASON);
    let ebs_one = claims_pod("ebs-one", &[format!("csi-{EBS}-0")]);
    let existing = vec![running.clone(), eph("abc", &["x", "y"])];
    let st = run(ebs_one.clone(), existing, world(&[EBS], Some(Some(2)), vec![owned("abc-x"), owned("abc-y")]));
    assert_eq!(st.message(), ERR_REASON);
    for (max, fits) in [(3, false), (5, true)] {
        let existing = vec![running.clone(), eph("abc", &["xyz"]), ebs_two.clone()];
        let st = run(ebs_one.clone(), existing, world(&[EBS], Some(Some(max)), vec![owned("abc-xyz")]));
        assert_eq!(st.is_success(), fits, "limit {max}");
    }
}

#[test]
fn pods_without_attachable_volumes_skip() {
    let p = PodBuilder::new("p")
        .volume(core::Volume { name: "cm".into(), config_map: Some(Default::default()), ..Default::default() })
        .info();
    let snap = snapshot(&[], &[]);
    assert!(NodeVolumeLimits.pre_filter(&p, &snap).status.is_skip());
    let with_claim = PodBuilder::new("p").claim("v", "c").info();
    assert!(NodeVolumeLimits.pre_filter(&with_claim, &snap).status.is_success());
}

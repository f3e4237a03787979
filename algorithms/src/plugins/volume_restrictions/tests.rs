//! Cases of kube-scheduler's volume_restrictions_test.go: in-tree disk conflicts and
//! ReadWriteOncePod claims.

use std::sync::Arc;

use k8s_openapi::api::core::v1 as core;

use super::*;
use crate::builders::{NodeBuilder, PodBuilder, filter_all, snapshot};
use crate::status::Code;
use crate::volumes::builders::claim;
use crate::volumes::{VolumeClaim, VolumeState};

fn gce(name: &str, read_only: bool) -> core::Volume {
    core::Volume {
        name: "d".into(),
        gce_persistent_disk: Some(core::GCEPersistentDiskVolumeSource {
            pd_name: name.into(),
            read_only: Some(read_only),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn ebs(id: &str) -> core::Volume {
    core::Volume {
        name: "d".into(),
        aws_elastic_block_store: Some(core::AWSElasticBlockStoreVolumeSource {
            volume_id: id.into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn rbd(monitors: &[&str], read_only: bool) -> core::Volume {
    core::Volume {
        name: "d".into(),
        rbd: Some(core::RBDVolumeSource {
            monitors: monitors.iter().map(|m| m.to_string()).collect(),
            pool: Some("foo".into()),
            image: "bar".into(),
            read_only: Some(read_only),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn iscsi(iqn: &str, read_only: bool) -> core::Volume {
    core::Volume {
        name: "d".into(),
        iscsi: Some(core::ISCSIVolumeSource {
            iqn: iqn.into(),
            lun: 0,
            target_portal: "127.0.0.1:3260".into(),
            read_only: Some(read_only),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn run(pod: core::Pod, existing: Vec<core::Pod>, claims: Vec<VolumeClaim>) -> (Code, Status) {
    let node = NodeBuilder::new("node-1").build();
    let placed: Vec<core::Pod> = existing
        .into_iter()
        .map(|mut p| {
            p.spec.get_or_insert_with(Default::default).node_name = Some("node-1".into());
            p
        })
        .collect();
    let mut snap = snapshot(&[node], &placed);
    let mut st = VolumeState::default();
    for c in claims {
        st.upsert_claim(c);
    }
    snap.objects = Arc::new(crate::objects::ClusterObjects::default().with(st));
    let info = crate::PodInfo::from_pod(&pod).unwrap_or_default();
    let pre = VolumeRestrictions.pre_filter(&info, &snap).status.code;
    (pre, filter_all(&VolumeRestrictions, &pod, &snap).remove(0))
}

#[test]
fn disk_conflicts() {
    let with = |v: core::Volume, name: &str| PodBuilder::new(name).volume(v).build();
    let families: [(&str, core::Volume, core::Volume, core::Volume); 4] = [
        ("gce", gce("foo", false), gce("bar", false), gce("foo", true)),
        ("ebs", ebs("foo"), ebs("bar"), ebs("foo")),
        ("rbd", rbd(&["a", "b"], false), rbd(&["c", "d"], false), rbd(&["b", "z"], true)),
        (
            "iscsi",
            iscsi("iqn.2016-12.server:storage.target01", false),
            iscsi("iqn.2017-12.server:storage.target01", false),
            iscsi("iqn.2016-12.server:storage.target01", true),
        ),
    ];
    for (family, a, b, a_read_only) in families {
        let (pre, _) = run(PodBuilder::new("p").build(), vec![], vec![]);
        assert_eq!(pre, Code::Skip, "{family}: nothing");
        let (pre, _) = run(PodBuilder::new("p").build(), vec![with(a.clone(), "x")], vec![]);
        assert_eq!(pre, Code::Skip, "{family}: one state");
        let (pre, st) = run(with(a.clone(), "p"), vec![with(a.clone(), "x")], vec![]);
        assert_eq!(
            (pre, st.code, st.message()),
            (Code::Success, Code::Unschedulable, ERR_DISK_CONFLICT.to_string()),
            "{family}: same"
        );
        let (_, st) = run(with(b, "p"), vec![with(a.clone(), "x")], vec![]);
        assert!(st.is_success(), "{family}: different");
        // Read-only on one side: GCE, RBD and iSCSI still conflict; on both sides they do not (EBS always does).
        let (_, st) = run(with(a_read_only.clone(), "p"), vec![with(a.clone(), "x")], vec![]);
        assert!(st.is_rejected(), "{family}: one read-only");
        let (_, st) = run(with(a_read_only.clone(), "p"), vec![with(a_read_only, "x")], vec![]);
        assert_eq!(st.is_rejected(), family == "ebs", "{family}: both read-only");
    }
}

#[test]
fn read_write_once_pod_claims() {
    let rwop = |n: &str| VolumeClaim { access_modes: vec!["ReadWriteOncePod".into()], ..claim(n, "") };
    let rwx = VolumeClaim { access_modes: vec!["ReadWriteMany".into()], ..claim("claim-with-rwx", "") };
    let one = |name: &str| PodBuilder::new(name).claim("v", "claim-with-rwop-1").build();
    let two =
        |name: &str| PodBuilder::new(name).claim("v", "claim-with-rwop-1").claim("w", "claim-with-rwop-2").build();
    let rwx_pod = PodBuilder::new("rwx").claim("v", "claim-with-rwx").build();
    let all = || vec![rwop("claim-with-rwop-1"), rwop("claim-with-rwop-2"), rwx.clone()];

    let (pre, st) = run(one("p"), vec![], vec![]);
    assert_eq!(
        (pre, st.message()),
        (Code::UnschedulableAndUnresolvable, "persistentvolumeclaim \"claim-with-rwop-1\" not found".into())
    );
    let (pre, _) = run(one("p"), vec![rwx_pod.clone()], all());
    assert_eq!(pre, Code::Skip, "no conflict");
    let (pre, st) = run(one("p"), vec![one("user"), rwx_pod.clone()], all());
    assert_eq!((pre, st.code, st.message()), (Code::Success, Code::Unschedulable, ERR_RWOP_CONFLICT.to_string()));
    let (_, st) = run(two("p"), vec![two("user"), rwx_pod], all());
    assert_eq!(st.message(), ERR_RWOP_CONFLICT);
    // A claim used in another namespace under the same name is another claim.
    let elsewhere = PodBuilder::new("user").namespace("other").claim("v", "claim-with-rwop-1").build();
    let (pre, _) = run(one("p"), vec![elsewhere], all());
    assert_eq!(pre, Code::Skip);
}

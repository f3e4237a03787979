//! VolumeBinding's writes in memory (`simulate`): the PV controller binds a claim to the
//! volume whose claimRef names it, and the external provisioner gives a claim whose node
//! was selected a volume that node can reach.

use std::collections::BTreeMap;
use std::sync::Mutex;

use crate::framework::ApiWrite;
use crate::labels::{LabelSelector, Labels, NodeSelector, NodeSelectorTerm, Operator, Requirement};
use crate::objects::{ClusterObjects, ObjectAction, ObjectEvent};
use crate::owners::{Controller, Reported, World};
use crate::volumes::kinds::{CLAIM, VOLUME};
use crate::volumes::{ClaimRef, Volume, VolumeClaim, VolumeHandle, VolumeObjects, VolumeState, VolumeWrite};

/// The node labels a provisioned volume's affinity names when its class has no
/// `allowedTopologies`, most specific last: the first the node carries is used.
const TOPOLOGY_KEYS: [&str; 2] = ["topology.kubernetes.io/zone", "kubernetes.io/hostname"];

/// The in-memory PV controller and provisioner; it remembers the claims it bound.
#[derive(Debug, Default)]
pub(super) struct VolumeController {
    /// Claims bound since the last report (`namespace/name` to the volume's name).
    bound: Mutex<BTreeMap<String, String>>,
}

impl Controller for VolumeController {
    fn apply(&self, write: &ApiWrite, world: &mut World<'_>) -> Option<Result<u64, String>> {
        let write = write.get::<VolumeWrite>()?;
        let version = world.next_version().to_string();
        let (claim, volume) = match write {
            VolumeWrite::BindVolume { volume, claim } => {
                let mut c = (**claim).clone();
                let mut v = Volume { resource_version: version.clone(), ..(**volume).clone() };
                if c.uid.is_empty() {
                    // The API server gives every object a UID; a dump may leave it out.
                    c.uid = format!("uid-{}-{}", c.namespace, c.name);
                    v.claim_ref = v.claim_ref.take().map(|r| ClaimRef { uid: c.uid.clone(), ..r });
                }
                (c, v)
            }
            VolumeWrite::SelectNode { claim, node } => {
                let Some(node_info) = (world.node)(node) else {
                    return Some(Err(format!("selecting node {node} for claim {}: node not found", claim.key())));
                };
                let c = VolumeClaim { resource_version: version.clone(), ..(**claim).clone() };
                let v = provisioned(world.objects.volumes(), &c, &node_info.labels);
                (c, v)
            }
        };
        let key = claim.key();
        let name = volume.name.clone();
        let bound_version = world.next_version().to_string();
        bind(world.objects.volumes_mut(), &claim, volume, &bound_version);
        self.bound.lock().unwrap_or_else(|e| e.into_inner()).insert(key.clone(), name.clone());
        world.events.push(ObjectEvent::new(VOLUME, ObjectAction::Update, name));
        world.events.push(ObjectEvent::new(CLAIM, ObjectAction::Update, key));
        Some(Ok(version.parse().unwrap_or(0)))
    }

    fn report(&self, _objects: &ClusterObjects, _: &crate::resource::Resource) -> Reported {
        let bound = std::mem::take(&mut *self.bound.lock().unwrap_or_else(|e| e.into_inner()));
        if bound.is_empty() {
            return Reported::default();
        }
        Reported {
            charts: Vec::new(),
            lines: vec![format!("Claims bound: {} (before their pods were bound).", bound.len())],
            fields: vec![("claims", serde_json::to_value(bound).unwrap_or_default())],
        }
    }
}

/// Stores the volume and its claim as bound to each other, as the PV controller does.
fn bind(st: &mut VolumeState, claim: &VolumeClaim, mut volume: Volume, version: &str) {
    volume.phase = "Bound".into();
    volume.resource_version = version.to_string();
    let mut c = claim.clone();
    c.volume_name = volume.name.clone();
    c.bind_completed = true;
    c.phase = "Bound".into();
    c.resource_version = version.to_string();
    st.upsert_volume(volume);
    st.upsert_claim(c);
}

/// The volume a provisioner creates for a claim on a node with `labels`: the claim's
/// size and modes, reachable from the node's zone (or the keys `allowedTopologies` names).
fn provisioned(st: &VolumeState, claim: &VolumeClaim, labels: &Labels) -> Volume {
    let class = st.class(&claim.class).cloned();
    let keys: Vec<String> = match class.as_ref().map(|c| &c.allowed_topologies) {
        Some(terms) if !terms.is_empty() => terms[0].iter().map(|(k, _)| k.clone()).collect(),
        _ => TOPOLOGY_KEYS.iter().find(|k| labels.contains_key(**k)).map(|k| vec![k.to_string()]).unwrap_or_default(),
    };
    let expressions: Vec<Requirement> = keys
        .iter()
        .filter_map(|k| {
            let v = labels.get(k)?;
            let mut sel = LabelSelector::default();
            sel.push(k, Operator::In, v);
            sel.requirements.pop()
        })
        .collect();
    let name = if claim.uid.is_empty() {
        format!("pvc-{}-{}", claim.namespace, claim.name)
    } else {
        format!("pvc-{}", claim.uid)
    };
    Volume {
        name: name.clone(),
        class: claim.class.clone(),
        capacity: claim.request,
        access_modes: claim.access_modes.clone(),
        block: claim.block,
        node_affinity: (!expressions.is_empty()).then(|| NodeSelector {
            terms: vec![NodeSelectorTerm { expressions, fields: Vec::new() }],
            errors: Vec::new(),
        }),
        claim_ref: Some(ClaimRef {
            namespace: claim.namespace.clone(),
            name: claim.name.clone(),
            uid: claim.uid.clone(),
        }),
        phase: "Bound".into(),
        handle: class.map(|c| VolumeHandle { driver: c.provisioner.clone(), handle: name }),
        ..Default::default()
    }
}

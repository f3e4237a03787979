//! VolumeBinding's Reserve and Unreserve on the cache, and the in-memory PreBind of
//! `simulate`, which plays the PV controller and the external provisioner.

use algorithms::PodInfo;
use algorithms::labels::{NodeSelector, NodeSelectorTerm, Operator, Requirement};
use algorithms::plugins::volume_binding::{self, NodeBindings, assume, find_pod_volumes, revert};
use algorithms::volumes::{ClaimRef, Volume, VolumeHandle, VolumeState};

use super::Cache;

/// The node labels a provisioned volume's affinity names when its class has no
/// `allowedTopologies`, most specific last: the first the node carries is used.
const TOPOLOGY_KEYS: [&str; 2] = ["topology.kubernetes.io/zone", "kubernetes.io/hostname"];

impl Cache {
    /// Reserve: finds the pod's volume bindings on `node` again (the store may have
    /// changed since the cycle's Filter) and assumes them. `Err` says why they cannot be.
    pub fn reserve_volumes(&mut self, pod: &PodInfo, node: &str) -> Result<(), String> {
        // A reservation left by an earlier pod of the same name goes first.
        self.unreserve_volumes(&pod.key());
        if pod.volumes.claims.is_empty() {
            return Ok(());
        }
        let Some(info) = self.index.get(node).and_then(|i| self.nodes.get(*i)).cloned() else {
            return Err(format!("node \"{node}\" is not in the cache"));
        };
        let store = self.volumes.clone();
        let mut st = store.write();
        let Some(state) = volume_binding::pre_filter(pod, &st).map_err(|s| s.message())? else {
            return Ok(());
        };
        let (bindings, verdict) = find_pod_volumes(&state, &info)?;
        let reasons = verdict.reasons();
        if !reasons.is_empty() {
            return Err(reasons.join(", "));
        }
        if !bindings.is_empty() {
            let assumed = assume(&mut st, node, &bindings);
            self.reservations.insert(pod.key(), assumed);
        }
        Ok(())
    }

    /// The volume bindings assumed for a pod, for PreBind.
    pub fn reserved_volumes(&self, key: &str) -> Option<&NodeBindings> {
        self.reservations.get(key)
    }

    /// Unreserve: drops the pod's assumed bindings.
    pub fn unreserve_volumes(&mut self, key: &str) {
        if let Some(b) = self.reservations.remove(key) {
            revert(&mut self.volumes.write(), &b);
        }
    }

    /// The in-memory PreBind: the pod's reserved bindings become the cluster's state,
    /// as the PV controller and a provisioner would make them. Returns how many claims
    /// were bound: each claim's key with its volume's name.
    pub fn commit_volumes(&mut self, key: &str, node: &str) -> Vec<(String, String)> {
        let Some(b) = self.reservations.remove(key) else { return Vec::new() };
        let labels = self.index.get(node).and_then(|i| self.nodes.get(*i)).map(|n| n.labels.clone());
        let mut st = self.volumes.write();
        let mut out = Vec::new();
        for (claim, volume) in &b.static_bindings {
            out.push((claim.key(), volume.name.clone()));
            bind(&mut st, claim, Volume { phase: "Bound".into(), ..(**volume).clone() });
        }
        for claim in &b.provisions {
            let v = provisioned(&st, claim, labels.as_ref());
            out.push((claim.key(), v.name.clone()));
            bind(&mut st, claim, v);
        }
        out
    }
}

/// Stores the volume and its claim as bound to each other.
fn bind(st: &mut VolumeState, claim: &algorithms::volumes::Claim, mut volume: Volume) {
    let version = format!("sim-{}", st.generation() + 1);
    volume.resource_version = version.clone();
    let mut c = claim.clone();
    c.volume_name = volume.name.clone();
    c.bind_completed = true;
    c.phase = "Bound".into();
    c.resource_version = version;
    st.upsert_volume(volume);
    st.upsert_claim(c);
}

/// The volume a provisioner creates for a claim on a node with `labels`: the claim's
/// size and modes, reachable from the node's zone (or the keys `allowedTopologies` names).
fn provisioned(
    st: &VolumeState,
    claim: &algorithms::volumes::Claim,
    labels: Option<&algorithms::labels::Labels>,
) -> Volume {
    let class = st.class(&claim.class).cloned();
    let keys: Vec<String> = match class.as_ref().map(|c| &c.allowed_topologies) {
        Some(terms) if !terms.is_empty() => terms[0].iter().map(|(k, _)| k.clone()).collect(),
        _ => TOPOLOGY_KEYS
            .iter()
            .find(|k| labels.is_some_and(|l| l.contains_key(**k)))
            .map(|k| vec![k.to_string()])
            .unwrap_or_default(),
    };
    let expressions: Vec<Requirement> = keys
        .iter()
        .filter_map(|k| {
            let v = labels?.get(k)?;
            let mut sel = algorithms::labels::LabelSelector::default();
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

#[cfg(test)]
mod tests {
    use algorithms::testing::{NodeBuilder, PodBuilder};
    use algorithms::volumes::testing::{GI, class, sized_claim, volume};
    use algorithms::{NodeInfo, PodInfo};

    use super::*;

    const ZONE: &str = "topology.kubernetes.io/zone";

    fn cache() -> Cache {
        let mut c = Cache::new();
        for (n, z) in [("a", "z1"), ("b", "z2")] {
            c.upsert_node(NodeInfo::from_node(&NodeBuilder::new(n).label(ZONE, z).build()).unwrap_or_default());
        }
        let mut st = c.volumes.write();
        st.upsert_class(class("wffc", "csi.example.com", true));
        st.upsert_class(class("local", "kubernetes.io/no-provisioner", true));
        st.upsert_claim(sized_claim("dyn", "wffc", GI));
        st.upsert_claim(sized_claim("static", "local", GI));
        st.upsert_volume(volume("pv-static", "local", 2 * GI));
        drop(st);
        c
    }

    fn pod() -> PodInfo {
        PodBuilder::new("p").claim("d", "dyn").claim("s", "static").info()
    }

    #[test]
    fn reserved_bindings_are_committed_in_the_nodes_zone() {
        let mut c = cache();
        let p = pod();
        c.assume(&p, "b").unwrap();
        c.reserve_volumes(&p, "b").unwrap();
        let reserved = c.reserved_volumes("default/p").cloned().unwrap();
        assert_eq!(reserved.provisions[0].selected_node.as_deref(), Some("b"));
        assert_eq!(reserved.static_bindings[0].1.name, "pv-static");
        let bound = c.commit_volumes("default/p", "b");
        assert_eq!(bound.len(), 2);
        let st = c.volumes.read();
        let dyn_claim = st.claim("default/dyn").unwrap();
        assert!(dyn_claim.fully_bound());
        let pv = st.volume(&dyn_claim.volume_name).unwrap();
        assert!(pv.admits(&[(ZONE.to_string(), "z2".to_string())].into()));
        assert!(!pv.admits(&[(ZONE.to_string(), "z1".to_string())].into()));
        assert_eq!(pv.capacity, GI);
        assert_eq!(st.claim("default/static").unwrap().volume_name, "pv-static");
        assert_eq!(st.volume("pv-static").unwrap().phase, "Bound");
    }

    #[test]
    fn forgetting_a_pod_unreserves_its_volumes() {
        let mut c = cache();
        let p = pod();
        c.assume(&p, "a").unwrap();
        c.reserve_volumes(&p, "a").unwrap();
        assert!(c.volumes.read().volume("pv-static").unwrap().claim_ref.is_some());
        c.forget("default/p");
        assert!(c.reserved_volumes("default/p").is_none());
        let st = c.volumes.read();
        assert!(st.volume("pv-static").unwrap().claim_ref.is_none());
        assert!(st.claim("default/dyn").unwrap().selected_node.is_none());
    }

    #[test]
    fn removing_the_pod_or_its_node_unreserves() {
        let mut c = cache();
        let p = pod();
        c.assume(&p, "a").unwrap();
        c.reserve_volumes(&p, "a").unwrap();
        c.remove_node("a");
        assert!(c.reserved_volumes("default/p").is_none());
        assert!(c.volumes.read().volume("pv-static").unwrap().claim_ref.is_none());
        c.assume(&p, "b").unwrap();
        c.reserve_volumes(&p, "b").unwrap();
        c.remove_pod("default/p");
        assert!(c.reserved_volumes("default/p").is_none());
        assert!(c.volumes.read().claim("default/dyn").unwrap().selected_node.is_none());
    }

    #[test]
    fn reserve_fails_when_the_store_changed_since_filter() {
        let mut c = cache();
        c.volumes.write().remove_volume("pv-static");
        let p = pod();
        c.assume(&p, "a").unwrap();
        let err = c.reserve_volumes(&p, "a").unwrap_err();
        assert_eq!(err, "node(s) didn't find available persistent volumes to bind");
    }
}

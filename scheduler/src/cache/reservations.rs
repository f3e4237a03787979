//! Reserve and Unreserve on the cache: each Reserve plugin of the pod's profile assumes
//! in the cluster objects what the pod takes on its node; every path that forgets the
//! pod (a failed binding cycle, expiry, the pod's or the node's deletion, a gang rolled
//! back) undoes it, plugin by plugin in reverse order.

use std::sync::Arc;

use algorithms::PodInfo;
use algorithms::framework::{Limits, ReservePlugin, Reserved};

use super::Cache;

/// What the Reserve plugins assumed for one pod, in the order they ran.
#[derive(Default)]
pub(crate) struct Reservation(Vec<(Arc<dyn ReservePlugin>, Reserved)>);

impl std::fmt::Debug for Reservation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.0.iter().map(|(p, _)| p.name())).finish()
    }
}

impl Cache {
    /// Reserve: runs `plugins` for the pod assumed on `node`. When one fails, those that
    /// reserved before it are undone, and the error names it as kube-scheduler does.
    pub fn reserve(
        &mut self,
        pod: &PodInfo,
        node: &str,
        plugins: &[Arc<dyn ReservePlugin>],
        limits: Option<&Limits>,
    ) -> Result<(), String> {
        let key = pod.key();
        // A reservation left by an earlier pod of the same name goes first.
        self.unreserve(&key);
        if plugins.is_empty() {
            return Ok(());
        }
        let Some(info) = self.node(node).cloned() else {
            return Err(format!("node \"{node}\" is not in the cache"));
        };
        let mut done: Vec<(Arc<dyn ReservePlugin>, Reserved)> = Vec::new();
        for plugin in plugins {
            // A plugin that reserves nothing changes nothing, so a pod without volumes
            // does not make the next snapshot copy the objects.
            match plugin.reserve_within(&mut self.objects, pod, &info, limits) {
                Ok(Some(r)) => {
                    self.objects_changed = true;
                    done.push((plugin.clone(), r));
                }
                Ok(None) => {}
                Err(status) => {
                    self.objects_changed = true;
                    for (p, r) in done.iter().rev() {
                        p.unreserve(&mut self.objects, &key, r);
                    }
                    return Err(format!("running Reserve plugin \"{}\": {}", plugin.name(), status.message()));
                }
            }
        }
        if !done.is_empty() {
            self.reservations.insert(key, Reservation(done));
        }
        Ok(())
    }

    /// What `plugin`'s Reserve kept for the pod, for its PreBind.
    pub fn reserved(&self, key: &str, plugin: &str) -> Option<&Reserved> {
        self.reservations.get(key)?.0.iter().find(|(p, _)| p.name() == plugin).map(|(_, r)| r)
    }

    /// Whether any Reserve plugin kept something for the pod.
    pub fn has_reservation(&self, key: &str) -> bool {
        self.reservations.contains_key(key)
    }

    /// Unreserve: undoes the pod's reservations, last plugin first.
    pub fn unreserve(&mut self, key: &str) {
        let Some(Reservation(list)) = self.reservations.remove(key) else { return };
        self.objects_changed = true;
        for (plugin, r) in list.iter().rev() {
            plugin.unreserve(&mut self.objects, key, r);
        }
    }
}

#[cfg(test)]
mod tests {
    use algorithms::builders::{NodeBuilder, PodBuilder};
    use algorithms::volumes::builders::{GI, class, sized_claim, volume};
    use algorithms::volumes::{VolumeObjects, VolumeWrite};
    use algorithms::{NodeInfo, PodInfo, Status};

    use super::*;

    const ZONE: &str = "topology.kubernetes.io/zone";

    fn cache() -> Cache {
        let mut c = Cache::new();
        for (n, z) in [("a", "z1"), ("b", "z2")] {
            c.upsert_node(NodeInfo::from_node(&NodeBuilder::new(n).label(ZONE, z).build()).unwrap_or_default());
        }
        let st = c.objects_mut().volumes_mut();
        st.upsert_class(class("wffc", "csi.example.com", true));
        st.upsert_class(class("local", "kubernetes.io/no-provisioner", true));
        st.upsert_claim(sized_claim("dyn", "wffc", GI));
        st.upsert_claim(sized_claim("static", "local", GI));
        st.upsert_volume(volume("pv-static", "local", 2 * GI));
        c
    }

    fn plugins() -> Vec<Arc<dyn ReservePlugin>> {
        algorithms::config::default_profile("custom-scheduler").reserves
    }

    fn pod() -> PodInfo {
        PodBuilder::new("p").claim("d", "dyn").claim("s", "static").info()
    }

    #[test]
    fn reserve_assumes_the_volume_bindings_for_prebind() {
        let mut c = cache();
        let p = pod();
        c.assume(&p, "b").unwrap();
        c.reserve(&p, "b", &plugins(), None).unwrap();
        let reserved = c.reserved("default/p", "VolumeBinding").unwrap();
        // What PreBind writes from the reservation: the static volume's claimRef, then
        // the provisioned claim's node.
        let profile = algorithms::config::default_profile("custom-scheduler");
        let pre_bind = profile.pre_binds.iter().find(|p| p.name() == "VolumeBinding").unwrap();
        let writes = pre_bind.pre_bind(reserved, "b");
        let writes: Vec<&VolumeWrite> = writes.iter().filter_map(|w| w.get::<VolumeWrite>()).collect();
        let [VolumeWrite::BindVolume { volume, .. }, VolumeWrite::SelectNode { claim, node }] = writes.as_slice()
        else {
            panic!("{writes:?}")
        };
        assert_eq!((claim.selected_node.as_deref(), node.as_str()), (Some("b"), "b"));
        assert_eq!(volume.name, "pv-static");
        let st = c.objects().volumes();
        assert!(st.volume("pv-static").unwrap().claim_ref.is_some());
        assert_eq!(st.claim("default/dyn").unwrap().selected_node.as_deref(), Some("b"));
    }

    #[test]
    fn forgetting_a_pod_unreserves_its_volumes() {
        let mut c = cache();
        let p = pod();
        c.assume(&p, "a").unwrap();
        c.reserve(&p, "a", &plugins(), None).unwrap();
        c.forget("default/p");
        assert!(c.reserved("default/p", "VolumeBinding").is_none());
        let st = c.objects().volumes();
        assert!(st.volume("pv-static").unwrap().claim_ref.is_none());
        assert!(st.claim("default/dyn").unwrap().selected_node.is_none());
    }

    #[test]
    fn removing_the_pod_or_its_node_unreserves() {
        let mut c = cache();
        let p = pod();
        c.assume(&p, "a").unwrap();
        c.reserve(&p, "a", &plugins(), None).unwrap();
        c.remove_node("a");
        assert!(c.reserved("default/p", "VolumeBinding").is_none());
        assert!(c.objects().volumes().volume("pv-static").unwrap().claim_ref.is_none());
        c.assume(&p, "b").unwrap();
        c.reserve(&p, "b", &plugins(), None).unwrap();
        c.remove_pod("default/p");
        assert!(!c.has_reservation("default/p"));
        assert!(c.objects().volumes().claim("default/dyn").unwrap().selected_node.is_none());
    }

    #[test]
    fn reserve_fails_when_the_store_changed_since_filter() {
        let mut c = cache();
        c.objects_mut().volumes_mut().remove_volume("pv-static");
        let p = pod();
        c.assume(&p, "a").unwrap();
        let err = c.reserve(&p, "a", &plugins(), None).unwrap_err();
        assert_eq!(
            err,
            "running Reserve plugin \"VolumeBinding\": node(s) didn't find available persistent volumes to bind"
        );
    }

    /// Records the order of Reserve and Unreserve calls; fails when told to.
    struct Recorder {
        name: &'static str,
        fail: bool,
        log: Arc<std::sync::Mutex<Vec<String>>>,
    }

    impl ReservePlugin for Recorder {
        fn name(&self) -> &'static str {
            self.name
        }
        fn reserve(
            &self,
            _: &mut algorithms::objects::ClusterObjects,
            _: &PodInfo,
            _: &NodeInfo,
        ) -> Result<Option<Reserved>, Status> {
            self.log.lock().unwrap().push(format!("reserve {}", self.name));
            if self.fail { Err(Status::error("no room")) } else { Ok(Some(Arc::new(()))) }
        }
        fn unreserve(&self, _: &mut algorithms::objects::ClusterObjects, _: &str, _: &Reserved) {
            self.log.lock().unwrap().push(format!("unreserve {}", self.name));
        }
    }

    #[test]
    fn a_failing_reserve_undoes_the_plugins_before_it_in_reverse_order() {
        let log = Arc::new(std::sync::Mutex::new(Vec::new()));
        let rec = |name, fail| Arc::new(Recorder { name, fail, log: log.clone() }) as Arc<dyn ReservePlugin>;
        let mut c = cache();
        let p = PodBuilder::new("q").info();
        c.assume(&p, "a").unwrap();
        let err =
            c.reserve(&p, "a", &[rec("First", false), rec("Second", false), rec("Third", true)], None).unwrap_err();
        assert_eq!(err, "running Reserve plugin \"Third\": no room");
        assert_eq!(
            *log.lock().unwrap(),
            ["reserve First", "reserve Second", "reserve Third", "unreserve Second", "unreserve First"]
        );
        log.lock().unwrap().clear();
        c.reserve(&p, "a", &[rec("First", false), rec("Second", false)], None).unwrap();
        c.forget("default/q");
        assert_eq!(*log.lock().unwrap(), ["reserve First", "reserve Second", "unreserve Second", "unreserve First"]);
    }
}

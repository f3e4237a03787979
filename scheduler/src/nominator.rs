//! Pods nominated to a node by preemption (kube-scheduler's nominator): later cycles
//! leave room for them on that node ([`algorithms::Snapshot::nominated`]).

use std::collections::HashMap;
use std::sync::Arc;

use algorithms::{PodInfo, Snapshot};

/// Nominations by pod key.
#[derive(Debug, Default)]
pub struct Nominator {
    by_pod: HashMap<String, (String, Arc<PodInfo>)>,
    changed: bool,
}

impl Nominator {
    /// Nominates `pod` to `node`, replacing an earlier nomination.
    pub fn nominate(&mut self, pod: Arc<PodInfo>, node: &str) {
        self.by_pod.insert(pod.key(), (node.to_string(), pod));
        self.changed = true;
    }

    /// Clears a pod's nomination; returns the node it had.
    pub fn remove(&mut self, key: &str) -> Option<String> {
        let (node, _) = self.by_pod.remove(key)?;
        self.changed = true;
        Some(node)
    }

    /// The node a pod is nominated to.
    pub fn node_of(&self, key: &str) -> Option<&str> {
        self.by_pod.get(key).map(|(n, _)| n.as_str())
    }

    /// Keys of the pods nominated to `node` with a priority below `priority`.
    pub fn lower_on(&self, node: &str, priority: i32) -> Vec<String> {
        let mut keys: Vec<String> = self
            .by_pod
            .iter()
            .filter(|(_, (n, p))| n == node && p.priority < priority)
            .map(|(k, _)| k.clone())
            .collect();
        keys.sort();
        keys
    }

    /// How many pods are nominated.
    pub fn len(&self) -> usize {
        self.by_pod.len()
    }

    /// Whether no pod is nominated.
    pub fn is_empty(&self) -> bool {
        self.by_pod.is_empty()
    }

    /// Copies the nominations into the snapshot when they changed.
    pub fn update_snapshot(&mut self, snap: &mut Snapshot) {
        if !self.changed {
            return;
        }
        let mut by_node: HashMap<String, Vec<Arc<PodInfo>>> = HashMap::new();
        for (node, pod) in self.by_pod.values() {
            by_node.entry(node.clone()).or_default().push(pod.clone());
        }
        snap.nominated = Arc::new(by_node);
        self.changed = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use algorithms::builders::PodBuilder;

    fn pod(name: &str, prio: i32) -> Arc<PodInfo> {
        Arc::new(PodInfo::from_pod(&PodBuilder::new(name).priority(prio).build()).unwrap())
    }

    #[test]
    fn nominations_reach_the_snapshot_by_node() {
        let mut n = Nominator::default();
        n.nominate(pod("a", 10), "n1");
        n.nominate(pod("b", 1), "n1");
        n.nominate(pod("c", 1), "n2");
        let mut snap = Snapshot::default();
        n.update_snapshot(&mut snap);
        assert_eq!(snap.nominated["n1"].len(), 2);
        assert_eq!(n.lower_on("n1", 5), vec!["default/b".to_string()]);
        n.nominate(pod("a", 10), "n2");
        assert_eq!(n.remove("default/b").as_deref(), Some("n1"));
        n.update_snapshot(&mut snap);
        assert!(!snap.nominated.contains_key("n1"));
        assert_eq!(snap.nominated["n2"].len(), 2);
        assert_eq!(n.node_of("default/a"), Some("n2"));
    }
}

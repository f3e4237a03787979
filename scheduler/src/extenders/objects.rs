//! The pods and nodes extenders are sent, as the API server serves them: the scheduler's
//! cache keeps only what its plugins read, and an extender is owed the whole objects.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use k8s_openapi::api::core::v1::{Node, Pod};

/// Pending pods of this scheduler and every node, by key.
#[derive(Default)]
pub struct Objects {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    pods: HashMap<String, Arc<Pod>>,
    nodes: HashMap<String, Arc<Node>>,
}

impl Objects {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps a pod that waits to be scheduled; forgets one that is bound.
    pub fn put_pod(&self, key: &str, pod: &Pod) {
        let mut inner = self.lock();
        if pod.spec.as_ref().is_some_and(|s| s.node_name.is_some()) {
            inner.pods.remove(key);
        } else {
            inner.pods.insert(key.to_string(), Arc::new(pod.clone()));
        }
    }

    /// Forgets a pod.
    pub fn remove_pod(&self, key: &str) {
        self.lock().pods.remove(key);
    }

    /// A pending pod.
    pub fn pod(&self, key: &str) -> Option<Arc<Pod>> {
        self.lock().pods.get(key).cloned()
    }

    /// Keeps a node.
    pub fn put_node(&self, node: &Node) {
        let name = node.metadata.name.clone().unwrap_or_default();
        self.lock().nodes.insert(name, Arc::new(node.clone()));
    }

    /// Forgets a node.
    pub fn remove_node(&self, name: &str) {
        self.lock().nodes.remove(name);
    }

    /// The nodes of `names` that are known, in order.
    pub fn nodes<'a>(&self, names: impl Iterator<Item = &'a str>) -> Vec<Arc<Node>> {
        let inner = self.lock();
        names.filter_map(|n| inner.nodes.get(n).cloned()).collect()
    }
}

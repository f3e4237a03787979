//! A kube-scheduler HTTP extender: `POST /filter`, `/prioritize`, `/bind`, `/preempt`,
//! with the wire types of k8s.io/kube-scheduler/extender/v1 and the same plugins as the
//! standalone scheduler.

pub mod devices;
pub mod handlers;
pub mod memory;
pub mod metrics;
pub mod router;
pub mod types;

use std::sync::Arc;

use algorithms::{Profile, Snapshot};
use futures::future::BoxFuture;

pub use router::{DEFAULT_BODY_LIMIT, DEFAULT_REQUEST_TIMEOUT, Limits, operations_router, router, router_with_limits};

/// The cluster as the extender sees it when it has API access.
pub trait ClusterView: Send + Sync {
    /// The current snapshot: nodes, the pods on them (assumed ones included), namespaces.
    fn snapshot(&self) -> Arc<Snapshot>;
    /// Whether the caches have synced.
    fn ready(&self) -> bool;
    /// Creates the Binding, once the pod still passes `profile`'s filters on the node with
    /// the pods bound and assumed so far, and assumes it there. The check and the
    /// assumption are one step, so two binds racing for the last devices of a node cannot
    /// both succeed: the loser gets an error and kube-scheduler retries its pod.
    fn bind(&self, args: types::ExtenderBindingArgs, profile: Profile) -> BoxFuture<'static, Result<(), String>>;
}

/// Everything a request handler needs.
pub struct Extender {
    /// The plugins to run.
    pub profile: Profile,
    /// Cluster access, when configured.
    pub cluster: Option<Arc<dyn ClusterView>>,
    /// Extended resources kube-scheduler ignores and this extender manages.
    pub managed: Vec<String>,
    /// Request metrics.
    pub metrics: metrics::Metrics,
    /// Nodes one filter or prioritize request may carry; more get `400`.
    pub max_nodes: usize,
}

/// Default bound on the nodes of one filter or prioritize request: four times the 5,000
/// nodes Kubernetes supports in one cluster. It bounds a request's memory whatever the
/// body limit.
pub const DEFAULT_MAX_NODES: usize = 20_000;

impl Extender {
    /// An extender with these plugins, optional cluster access and managed resources.
    pub fn new(profile: Profile, cluster: Option<Arc<dyn ClusterView>>, managed: Vec<String>) -> Self {
        Extender { profile, cluster, managed, metrics: metrics::Metrics::default(), max_nodes: DEFAULT_MAX_NODES }
    }
}

//! The roles a plugin takes once a node is chosen, as kube-scheduler's framework names
//! them: Reserve (and Unreserve), Permit and PreBind.
//!
//! The scheduler runs them in order for every plugin the profile lists, never naming a
//! plugin: Reserve and Permit at the end of the scheduling cycle (under the state lock),
//! PreBind in the binding cycle, and on any failure Unreserve for every plugin that
//! reserved, in reverse order. Plugins stay pure: what Reserve assumed is returned as a
//! [`Reserved`] value the scheduler keeps with the pod and hands back to Unreserve and
//! PreBind, and PreBind describes its API writes ([`ApiWrite`]) and judges their effect
//! from the watched objects ([`PreBindPlugin::check`]) rather than calling the API.

use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::node_info::NodeInfo;
use crate::objects::ClusterObjects;
use crate::pod_info::PodInfo;
use crate::status::Status;

/// What one plugin's Reserve assumed for one pod, kept until the pod is bound or given up.
pub type Reserved = Arc<dyn Any + Send + Sync>;

/// Reserve and Unreserve: assume in the cluster objects what the pod takes on its node,
/// so the next pods see it taken, and undo that when the pod is given up.
pub trait ReservePlugin: Send + Sync {
    /// kube-scheduler's plugin name.
    fn name(&self) -> &'static str;

    /// Assumes what `pod` takes on `node`. `Ok(None)`: the pod takes nothing of this
    /// plugin's, so there is nothing to undo or write, and `objects` must be unchanged. `Err`: the pod cannot be reserved
    /// there (the objects changed since Filter, say).
    fn reserve(&self, objects: &mut ClusterObjects, pod: &PodInfo, node: &NodeInfo)
    -> Result<Option<Reserved>, Status>;

    /// [`ReservePlugin::reserve`] within the limits the pod's PreFilters gave (see
    /// [`super::Limits`]); a plugin that chooses amounts for the pod keeps to them.
    fn reserve_within(
        &self,
        objects: &mut ClusterObjects,
        pod: &PodInfo,
        node: &NodeInfo,
        _limits: Option<&super::Limits>,
    ) -> Result<Option<Reserved>, Status> {
        self.reserve(objects, pod, node)
    }

    /// Undoes what [`ReservePlugin::reserve`] assumed for the pod `key`.
    fn unreserve(&self, objects: &mut ClusterObjects, key: &str, reserved: &Reserved);
}

/// A Permit plugin's verdict.
#[derive(Debug, Clone, PartialEq)]
pub enum Permit {
    /// The pod may be bound.
    Allow,
    /// The pod may not be bound: it is given up and reported unschedulable.
    Reject(Status),
    /// Not yet: the binding cycle asks again until the plugin allows or rejects the pod,
    /// or this long has passed.
    Wait(Duration),
}

/// Permit: the last word before a reserved pod is bound.
pub trait PermitPlugin: Send + Sync {
    /// kube-scheduler's plugin name.
    fn name(&self) -> &'static str;

    /// Whether `pod`, reserved on `node`, may be bound now. Asked once at the end of the
    /// scheduling cycle and, while the answer is [`Permit::Wait`], again in the binding
    /// cycle whenever the watched objects may have changed (the first wait's duration
    /// bounds the whole wait).
    fn permit(&self, objects: &ClusterObjects, pod: &PodInfo, node: &str) -> Permit;
}

/// A write a plugin asks for through the API server (PreBind's writes, Unreserve's and
/// PostFilter's): a value of the plugin's own write type, with the resource version it
/// was made over as precondition where it has one. `run` makes it with the writer the
/// plugin's folder registers; `simulate` applies it with the plugin's in-memory
/// controller (an `owners::Controller`).
#[derive(Clone)]
pub struct ApiWrite(Arc<dyn AnyWrite>);

/// A plugin's write type, as [`ApiWrite`] holds it.
pub trait AnyWrite: Any + fmt::Debug + Send + Sync {
    /// The write as [`Any`], to find its type.
    fn as_any(&self) -> &dyn Any;
    /// Whether `other` is the same write.
    fn same(&self, other: &dyn AnyWrite) -> bool;
}

impl<T: Any + fmt::Debug + PartialEq + Send + Sync> AnyWrite for T {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn same(&self, other: &dyn AnyWrite) -> bool {
        other.as_any().downcast_ref::<T>() == Some(self)
    }
}

impl ApiWrite {
    /// A write of a plugin's own type.
    pub fn new<T: AnyWrite>(write: T) -> Self {
        ApiWrite(Arc::new(write))
    }

    /// The write, if it is of type `T`.
    pub fn get<T: Any>(&self) -> Option<&T> {
        (*self.0).as_any().downcast_ref::<T>()
    }
}

impl fmt::Debug for ApiWrite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        (*self.0).fmt(f)
    }
}

impl PartialEq for ApiWrite {
    fn eq(&self, other: &Self) -> bool {
        (*self.0).same(&*other.0)
    }
}

/// How PreBind's writes are doing, as the watched objects tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// Complete: the pod may be bound.
    Done,
    /// Not yet: ask again once the objects may have changed.
    Waiting,
    /// It cannot complete; the reason.
    Failed(String),
}

/// PreBind: what must be written, and seen done, before the pod is bound.
pub trait PreBindPlugin: Send + Sync {
    /// kube-scheduler's plugin name.
    fn name(&self) -> &'static str;

    /// The writes for a pod this plugin reserved (its [`Reserved`]) on `node`.
    fn pre_bind(&self, reserved: &Reserved, node: &str) -> Vec<ApiWrite>;

    /// Whether the writes took effect, by the watched objects; `versions` are the resource
    /// versions the writes returned, in the order [`PreBindPlugin::pre_bind`] gave them.
    fn check(&self, objects: &ClusterObjects, reserved: &Reserved, node: &NodeInfo, versions: &[u64]) -> Progress;

    /// The API server accepted every write [`PreBindPlugin::pre_bind`] gave, returning
    /// `versions` in their order: a plugin that assumed the written objects learns the
    /// versions that end its assumptions. Nothing by default.
    fn written(&self, _objects: &mut ClusterObjects, _reserved: &Reserved, _versions: &[u64]) {}

    /// How long [`PreBindPlugin::check`] may say [`Progress::Waiting`].
    fn timeout(&self) -> Duration;

    /// After a failed binding cycle: the writes that undo, through the API server, what
    /// the first `landed` of [`PreBindPlugin::pre_bind`]'s writes did and Unreserve
    /// must take back there (the pod in a claim's `reservedFor`). None by default.
    fn undo(&self, _reserved: &Reserved, _pod: &PodInfo, _landed: usize) -> Vec<ApiWrite> {
        Vec::new()
    }

    /// The failure reported when the wait times out.
    fn timeout_message(&self) -> String {
        format!("timed out after {:?}", self.timeout())
    }

    /// The event (reason, note) that says on the pod that its binding waits at this
    /// plugin for the pod's node, if the plugin has one.
    fn waiting_event(&self, _node: &str) -> Option<(&'static str, String)> {
        None
    }
}

/// A resource version as a number, for ordering the versions one object went through
/// (0 when absent or not a number).
pub fn resource_version(rv: &str) -> u64 {
    rv.parse().unwrap_or(0)
}

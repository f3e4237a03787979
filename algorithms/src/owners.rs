//! The open slot for plugins that keep cluster objects: an [`Owner`] is declared in the
//! owner's plugin folder (the volume objects, the DRA objects) and listed once in the
//! plugin registry's `OWNERS`. Through it the scheduler reads the owner's
//! objects from a cluster dump, plays the controllers behind its writes in `simulate`,
//! and shows its objects in reports, without naming it. What `run` watches and writes
//! for an owner sits in the scheduler's folder of the same owner.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::de::DeserializeOwned;
use serde_json::Value;
use thiserror::Error;

use crate::framework::ApiWrite;
use crate::node_info::NodeInfo;
use crate::objects::{ClusterObjects, ObjectEvent};
use crate::pod_info::PodInfo;

/// An object of a dump that does not read.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("field {field}: {message}")]
pub struct ObjectError {
    /// The offending field path (`(see message)` when the parse names it).
    pub field: String,
    /// What is wrong.
    pub message: String,
}

/// Reads `value` as the API type `T`, then into the owner's form with `parse`.
pub fn read<T: DeserializeOwned, O>(value: &Value, parse: fn(&T) -> Result<O, String>) -> Result<O, ObjectError> {
    let typed: T = serde_path_to_error::deserialize(value)
        .map_err(|e| ObjectError { field: e.path().to_string(), message: e.inner().to_string() })?;
    parse(&typed).map_err(|message| ObjectError { field: "(see message)".into(), message })
}

/// A node's figure in a report column of an owner's: (total, in use).
pub type Usage<'a> = Box<dyn Fn(&NodeInfo) -> (i64, i64) + 'a>;

/// A set of cluster objects plugins read, and the controllers behind their writes.
pub trait Owner: Send + Sync {
    /// A short name for logs.
    fn name(&self) -> &'static str;

    /// Stores one object of a dump whose `kind` the owner reads; `None` for other kinds.
    fn load(&self, objects: &mut ClusterObjects, kind: &str, object: &Value) -> Option<Result<(), ObjectError>>;

    /// How many objects of each kind it holds, for logs.
    fn counts(&self, objects: &ClusterObjects) -> Vec<(&'static str, usize)>;

    /// What the cluster's controllers do for a pending pod of a dump before any
    /// scheduler sees it (the resourceclaim controller makes its claims from templates).
    fn admit(&self, _objects: &mut ClusterObjects, _pod: &mut PodInfo) {}

    /// What the garbage collector deletes with a pod (the claims it owns), as events.
    fn pod_deleted(&self, _objects: &mut ClusterObjects, _pod: &PodInfo) -> Vec<ObjectEvent> {
        Vec::new()
    }

    /// A pod was placed on a node (bound, or assumed by this scheduler): an owner that
    /// keeps what placed pods take charges it. Returns whether `objects` changed.
    fn pod_placed(&self, _objects: &mut ClusterObjects, _pod: &PodInfo) -> bool {
        false
    }

    /// A placed pod left its node (deleted, finished, its assumption forgotten, or
    /// replaced by a newer version of itself): the owner takes back what
    /// [`Owner::pod_placed`] charged. Returns whether `objects` changed.
    fn pod_unplaced(&self, _objects: &mut ClusterObjects, _pod: &PodInfo) -> bool {
        false
    }

    /// The pods waiting in the scheduling queue (the one being tried included), given
    /// before each attempt when a plugin of the profile counts them
    /// ([`crate::framework::FilterPlugin::counts_waiting_pods`]). Returns whether
    /// `objects` changed.
    fn waiting(&self, _objects: &mut ClusterObjects, _pending: &mut dyn Iterator<Item = &PodInfo>) -> bool {
        false
    }

    /// Whether objects arrived that need [`Owner::recount`] (a quota created after the
    /// pods of its namespace were placed).
    fn needs_recount(&self, _objects: &ClusterObjects) -> bool {
        false
    }

    /// Counts afresh, from every placed pod, what [`Owner::needs_recount`] asked for.
    fn recount(&self, _objects: &mut ClusterObjects, _placed: &mut dyn Iterator<Item = &PodInfo>) {}

    /// The report columns (beyond the nodes' own resources) of which some of `nodes`
    /// have any, by name.
    fn usage_columns(&self, _objects: &ClusterObjects, _nodes: &[Arc<NodeInfo>]) -> Vec<String> {
        Vec::new()
    }

    /// A node's figure in the report column `column`, when it is one of this owner's.
    fn usage<'a>(&self, _objects: &'a ClusterObjects, _column: &str) -> Option<Usage<'a>> {
        None
    }

    /// The gauges `run` exposes for this owner's objects, read when metrics are scraped;
    /// `pending` are the pods waiting in the scheduling queue, `allocatable` what the
    /// cluster's nodes can hold together.
    fn gauges(
        &self,
        _objects: &ClusterObjects,
        _pending: &[&PodInfo],
        _allocatable: &crate::resource::Resource,
    ) -> Vec<Sample> {
        Vec::new()
    }

    /// A fresh in-memory controller for one simulation.
    fn controller(&self) -> Box<dyn Controller>;
}

/// One sample of a gauge an owner exposes.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The family's name (`scheduler_…`).
    pub family: &'static str,
    /// The family's help text.
    pub help: &'static str,
    /// The sample's labels.
    pub labels: Vec<(&'static str, String)>,
    /// Its value.
    pub value: f64,
}

/// The API server and the controllers behind one owner's writes, in memory (`simulate`).
pub trait Controller: Send + Sync {
    /// Applies `write` as the API server and the controllers would, returning the new
    /// resource version; `None` when the write is not this owner's.
    fn apply(&self, write: &ApiWrite, world: &mut World<'_>) -> Option<Result<u64, String>>;

    /// What this owner adds to a simulation's report at the end of a drain of the queue
    /// (what it did since the last report, and the objects as they are); `allocatable`
    /// is what the cluster's nodes can hold together.
    fn report(&self, _objects: &ClusterObjects, _allocatable: &crate::resource::Resource) -> Reported {
        Reported::default()
    }
}

/// What an in-memory controller reports of a simulation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reported {
    /// Fields of `simulate --output json`, by name.
    pub fields: Vec<(&'static str, Value)>,
    /// Lines of the readable summary.
    pub lines: Vec<String>,
    /// Charts over the run (one point per report: per drain of the queue, per step of a
    /// timeline).
    pub charts: Vec<Chart>,
}

/// A chart of figures over a simulation's run.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Chart {
    /// What it shows.
    pub title: String,
    /// Its lines.
    pub lines: Vec<ChartLine>,
}

/// One line of a [`Chart`].
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct ChartLine {
    /// What the line is.
    pub name: String,
    /// Its points: (the report's number, the value).
    pub points: Vec<(usize, f64)>,
}

/// What an in-memory controller changes: the objects, with the nodes to read, the
/// resource versions to hand out and the events its changes raise.
pub struct World<'a> {
    /// The cluster objects.
    pub objects: &'a mut ClusterObjects,
    /// A node by name.
    pub node: &'a dyn Fn(&str) -> Option<Arc<NodeInfo>>,
    /// The last resource version handed out.
    pub versions: &'a AtomicU64,
    /// The events of the changes made, for the queue.
    pub events: Vec<ObjectEvent>,
}

impl World<'_> {
    /// The next resource version.
    pub fn next_version(&self) -> u64 {
        self.versions.fetch_add(1, Ordering::SeqCst) + 1
    }
}

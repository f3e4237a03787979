//! The plugin interfaces and the framework that runs them over all nodes in parallel.

mod cached;
#[cfg(test)]
mod error_tests;
mod lifecycle;
mod limits;
mod normalize;
mod parallel;
pub mod placement_score;
mod post_filter;
mod rejections;
pub(crate) mod run;
pub mod wording;

use std::any::Any;
use std::collections::HashSet;
use std::sync::Arc;

pub use cached::{EquivalenceCache, evaluate_cached};
pub use lifecycle::{
    ApiWrite, Permit, PermitPlugin, PreBindPlugin, Progress, ReservePlugin, Reserved, resource_version,
};
pub use limits::Limits;
pub use normalize::default_normalize;
pub use parallel::{fold_chunks, map_nodes, on_pool};
pub use post_filter::{
    Candidate, PostFilterPlugin, PostFilterResult, failure_message as post_filter_failure_message, run_post_filters,
};
pub use rejections::{Rejections, StatusTable};
pub use run::{
    EvaluateOptions, Evaluation, FitSummary, PluginScores, evaluate, filter_candidates, filter_nodes, nodes_to_find,
    score_nodes, select_host,
};

use crate::events::{ClusterEvent, QueueingHint};
use crate::node_info::NodeInfo;
use crate::objects::ClusterObjects;
use crate::pod_info::PodInfo;
use crate::snapshot::Snapshot;
use crate::status::Status;

/// The highest score a plugin returns after normalization.
pub const MAX_NODE_SCORE: i64 = 100;

/// State one plugin computed in PreFilter or PreScore for one pod.
#[derive(Default)]
pub struct PluginState(Option<Box<dyn Any + Send + Sync>>);

impl PluginState {
    /// Wraps a state value.
    pub fn new<T: Any + Send + Sync>(value: T) -> Self {
        PluginState(Some(Box::new(value)))
    }

    /// No state.
    pub fn none() -> Self {
        PluginState(None)
    }

    /// The state, if it is of type `T`.
    pub fn get<T: Any>(&self) -> Option<&T> {
        self.0.as_ref().and_then(|b| b.downcast_ref::<T>())
    }

    /// The state to change, if it is of type `T`.
    pub fn get_mut<T: Any>(&mut self) -> Option<&mut T> {
        self.0.as_mut().and_then(|b| b.downcast_mut::<T>())
    }
}

/// What a PreFilter produced.
pub struct PreFilterOutcome {
    /// Success (run Filter), Skip (do not run Filter) or a rejection of every node.
    pub status: Status,
    /// State for Filter.
    pub state: PluginState,
    /// When set, only these nodes can fit.
    pub node_names: Option<HashSet<String>>,
    /// Limits on what the pod may be given beyond its requests (see [`Limits`]).
    pub limits: Option<Limits>,
}

impl PreFilterOutcome {
    /// Run Filter with this state.
    pub fn run(state: PluginState) -> Self {
        PreFilterOutcome { status: Status::success(), state, node_names: None, limits: None }
    }

    /// Do not run Filter for this pod.
    pub fn skip() -> Self {
        PreFilterOutcome { status: Status::skip(), state: PluginState::none(), node_names: None, limits: None }
    }

    /// The same, with limits on what the pod may be given.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = Some(limits);
        self
    }

    /// Reject every node with this status.
    pub fn reject(status: Status) -> Self {
        PreFilterOutcome { status, state: PluginState::none(), node_names: None, limits: None }
    }
}

/// A filter (predicate) plugin.
pub trait FilterPlugin: Send + Sync {
    /// kube-scheduler's plugin name.
    fn name(&self) -> &'static str;

    /// PreEnqueue: why the pod cannot be tried at all yet, or `None`. A pod kept out
    /// waits, untried and without a condition written, for an event this plugin's
    /// queueing hint accepts.
    fn pre_enqueue(&self, _pod: &PodInfo, _objects: &ClusterObjects) -> Option<String> {
        None
    }

    /// Computes per-pod state once; the default runs Filter without state.
    fn pre_filter(&self, _pod: &PodInfo, _snapshot: &Snapshot) -> PreFilterOutcome {
        PreFilterOutcome::run(PluginState::none())
    }

    /// Takes the limits the PreFilters gave (see [`Limits`]) into this plugin's state,
    /// after every PreFilter ran; nothing by default.
    fn limit(&self, _state: &mut PluginState, _limits: &Limits) {}

    /// Whether the pod fits on the node, as far as this plugin is concerned.
    fn filter(&self, state: &PluginState, pod: &PodInfo, node: &NodeInfo) -> Status;

    /// [`FilterPlugin::filter`] for the node at `index` in the snapshot given to PreFilter;
    /// plugins that keep per-node arrays in their state override this.
    fn filter_at(&self, state: &PluginState, pod: &PodInfo, node: &NodeInfo, _index: usize) -> Status {
        self.filter(state, pod, node)
    }

    /// True when PreFilter and Filter depend only on the pod's scheduling-relevant spec
    /// ([`PodInfo::signature`]) and on the node itself (its object and its pods), never on
    /// other nodes. Such results are reused across pods of the same signature until the
    /// node changes.
    fn node_local(&self) -> bool {
        false
    }

    /// Whether `event` may make `pod`, which this plugin rejected, schedulable
    /// (kube-scheduler's queueing hint). The default retries on any event.
    fn queueing_hint(&self, _pod: &PodInfo, _event: &ClusterEvent) -> QueueingHint {
        QueueingHint::Queue
    }

    /// What `explain` tells about the pod from this plugin's view before any node (a
    /// quota's path, its use and share), one line each; nothing by default.
    fn explain(&self, _pod: &PodInfo, _snapshot: &Snapshot) -> Vec<String> {
        Vec::new()
    }

    /// Whether this plugin reads what the pods waiting in the scheduling queue ask for
    /// (a quota tree's demand): the owners of cluster objects are then told of them
    /// before each attempt (their `waiting`).
    fn counts_waiting_pods(&self) -> bool {
        false
    }

    /// The cluster objects as they would be once `evicted` are gone, for preemption's
    /// dry run (a plugin whose objects hold what pods use frees it here); `None` when
    /// evicting them changes nothing this plugin reads.
    fn after_eviction(&self, _objects: &ClusterObjects, _evicted: &[Arc<PodInfo>]) -> Option<ClusterObjects> {
        None
    }
}

/// A score (priority) plugin.
pub trait ScorePlugin: Send + Sync {
    /// kube-scheduler's plugin name.
    fn name(&self) -> &'static str;

    /// Computes per-pod state over the feasible nodes; `Err(Status::skip())` skips scoring.
    fn pre_score(&self, _pod: &PodInfo, _snapshot: &Snapshot, _feasible: &[usize]) -> Result<PluginState, Status> {
        Ok(PluginState::none())
    }

    /// The raw score of one node.
    fn score(&self, state: &PluginState, pod: &PodInfo, node: &NodeInfo, snapshot: &Snapshot) -> i64;

    /// [`ScorePlugin::score`] for the node at `index` in the snapshot.
    fn score_at(&self, state: &PluginState, pod: &PodInfo, node: &NodeInfo, snapshot: &Snapshot, _index: usize) -> i64 {
        self.score(state, pod, node, snapshot)
    }

    /// Maps raw scores to 0..=100 (scores are aligned with the feasible nodes).
    fn normalize(&self, _state: &PluginState, _scores: &mut [i64]) {}

    /// True when PreScore depends only on the pod's signature (not on the feasible
    /// nodes) and the raw Score only on the pod and the node, apart from what
    /// [`ScorePlugin::reads_image_spread`] declares.
    fn node_local(&self) -> bool {
        false
    }

    /// True when the raw Score also reads the node count and how many nodes hold each
    /// image ([`Snapshot::image_nodes`]); node-local results are then refreshed when
    /// those change for the pod's images.
    fn reads_image_spread(&self) -> bool {
        false
    }
}

/// A weighted score plugin.
#[derive(Clone)]
pub struct WeightedScore {
    /// The plugin.
    pub plugin: Arc<dyn ScorePlugin>,
    /// Its weight.
    pub weight: i64,
}

/// One scheduling profile: the plugins a scheduler name runs.
#[derive(Clone, Default)]
pub struct Profile {
    /// `schedulerName` pods use to select this profile.
    pub scheduler_name: String,
    /// Filters, in order; a node's first failing filter decides its reason.
    pub filters: Vec<Arc<dyn FilterPlugin>>,
    /// Scores with weights.
    pub scores: Vec<WeightedScore>,
    /// Share of nodes to find feasible before stopping; `None` or 100 evaluates every node.
    pub percentage_of_nodes_to_score: Option<u32>,
    /// PostFilter plugins, in order (DynamicResources, then DefaultPreemption, by default).
    pub post_filters: Vec<Arc<dyn PostFilterPlugin>>,
    /// Reserve plugins, in order (Unreserve runs them in reverse).
    pub reserves: Vec<Arc<dyn ReservePlugin>>,
    /// Permit plugins, in order.
    pub permits: Vec<Arc<dyn PermitPlugin>>,
    /// PreBind plugins, in order.
    pub pre_binds: Vec<Arc<dyn PreBindPlugin>>,
    /// Whether filters build human detail strings for their rejections (`explain` turns
    /// this on; scheduling leaves it off).
    pub details: bool,
    /// Filters and scores outside the process (kube-scheduler's extenders), when configured.
    pub extenders: Option<Arc<dyn Extenders>>,
    /// How the candidate domains of a topology-constrained pod group are ranked
    /// (`placementScore`; none: the first domain that holds the group, tightest first).
    pub placement_scores: Vec<placement_score::WeightedPlacementScore>,
}

/// Filters and scores that live outside the process, kube-scheduler's extenders: asked
/// about the nodes the profile's filters passed, after them, and for extra points after
/// the profile's scores.
pub trait Extenders: Send + Sync {
    /// Whether any extender filters or scores this pod (the others leave it to the
    /// profile alone, and its evaluation may use the equivalence cache). True by default.
    fn applies_to(&self, pod: &PodInfo) -> bool {
        let _ = pod;
        true
    }

    /// Narrows `ev.feasible`, recording the nodes turned down with a reason in
    /// `ev.rejected` (plugin `Extender`), or sets `ev.error` when the attempt cannot go on.
    fn filter(&self, pod: &PodInfo, snapshot: &Snapshot, ev: &mut Evaluation);
    /// Points to add to the totals of `feasible` (aligned with it), weighted and scaled
    /// to the profile's score range; zeros when no extender scores this pod.
    fn score(&self, pod: &PodInfo, snapshot: &Snapshot, feasible: &[usize]) -> Vec<i64>;
    /// Narrows preemption's candidates (kube-scheduler's preempt verb): the nodes and
    /// victims the extenders agree with; an error stops the preemption.
    fn preempt(
        &self,
        pod: &PodInfo,
        snapshot: &Snapshot,
        candidates: Vec<Candidate>,
    ) -> Result<Vec<Candidate>, String> {
        let _ = (pod, snapshot);
        Ok(candidates)
    }
}

impl std::fmt::Debug for Profile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Profile")
            .field("scheduler_name", &self.scheduler_name)
            .field("filters", &self.filters.iter().map(|p| p.name()).collect::<Vec<_>>())
            .field("scores", &self.scores.iter().map(|s| (s.plugin.name(), s.weight)).collect::<Vec<_>>())
            .field("post_filters", &self.post_filters.iter().map(|p| p.name()).collect::<Vec<_>>())
            .field("reserves", &self.reserves.iter().map(|p| p.name()).collect::<Vec<_>>())
            .field("permits", &self.permits.iter().map(|p| p.name()).collect::<Vec<_>>())
            .field("pre_binds", &self.pre_binds.iter().map(|p| p.name()).collect::<Vec<_>>())
            .field("extenders", &self.extenders.is_some())
            .field("placement_scores", &self.placement_scores)
            .finish()
    }
}

/// The hint of a node-local filter for node events: retry after a new node the pod passes,
/// or an updated node it passes now and did not before. `None` for pod events.
pub fn node_hint(plugin: &dyn FilterPlugin, pod: &PodInfo, event: &ClusterEvent) -> Option<QueueingHint> {
    let passes = |n: &NodeInfo| plugin.filter(&PluginState::none(), pod, n).is_success();
    match event {
        ClusterEvent::NodeAdded(n) => Some(QueueingHint::from_bool(passes(n))),
        ClusterEvent::NodeUpdated { old, new } => Some(QueueingHint::from_bool(passes(new) && !passes(old))),
        ClusterEvent::NodeDeleted(_) => Some(QueueingHint::Skip),
        _ => None,
    }
}

//! Which cluster events may let a pod that PodTopologySpread rejected fit.

use super::*;
use crate::events::{ClusterEvent, QueueingHint, taints_changed};

/// Pods the pod's hard constraints count (in its namespace, selected by a constraint)
/// arriving, leaving or relabelled, and nodes with its topology keys arriving, leaving
/// or relabelled. A pod spreading by the default constraints, whose selector comes from
/// the workloads selecting it, is retried on any pod event in its namespace.
pub(super) fn queueing_hint(defaults: &[SpreadConstraint], pod: &PodInfo, event: &ClusterEvent) -> QueueingHint {
    let hard = |c: &&SpreadConstraint| c.when_unsatisfiable == Unsatisfiable::DoNotSchedule;
    let by_default = pod.spread_constraints.is_empty();
    let constraints: Vec<&SpreadConstraint> = if by_default {
        defaults.iter().filter(hard).collect()
    } else {
        pod.spread_constraints.iter().filter(hard).collect()
    };
    let counts = |p: &PodInfo| {
        p.namespace == pod.namespace
            && (by_default
                || constraints
                    .iter()
                    .any(|c| c.selector.as_ref().is_some_and(|s| !s.is_empty() && s.matches(&p.labels))))
    };
    let has_keys = |n: &NodeInfo| constraints.iter().all(|c| n.labels.contains_key(&c.topology_key));
    QueueingHint::from_bool(match event {
        ClusterEvent::PodAdded(p) | ClusterEvent::PodDeleted(p) => counts(p),
        ClusterEvent::PodUpdated { old, new } => counts(old) || counts(new),
        ClusterEvent::NodeAdded(n) | ClusterEvent::NodeDeleted(n) => has_keys(n),
        ClusterEvent::NodeUpdated { old, new } => old.labels != new.labels || taints_changed(old, new),
        ClusterEvent::Object(_) => false,
    })
}

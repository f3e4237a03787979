//! Which cluster events may let a pod that InterPodAffinity rejected fit.

use crate::events::{ClusterEvent, QueueingHint};
use crate::pod_info::{AffinityTerm, PodInfo};

/// Whether the term may select the pod. Namespace selectors need namespace labels the
/// event does not carry, so a term with one is taken to match any namespace.
fn may_select(term: &AffinityTerm, pod: &PodInfo) -> bool {
    (term.namespaces.contains(&pod.namespace) || term.namespace_selector.is_some())
        && term.selector.as_ref().is_some_and(|s| s.matches(&pod.labels))
}

/// A placed pod the pod's required affinity selects (arriving, or relabelled into it), a
/// pod its anti-affinity selects going away or relabelled out of it, a pod whose own
/// anti-affinity selected it going away, and nodes arriving or relabelled.
pub(super) fn queueing_hint(pod: &PodInfo, event: &ClusterEvent) -> QueueingHint {
    let wanted = |p: &PodInfo| pod.required_affinity.iter().any(|t| may_select(t, p));
    let conflicting = |p: &PodInfo| pod.required_anti_affinity.iter().any(|t| may_select(t, p));
    let repelling = |p: &PodInfo| p.required_anti_affinity.iter().any(|t| may_select(t, pod));
    QueueingHint::from_bool(match event {
        ClusterEvent::PodAdded(p) => wanted(p),
        ClusterEvent::PodUpdated { old, new } => wanted(new) || (conflicting(old) && !conflicting(new)),
        ClusterEvent::PodDeleted(p) => conflicting(p) || repelling(p),
        ClusterEvent::NodeAdded(_) => true,
        ClusterEvent::NodeUpdated { old, new } => old.labels != new.labels,
        ClusterEvent::NodeDeleted(_) | ClusterEvent::Object(_) => false,
    })
}

//! PodDisruptionBudgets as preemption reads them.

use std::collections::HashSet;

use k8s_openapi::api::policy::v1::PodDisruptionBudget;

use crate::labels::LabelSelector;
use crate::pod_info::PodInfo;

/// One PodDisruptionBudget: which pods it covers and how many may go now.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Budget {
    /// Namespace.
    pub namespace: String,
    /// `spec.selector`; `None` (absent, empty or invalid) covers no pod here.
    pub selector: Option<LabelSelector>,
    /// `status.disruptionsAllowed`.
    pub disruptions_allowed: i32,
    /// `status.disruptedPods` names: pods already being evicted, not counted again.
    pub disrupted: HashSet<String>,
}

impl Budget {
    /// Reads an API object.
    pub fn from_api(pdb: &PodDisruptionBudget) -> Self {
        let selector = pdb
            .spec
            .as_ref()
            .and_then(|s| s.selector.as_ref())
            .and_then(|s| LabelSelector::parse(s).ok())
            .filter(|s| !s.is_empty());
        let status = pdb.status.as_ref();
        Budget {
            namespace: pdb.metadata.namespace.clone().unwrap_or_else(|| "default".into()),
            selector,
            disruptions_allowed: status.and_then(|s| s.disruptions_allowed).unwrap_or(0),
            disrupted: status
                .and_then(|s| s.disrupted_pods.as_ref())
                .map(|m| m.keys().cloned().collect())
                .unwrap_or_default(),
        }
    }

    /// Whether the budget counts `pod` as a new disruption.
    fn covers(&self, pod: &PodInfo) -> bool {
        self.namespace == pod.namespace
            && self.selector.as_ref().is_some_and(|s| s.matches(&pod.labels))
            && !self.disrupted.contains(&pod.name)
    }
}

/// Splits pods (in order) into those whose eviction some budget does not allow and the
/// others, spending each budget's allowance in order (kube-scheduler's
/// filterPodsWithPDBViolation). Pods without labels never violate.
pub fn split_by_budgets<T: AsRef<PodInfo>>(pods: Vec<T>, budgets: &[Budget]) -> (Vec<T>, Vec<T>) {
    let mut allowed: Vec<i64> = budgets.iter().map(|b| i64::from(b.disruptions_allowed)).collect();
    let (mut violating, mut fine) = (Vec::new(), Vec::new());
    for pod in pods {
        let p = pod.as_ref();
        let mut violates = false;
        if !p.labels.is_empty() {
            for (b, left) in budgets.iter().zip(allowed.iter_mut()) {
                if b.covers(p) {
                    *left -= 1;
                    violates |= *left < 0;
                }
            }
        }
        if violates { violating.push(pod) } else { fine.push(pod) }
    }
    (violating, fine)
}

//! PreFilter and Filter of InterPodAffinity.

use super::*;
use crate::framework::{FilterPlugin, PluginState, PreFilterOutcome};
use crate::pod_info::PodInfo;
use crate::status::Status;

/// What PreFilter found for one pod.
struct FilterState {
    /// Existing pods' required anti-affinity terms that select the incoming pod.
    existing_anti: TopologyCounts,
    /// Pods matching all of the incoming pod's affinity terms, per pair.
    affinity: TopologyCounts,
    /// Pods matching each incoming anti-affinity term, per pair.
    anti: TopologyCounts,
    affinity_terms: Vec<AffinityTerm>,
    anti_terms: Vec<AffinityTerm>,
}

impl FilterPlugin for InterPodAffinity {
    fn name(&self) -> &'static str {
        NAME
    }

    fn pre_filter(&self, pod: &PodInfo, snapshot: &Snapshot) -> PreFilterOutcome {
        let ns_labels = snapshot.namespace_labels(&pod.namespace);
        let mut existing_anti = TopologyCounts::default();
        for &i in &snapshot.with_required_anti_affinity {
            let node = &snapshot.nodes[i];
            for ep in &node.pods_with_required_anti_affinity {
                for t in &ep.required_anti_affinity {
                    if t.matches(pod, ns_labels) {
                        add_pair(&mut existing_anti, &t.topology_key, node, 1);
                    }
                }
            }
        }
        let affinity_terms = resolve_namespaces(&pod.required_affinity, snapshot);
        let anti_terms = resolve_namespaces(&pod.required_anti_affinity, snapshot);
        if existing_anti.is_empty() && affinity_terms.is_empty() && anti_terms.is_empty() {
            return PreFilterOutcome::skip();
        }
        let mut affinity = TopologyCounts::default();
        let mut anti = TopologyCounts::default();
        if !affinity_terms.is_empty() || !anti_terms.is_empty() {
            for node in &snapshot.nodes {
                for ep in &node.pods {
                    if !affinity_terms.is_empty() && affinity_terms.iter().all(|t| t.matches(ep, &NO_LABELS)) {
                        for t in &affinity_terms {
                            add_pair(&mut affinity, &t.topology_key, node, 1);
                        }
                    }
                    for t in &anti_terms {
                        if t.matches(ep, &NO_LABELS) {
                            add_pair(&mut anti, &t.topology_key, node, 1);
                        }
                    }
                }
            }
        }
        PreFilterOutcome::run(PluginState::new(FilterState {
            existing_anti,
            affinity,
            anti,
            affinity_terms,
            anti_terms,
        }))
    }

    fn filter(&self, state: &PluginState, pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(s) = state.get::<FilterState>() else { return Status::error("InterPodAffinity state is missing") };
        let count = |m: &TopologyCounts, key: &str| m.at(key, node);
        // 1. The pod's own required affinity.
        let mut pods_exist = true;
        for t in &s.affinity_terms {
            match count(&s.affinity, &t.topology_key) {
                None => {
                    return Status::unresolvable(ERR_REASON_AFFINITY)
                        .with_detail_fn(|| format!("node has no {:?} label", t.topology_key));
                }
                Some(c) if c <= 0 => pods_exist = false,
                Some(_) => {}
            }
        }
        if !pods_exist {
            let self_match = s.affinity.is_empty() && s.affinity_terms.iter().all(|t| t.matches(pod, &NO_LABELS));
            if !self_match {
                return Status::unresolvable(ERR_REASON_AFFINITY)
                    .with_detail("no pod matching every affinity term runs in this node's topology domain");
            }
        }
        // 2. The pod's own required anti-affinity.
        if !s.anti.is_empty() {
            for t in &s.anti_terms {
                if count(&s.anti, &t.topology_key).is_some_and(|c| c > 0) {
                    return Status::unschedulable(ERR_REASON_ANTI_AFFINITY).with_detail_fn(|| format!(
                        "a pod matching an anti-affinity term runs in {}={}",
                        t.topology_key,
                        node.labels.get(&t.topology_key).map(String::as_str).unwrap_or("")
                    ));
                }
            }
        }
        // 3. Existing pods' required anti-affinity.
        if !s.existing_anti.is_empty()
            && let Some((k, v)) = s.existing_anti.any_label_positive(node)
        {
            return Status::unschedulable(ERR_REASON_EXISTING_ANTI_AFFINITY)
                .with_detail_fn(|| format!("an existing pod's anti-affinity excludes {k}={v}"));
        }
        Status::success()
    }
}

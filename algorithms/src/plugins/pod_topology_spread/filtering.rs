//! PreFilter and Filter of PodTopologySpread.

use rustc_hash::FxHashMap as HashMap;

use super::*;
use crate::framework::{FilterPlugin, PluginState, PreFilterOutcome};
use crate::status::Status;

struct FilterState {
    constraints: Vec<SpreadConstraint>,
    /// Per constraint: matching pods per domain value (eligible domains only).
    counts: Vec<HashMap<String, i64>>,
    /// Per constraint: the smallest domain count.
    min: Vec<i64>,
}

impl FilterPlugin for PodTopologySpread {
    fn name(&self) -> &'static str {
        NAME
    }

    fn pre_filter(&self, pod: &PodInfo, snapshot: &Snapshot) -> PreFilterOutcome {
        let constraints = self.constraints(pod, snapshot, Unsatisfiable::DoNotSchedule);
        if constraints.is_empty() {
            return PreFilterOutcome::skip();
        }
        let mut counts: Vec<HashMap<String, i64>> = vec![HashMap::default(); constraints.len()];
        for node in &snapshot.nodes {
            if !has_all_keys(node, &constraints) {
                continue;
            }
            for (c, domain) in constraints.iter().zip(counts.iter_mut()) {
                if !node_included(c, pod, node) {
                    continue;
                }
                let Some(value) = node.labels.get(&c.topology_key) else { continue };
                let add = count_matching(node, &c.selector, &pod.namespace);
                match domain.get_mut(value.as_str()) {
                    Some(n) => *n += add,
                    None => {
                        domain.insert(value.clone(), add);
                    }
                }
            }
        }
        let min = counts.iter().map(|d| d.values().copied().min().unwrap_or(i64::from(i32::MAX))).collect();
        PreFilterOutcome::run(PluginState::new(FilterState { constraints, counts, min }))
    }

    fn filter(&self, state: &PluginState, pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(s) = state.get::<FilterState>() else { return Status::error("PodTopologySpread state is missing") };
        for (i, c) in s.constraints.iter().enumerate() {
            let Some(value) = node.labels.get(&c.topology_key) else {
                return Status::unresolvable(ERR_REASON_NODE_LABEL_NOT_MATCH)
                    .with_detail(format!("node has no {:?} label", c.topology_key));
            };
            let domains = &s.counts[i];
            let min = if (domains.len() as i64) < c.min_domains { 0 } else { s.min[i] };
            let self_match = i64::from(c.selector.as_ref().is_some_and(|sel| sel.matches(&pod.labels)));
            let here = domains.get(value).copied().unwrap_or(0);
            let skew = here + self_match - min;
            if skew > c.max_skew {
                return Status::unschedulable(ERR_REASON_CONSTRAINTS_NOT_MATCH).with_detail(format!(
                    "{}={} would have skew {skew} (matching pods {here}, global minimum {min}), maxSkew {}",
                    c.topology_key, value, c.max_skew
                ));
            }
        }
        Status::success()
    }
}

//! PreFilter and Filter of PodTopologySpread.

use std::sync::Arc;

use super::cache::{MISSING, SpreadCache};
use super::*;
use crate::framework::{FilterPlugin, PluginState, PreFilterOutcome};
use crate::status::Status;

struct FilterState {
    constraints: Vec<SpreadConstraint>,
    /// Per constraint: matching pods per domain value id (eligible domains only).
    sums: Vec<Vec<i64>>,
    /// Per constraint: whether a domain value id is an eligible domain.
    present: Vec<Vec<bool>>,
    /// Per constraint: number of eligible domains.
    domains: Vec<i64>,
    /// Per constraint: the smallest domain count.
    min: Vec<i64>,
    /// Per constraint: 1 when the pod matches its own selector.
    self_match: Vec<i64>,
    /// Per constraint, per value id: whether placing the pod there keeps the skew.
    fits: Vec<Vec<bool>>,
    /// Node value ids, `values[i * per + c]`.
    values: Arc<Vec<u32>>,
    index: Arc<std::collections::HashMap<String, usize>>,
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
        let (mut sums, present, values) = SpreadCache::with_facts(&self.cache, &constraints, pod, snapshot, |f| {
            let present: Vec<Vec<bool>> = f.domain_nodes.iter().map(|d| d.iter().map(|n| *n > 0).collect()).collect();
            (f.domain_pods.clone(), present, f.values.clone())
        });
        for (i, victim) in &snapshot.evicted_terminating {
            take_off(&mut sums, &values, &constraints, pod, (&snapshot.nodes[*i], *i), victim);
        }
        let domains = present.iter().map(|p| domains_of(p)).collect();
        let min = sums.iter().zip(&present).map(|(s, p)| min_of(s, p)).collect();
        let self_match: Vec<i64> = constraints
            .iter()
            .map(|c| i64::from(c.selector.as_ref().is_some_and(|sel| sel.matches(&pod.labels))))
            .collect();
        // The verdict depends only on the node's domain: decide it once per domain.
        let fits = constraints
            .iter()
            .enumerate()
            .map(|(c, con)| {
                let floor = if domains_of(&present[c]) < con.min_domains { 0 } else { min_of(&sums[c], &present[c]) };
                (0..sums[c].len())
                    .map(|d| {
                        let here = if present[c][d] { sums[c][d] } else { 0 };
                        here + self_match[c] - floor <= con.max_skew
                    })
                    .collect()
            })
            .collect();
        PreFilterOutcome::run(PluginState::new(FilterState {
            fits,
            self_match,
            constraints,
            sums,
            present,
            domains,
            min,
            values,
            index: snapshot.index.clone(),
        }))
    }

    fn queueing_hint(&self, pod: &PodInfo, event: &crate::events::ClusterEvent) -> crate::events::QueueingHint {
        super::hints::queueing_hint(&self.defaults, pod, event)
    }

    fn filter(&self, state: &PluginState, pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(i) = state.get::<FilterState>().and_then(|s| s.index.get(&node.name).copied()) else {
            return Status::error("PodTopologySpread state is missing");
        };
        self.filter_at(state, pod, node, i)
    }

    fn filter_at(&self, state: &PluginState, _: &PodInfo, node: &NodeInfo, i: usize) -> Status {
        let Some(s) = state.get::<FilterState>() else { return Status::error("PodTopologySpread state is missing") };
        let per = s.constraints.len();
        for (c, con) in s.constraints.iter().enumerate() {
            let id = s.values.get(i * per + c).copied().unwrap_or(MISSING);
            if id == MISSING {
                return Status::unresolvable(ERR_REASON_NODE_LABEL_NOT_MATCH)
                    .with_detail_fn(|| format!("node has no {:?} label", con.topology_key));
            }
            let d = id as usize;
            if s.fits[c].get(d).copied().unwrap_or(true) {
                continue;
            }
            return Status::unschedulable(ERR_REASON_CONSTRAINTS_NOT_MATCH).with_detail_fn(|| {
                let min = if s.domains[c] < con.min_domains { 0 } else { s.min[c] };
                let here = if s.present[c].get(d).copied().unwrap_or(false) { s.sums[c][d] } else { 0 };
                let value = node.labels.get(&con.topology_key).map(String::as_str).unwrap_or("");
                format!(
                    "{}={} would have skew {} (matching pods {here}, global minimum {min}), maxSkew {}",
                    con.topology_key,
                    value,
                    here + s.self_match[c] - min,
                    con.max_skew
                )
            });
        }
        Status::success()
    }
}

/// What kube-scheduler's RemovePod does to its counts for a victim it never counted (a
/// terminating pod): one less in the victim's domain of each constraint selecting it,
/// when the victim shares the pod's namespace and its node has every constraint's key
/// and passes the first constraint's inclusion policies.
fn take_off(
    sums: &mut [Vec<i64>],
    values: &[u32],
    constraints: &[SpreadConstraint],
    pod: &PodInfo,
    (node, i): (&NodeInfo, usize),
    victim: &PodInfo,
) {
    if victim.namespace != pod.namespace
        || !has_all_keys(node, constraints)
        || !constraints.first().is_some_and(|c| node_included(c, pod, node))
    {
        return;
    }
    let per = constraints.len();
    for (c, con) in constraints.iter().enumerate() {
        if !con.selector.as_ref().is_some_and(|sel| sel.matches(&victim.labels)) {
            continue;
        }
        let id = values.get(i * per + c).copied().unwrap_or(MISSING);
        if let Some(sum) = sums.get_mut(c).and_then(|s| s.get_mut(id as usize)) {
            *sum -= 1;
        }
    }
}

fn domains_of(present: &[bool]) -> i64 {
    present.iter().filter(|x| **x).count() as i64
}

fn min_of(sums: &[i64], present: &[bool]) -> i64 {
    sums.iter().zip(present).filter(|(_, p)| **p).map(|(v, _)| *v).min().unwrap_or(i64::from(i32::MAX))
}

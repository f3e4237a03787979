//! Victim selection on one node (kube-scheduler's SelectVictimsOnNode).

use std::sync::Arc;

use super::{NO_VICTIMS, more_important};
use crate::budgets::split_by_budgets;
use crate::framework::run::{Allowed, filter_with_nominated, outside_allowed, pre_filter_all};
use crate::framework::{Evaluation, PluginState, Profile};
use crate::node_info::{NodeInfo, next_generation};
use crate::objects::ClusterObjects;
use crate::pod_info::PodInfo;
use crate::preemption::Budget;
use crate::snapshot::Snapshot;
use crate::status::Status;

/// Judges whether the pod fits one node of a changed snapshot: with the PreFilter states
/// of the unchanged snapshot when every active filter is node-local (they cannot depend
/// on other nodes' pods), else with a fresh PreFilter over the changed snapshot.
pub struct Judge<'a> {
    profile: &'a Profile,
    pod: &'a PodInfo,
    fixed: Option<(Vec<Option<PluginState>>, Allowed)>,
}

impl<'a> Judge<'a> {
    /// Prepares judging `pod` under `profile` against `snapshot`.
    pub fn new(profile: &'a Profile, pod: &'a PodInfo, snapshot: &Snapshot) -> Self {
        let mut ev = Evaluation::default();
        let fixed = pre_filter_all(profile, pod, snapshot, &mut ev, 0, &|k| k)
            .filter(|(states, _)| profile.filters.iter().zip(states).all(|(f, st)| st.is_none() || f.node_local()));
        Judge { profile, pod, fixed }
    }

    /// The pod's status on node `i` of `snapshot`.
    pub fn fits(&self, snapshot: &Snapshot, i: usize) -> Status {
        let node = &snapshot.nodes[i];
        if let Some((states, allowed)) = &self.fixed {
            if let Some(st) = outside_allowed(allowed, node) {
                return st;
            }
            let details = self.profile.details;
            return filter_with_nominated(&self.profile.filters, states, self.pod, node, (i, snapshot), details);
        }
        let mut ev = Evaluation::default();
        let Some((states, allowed)) = pre_filter_all(self.profile, self.pod, snapshot, &mut ev, 0, &|k| k) else {
            return ev.error.or(ev.prefilter_rejection).unwrap_or_else(|| Status::error("PreFilter failed"));
        };
        if let Some(st) = outside_allowed(&allowed, node) {
            return st;
        }
        filter_with_nominated(&self.profile.filters, &states, self.pod, node, (i, snapshot), self.profile.details)
    }
}

/// Puts `node` at `i` with a fresh generation.
pub fn put_node(snapshot: &mut Snapshot, i: usize, mut node: NodeInfo) {
    node.generation = next_generation();
    snapshot.replace_node(i, Arc::new(node));
    snapshot.set_pod_flags(i);
}

/// The victims on node `i` (most important first) and how many of them violate a
/// budget, or the status that makes node `i` no candidate. `snapshot` is restored.
pub fn select_victims(
    profile: &Profile,
    pod: &PodInfo,
    snapshot: &mut Snapshot,
    i: usize,
    budgets: &[Budget],
) -> Result<(Vec<Arc<PodInfo>>, usize), Status> {
    let judge = Judge::new(profile, pod, snapshot);
    select_victims_with(&judge, pod, snapshot, i, budgets)
}

/// [`select_victims`] with a prepared [`Judge`].
pub fn select_victims_with(
    judge: &Judge<'_>,
    pod: &PodInfo,
    snapshot: &mut Snapshot,
    i: usize,
    budgets: &[Budget],
) -> Result<(Vec<Arc<PodInfo>>, usize), Status> {
    let original = snapshot.nodes[i].clone();
    let objects = snapshot.objects.clone();
    let result = dry_run(judge, pod, snapshot, i, budgets, &original);
    snapshot.replace_node(i, original);
    snapshot.set_pod_flags(i);
    snapshot.objects = objects;
    snapshot.evicted_terminating.clear();
    result
}

/// Puts into `snapshot` the cluster objects as every filter of the profile says they
/// would be with `evicted` gone (devices of claims only they use freed, say).
pub fn evict(profile: &Profile, snapshot: &mut Snapshot, base: &Arc<ClusterObjects>, evicted: &[Arc<PodInfo>]) {
    let mut objects: Option<ClusterObjects> = None;
    for f in &profile.filters {
        if let Some(after) = f.after_eviction(objects.as_ref().unwrap_or(base), evicted) {
            objects = Some(after);
        }
    }
    snapshot.objects = objects.map(Arc::new).unwrap_or_else(|| base.clone());
}

fn dry_run(
    judge: &Judge<'_>,
    pod: &PodInfo,
    snapshot: &mut Snapshot,
    i: usize,
    budgets: &[Budget],
    original: &Arc<NodeInfo>,
) -> Result<(Vec<Arc<PodInfo>>, usize), Status> {
    let mut potential: Vec<Arc<PodInfo>> =
        original.pods.iter().filter(|p| p.priority < pod.priority).cloned().collect();
    if potential.is_empty() {
        return Err(Status::unresolvable(NO_VICTIMS));
    }
    let mut node = (**original).clone();
    for p in &potential {
        node.remove_pod(&p.namespace, &p.name);
    }
    snapshot.evicted_terminating = potential.iter().filter(|p| p.terminating).map(|p| (i, p.clone())).collect();
    let base = snapshot.objects.clone();
    let claims = potential.iter().any(|p| !p.resource_claims.is_empty());
    if claims {
        evict(judge.profile, snapshot, &base, &potential);
    }
    put_node(snapshot, i, node.clone());
    let st = judge.fits(snapshot, i);
    if !st.is_success() {
        return Err(st);
    }
    potential.sort_by(|a, b| more_important(a, b));
    let (violating, fine) = split_by_budgets(potential, budgets);
    let both = !violating.is_empty() && !fine.is_empty();
    let mut victims = Vec::new();
    let mut violations = 0;
    // Every pod is given back in turn; the ones it could not do without stay evicted.
    let mut pending: Vec<Arc<PodInfo>> = violating.iter().chain(&fine).cloned().collect();
    for (group, counts) in [(violating, true), (fine, false)] {
        for p in group {
            pending.retain(|q| !Arc::ptr_eq(q, &p));
            node.add_pod(p.clone());
            snapshot.evicted_terminating.retain(|(_, q)| !Arc::ptr_eq(q, &p));
            if claims {
                let gone: Vec<Arc<PodInfo>> = victims.iter().chain(&pending).cloned().collect();
                evict(judge.profile, snapshot, &base, &gone);
            }
            put_node(snapshot, i, node.clone());
            if !judge.fits(snapshot, i).is_success() {
                node.remove_pod(&p.namespace, &p.name);
                put_node(snapshot, i, node.clone());
                if p.terminating {
                    snapshot.evicted_terminating.push((i, p.clone()));
                }
                victims.push(p);
                violations += usize::from(counts);
            }
        }
    }
    if both {
        victims.sort_by(|a, b| more_important(a, b));
    }
    Ok((victims, violations))
}

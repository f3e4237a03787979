//! CapacityScheduling's PostFilter: preemption under quotas, as scheduler-plugins' plugin
//! does it in place of DefaultPreemption.
//!
//! A pod whose quota would stay within its `min` may take back what other quotas
//! borrowed: it may evict, whatever their priority, pods of other quotas while those run
//! over their `min`. A pod that would pass its `min` may evict only lower-priority pods of
//! its own quota, and a pod without a quota only lower-priority pods without one. Every
//! node a filter found `Unschedulable` is dry-run; on each, the victims are chosen least
//! important first (each choice counted off its quota before the next), the pod must
//! then fit, and its quota must then hold it; victims are reprieved most important first
//! (those a PodDisruptionBudget protects first) while the pod still fits and its quota
//! still holds it. A pod group is one victim: its members here are given back or evicted
//! together, and its members on other nodes go with them (and count among the victims,
//! so the choice of node weighs them). The node is then chosen as kube-scheduler chooses
//! among candidates.

use std::sync::Arc;

use rand::RngCore;

use super::{CapacityScheduling, NAME, asked};
use crate::budgets::split_by_budgets;
use crate::framework::{Candidate, Evaluation, PostFilterPlugin, PostFilterResult, Profile};
use crate::pod_info::PodInfo;
use crate::preemption::{Budget, DryRun, Judge, conclude, evict, more_important, put_node};
use crate::quotas::QuotaObjects;
use crate::snapshot::Snapshot;
use crate::status::{Code, Status};

/// Why a pod with `preemptionPolicy: Never` does not preempt.
pub const NEVER: &str = "not eligible due to preemptionPolicy=Never.";
/// Why a pod does not preempt while a pod it may have evicted still terminates.
pub const TERMINATING: &str = "not eligible due to a terminating pod on the nominated node.";
/// Why a pod does not preempt when a PreFilter before this plugin's rejected it.
pub const NO_STATE: &str = "not eligible due to failed to read from cycleState";
/// A node where evicting every victim would still leave the pod's quota refusing it.
pub const GLOBAL_MAX: &str = "global quota max exceeded";

/// What decides preemption under quotas: who may preempt, whom, and whether the pod's
/// quota holds it once the victims are gone. CapacityScheduling's rules are
/// [`FlatRules`]; quota trees have their own.
pub trait Rules {
    /// The plugin whose PreFilter state the rules read.
    fn plugin(&self) -> &'static str;
    /// Whether a terminating pod on the pod's nominated node (of `snapshot`, node `i`)
    /// makes it wait rather than preempt again.
    fn blocked_by_terminating(&self, pod: &PodInfo, snapshot: &Snapshot, i: usize) -> bool;
    /// The pods on node `i` the pod may evict, least important first.
    fn potential(&self, pod: &PodInfo, snapshot: &Snapshot, i: usize) -> Vec<Arc<PodInfo>>;
    /// Whether the pod's quota still refuses it in `snapshot` (victims gone).
    fn refuses(&self, pod: &PodInfo, snapshot: &Snapshot) -> bool;
    /// Whether `victim` may be evicted at all (a pod group goes only if all its members may).
    fn evictable(&self, _victim: &PodInfo) -> bool {
        true
    }
}

impl PostFilterPlugin for CapacityScheduling {
    fn name(&self) -> &'static str {
        NAME
    }

    fn post_filter(
        &self,
        profile: &Profile,
        pod: &PodInfo,
        snapshot: &mut Snapshot,
        ev: &Evaluation,
        _: &mut dyn RngCore,
    ) -> PostFilterResult {
        preempt(&FlatRules, profile, pod, snapshot, ev)
    }
}

/// Preemption under `rules` for `pod`, which fit nowhere in `ev`: a nomination, or why
/// not. `snapshot` is changed during the dry runs and restored.
pub fn preempt(
    rules: &dyn Rules,
    profile: &Profile,
    pod: &PodInfo,
    snapshot: &mut Snapshot,
    ev: &Evaluation,
) -> PostFilterResult {
    if let Err(message) = eligible(rules, profile, pod, snapshot, ev) {
        return PostFilterResult::Unschedulable { message, clear: false };
    }
    let potential: Vec<usize> = match &ev.prefilter_rejection {
        Some(st) if st.code == Code::Unschedulable => (0..snapshot.len()).collect(),
        Some(_) => Vec::new(),
        None => ev.rejected.iter().filter(|(_, st)| st.code == Code::Unschedulable).map(|(i, _)| i).collect(),
    };
    let budgets = snapshot.budgets.clone();
    let judge = Judge::new(profile, pod, snapshot);
    let (mut clean, mut violating) = (Vec::new(), Vec::new());
    let mut found = DryRun::default();
    // Every potential node is dry-run, from the first.
    for &i in &potential {
        match victims_on(rules, &judge, profile, pod, snapshot, i, &budgets) {
            Ok((victims, _)) if victims.is_empty() => {
                let message = format!("expected at least one victim pod on node {:?}", snapshot.nodes[i].name);
                found.errors.push(message.clone());
                found.statuses.insert(i, Status::error(message));
            }
            Ok((victims, pdb_violations)) => {
                let list = if pdb_violations == 0 { &mut clean } else { &mut violating };
                list.push(Candidate { node: i, victims, pdb_violations });
            }
            Err(st) => {
                if st.code == Code::Error {
                    found.errors.push(st.message());
                }
                found.statuses.insert(i, st);
            }
        }
    }
    found.candidates = clean.into_iter().chain(violating).collect();
    conclude(profile, pod, snapshot, found)
}

/// Whether `pod` may preempt (the quota-aware PodEligibleToPreemptOthers); the reason
/// when not.
pub fn eligible(
    rules: &dyn Rules,
    profile: &Profile,
    pod: &PodInfo,
    snapshot: &Snapshot,
    ev: &Evaluation,
) -> Result<(), String> {
    if pod.never_preempts {
        return Err(NEVER.into());
    }
    if let Some(st) = &ev.prefilter_rejection {
        let at = |name: &str| profile.filters.iter().position(|f| f.name() == name);
        let us = rules.plugin();
        if st.plugin != us && at(st.plugin).zip(at(us)).is_none_or(|(them, us)| them < us) {
            return Err(NO_STATE.into());
        }
    }
    let Some(nominated) = &pod.nominated_node else { return Ok(()) };
    let Some(&i) = snapshot.index.get(nominated) else { return Ok(()) };
    let status = ev.rejected.iter().find(|(j, _)| *j == i).map(|(_, st)| st.code);
    if status == Some(Code::UnschedulableAndUnresolvable) {
        return Ok(());
    }
    if rules.blocked_by_terminating(pod, snapshot, i) { Err(TERMINATING.into()) } else { Ok(()) }
}

/// scheduler-plugins' CapacityScheduling rules over flat quotas, one per namespace.
#[derive(Debug, Default, Clone, Copy)]
pub struct FlatRules;

impl Rules for FlatRules {
    fn plugin(&self) -> &'static str {
        NAME
    }

    fn blocked_by_terminating(&self, pod: &PodInfo, snapshot: &Snapshot, i: usize) -> bool {
        let quotas = snapshot.objects.quotas();
        let leaving = snapshot.nodes[i].pods.iter().filter(|p| p.terminating);
        match quotas.quota(&pod.namespace) {
            Some(quota) => {
                let more_than_min =
                    quota.over_min_with(quotas.used(&pod.namespace), &asked(quotas, pod, snapshot).in_quota);
                leaving.filter_map(|p| Some((p, quotas.quota(&p.namespace)?))).any(|(p, theirs)| {
                    if p.namespace == pod.namespace {
                        p.priority < pod.priority
                    } else {
                        !more_than_min && theirs.over_min(quotas.used(&p.namespace))
                    }
                })
            }
            None => leaving.filter(|p| quotas.quota(&p.namespace).is_none()).any(|p| p.priority < pod.priority),
        }
    }

    fn potential(&self, pod: &PodInfo, snapshot: &Snapshot, i: usize) -> Vec<Arc<PodInfo>> {
        potential_victims(pod, snapshot, i)
    }

    fn refuses(&self, pod: &PodInfo, snapshot: &Snapshot) -> bool {
        let quotas = snapshot.objects.quotas();
        let Some(quota) = quotas.quota(&pod.namespace) else { return false };
        let request = &pod.requests.requests;
        quota.over_max_with(quotas.used(&pod.namespace), request) || quotas.aggregated_over_min_with(request)
    }
}

/// The victims on node `i` (most important first) and how many of them a budget
/// protects, or why node `i` is no candidate. `snapshot` is restored.
pub fn victims_on(
    rules: &dyn Rules,
    judge: &Judge<'_>,
    profile: &Profile,
    pod: &PodInfo,
    snapshot: &mut Snapshot,
    i: usize,
    budgets: &[Budget],
) -> Result<(Vec<Arc<PodInfo>>, usize), Status> {
    let original = snapshot.nodes[i].clone();
    let base = snapshot.objects.clone();
    let result = dry_run(rules, judge, profile, pod, snapshot, i, budgets);
    snapshot.replace_node(i, original);
    snapshot.set_pod_flags(i);
    snapshot.objects = base;
    result
}

/// The pods on node `i` this pod may evict, least important first, each counted off its
/// quota before the next is chosen.
fn potential_victims(pod: &PodInfo, snapshot: &Snapshot, i: usize) -> Vec<Arc<PodInfo>> {
    let mut quotas = snapshot.objects.quotas().clone();
    let mut pods = snapshot.nodes[i].pods.clone();
    pods.sort_by(|a, b| more_important(b, a));
    let Some(quota) = quotas.quota(&pod.namespace).cloned() else {
        pods.retain(|p| quotas.quota(&p.namespace).is_none() && p.priority < pod.priority);
        return pods;
    };
    let more_than_min = quota.over_min_with(quotas.used(&pod.namespace), &asked(&quotas, pod, snapshot).in_quota);
    let mut chosen = Vec::new();
    for p in pods {
        let Some(theirs) = quotas.quota(&p.namespace) else { continue };
        let victim = if more_than_min {
            p.namespace == pod.namespace && p.priority < pod.priority
        } else {
            p.namespace != pod.namespace && theirs.over_min(quotas.used(&p.namespace))
        };
        if victim {
            quotas.discharge(&p.namespace, &p.requests.requests);
            chosen.push(p);
        }
    }
    chosen
}

/// Pods evicted together: one pod, or the members of a pod group on the node with the
/// members elsewhere that go with them (a group that lost a member cannot run).
struct Unit {
    /// On the node.
    here: Vec<Arc<PodInfo>>,
    /// On other nodes.
    elsewhere: Vec<Arc<PodInfo>>,
}

impl Unit {
    fn pods(&self) -> impl Iterator<Item = &Arc<PodInfo>> {
        self.here.iter().chain(&self.elsewhere)
    }

    /// Whether it goes before `other` when victims are given back: its most important
    /// pod is the more important.
    fn before(&self, other: &Unit) -> std::cmp::Ordering {
        let top = |u: &Unit| u.here.iter().min_by(|a, b| more_important(a, b)).cloned();
        match (top(self), top(other)) {
            (Some(a), Some(b)) => more_important(&a, &b),
            (a, b) => b.is_some().cmp(&a.is_some()),
        }
    }
}

/// The potential victims of node `i` as units: a pod group's members, here and on other
/// nodes, are one.
fn units(rules: &dyn Rules, potential: Vec<Arc<PodInfo>>, snapshot: &Snapshot, i: usize) -> Vec<Unit> {
    let mut out: Vec<Unit> = Vec::new();
    for p in potential {
        if p.group_name().is_none() {
            out.push(Unit { here: vec![p], elsewhere: Vec::new() });
            continue;
        }
        if out.iter().any(|u| u.here.first().is_some_and(|q| q.same_group(&p))) {
            continue;
        }
        let mut unit = Unit { here: Vec::new(), elsewhere: Vec::new() };
        for (j, node) in snapshot.nodes.iter().enumerate() {
            let members = node.pods.iter().filter(|q| q.same_group(&p)).cloned();
            if j == i { unit.here.extend(members) } else { unit.elsewhere.extend(members) }
        }
        if unit.pods().all(|m| rules.evictable(m)) {
            out.push(unit);
        }
    }
    out
}

fn dry_run(
    rules: &dyn Rules,
    judge: &Judge<'_>,
    profile: &Profile,
    pod: &PodInfo,
    snapshot: &mut Snapshot,
    i: usize,
    budgets: &[Budget],
) -> Result<(Vec<Arc<PodInfo>>, usize), Status> {
    let mut units = units(rules, rules.potential(pod, snapshot, i), snapshot, i);
    if units.is_empty() {
        let name = &snapshot.nodes[i].name;
        return Err(Status::unresolvable(format!("No victims found on node {name} for preemptor pod {}", pod.name)));
    }
    let base = snapshot.objects.clone();
    let mut node = (*snapshot.nodes[i]).clone();
    for p in units.iter().flat_map(|u| &u.here) {
        node.remove_pod(&p.namespace, &p.name);
    }
    let put = |snapshot: &mut Snapshot, node: &crate::node_info::NodeInfo, gone: Vec<Arc<PodInfo>>| {
        evict(profile, snapshot, &base, &gone);
        put_node(snapshot, i, node.clone());
    };
    put(snapshot, &node, units.iter().flat_map(Unit::pods).cloned().collect());
    let st = judge.fits(snapshot, i);
    if !st.is_success() {
        return Err(st);
    }
    if rules.refuses(pod, snapshot) {
        return Err(Status::unschedulable(GLOBAL_MAX));
    }
    // Most important first; a unit a budget protects (any pod of it) before the others.
    units.sort_by(|a, b| a.before(b));
    let flat: Vec<Arc<PodInfo>> = units.iter().flat_map(Unit::pods).cloned().collect();
    let (protected, _) = split_by_budgets(flat, budgets);
    let is_protected = |p: &Arc<PodInfo>| protected.iter().any(|q| Arc::ptr_eq(q, p));
    let (violating, fine): (Vec<Unit>, Vec<Unit>) = units.into_iter().partition(|u| u.pods().any(is_protected));
    let both = !violating.is_empty() && !fine.is_empty();
    let mut victims: Vec<Arc<PodInfo>> = Vec::new();
    let mut violations = 0;
    // Every unit is given back in turn; the ones the pod (and its quota) cannot do
    // without stay evicted, whole.
    let mut pending: Vec<Arc<PodInfo>> = violating.iter().chain(&fine).flat_map(Unit::pods).cloned().collect();
    for (group, counts) in [(violating, true), (fine, false)] {
        for unit in group {
            pending.retain(|q| !unit.pods().any(|p| Arc::ptr_eq(p, q)));
            for p in &unit.here {
                node.add_pod(p.clone());
            }
            put(snapshot, &node, victims.iter().chain(&pending).cloned().collect());
            if !judge.fits(snapshot, i).is_success() {
                for p in &unit.here {
                    node.remove_pod(&p.namespace, &p.name);
                }
                if counts {
                    violations += unit.pods().filter(|p| is_protected(p)).count();
                }
                victims.extend(unit.pods().cloned());
            }
        }
    }
    if both {
        victims.sort_by(|a, b| more_important(a, b));
    }
    Ok((victims, violations))
}

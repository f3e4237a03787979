//! Topology-constrained gangs: a group whose PodGroup names a node label (a rack, a
//! block, an NVLink domain) is placed inside one domain of it, whole or not at all.
//!
//! The candidate domains are the label's values among the nodes. A domain whose free
//! amount of the group's dominant resource (the device resource its members ask for, else
//! CPU) is below what the group needs is skipped at once; in each other domain the
//! members are placed one after another exactly as for any gang (filters, scores, Reserve
//! plugins, each member seeing those before it), choosing only among the domain's nodes
//! while the rest of the cluster still counts for spreading and affinity. Of the domains
//! that hold the group, the tightest wins: the one left with the least free amount of the
//! dominant resource, so that large domains stay whole for large groups (ties: the first
//! by name). When none holds it, preemption is tried one domain at a time (most members
//! placed first), so that victims come from one domain only; otherwise the group waits
//! with a message naming the key and the best domain's shortfall.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use algorithms::framework::FitSummary;
use algorithms::{Evaluation, NodeInfo, Snapshot};

use super::gang_cycle::{COSCHEDULING, Failed, Placed};
use super::{Attempt, Cycler, Preempted};

/// The nodes a constrained member may be placed on, with the plugin named as turning the
/// others down.
pub type Within = (Arc<HashSet<String>>, &'static str);

/// One domain of the topology key: its value and its nodes.
struct Domain {
    value: String,
    within: Within,
}

/// The key's domains among the snapshot's nodes, by value.
fn domains(snapshot: &Snapshot, key: &str) -> Vec<Domain> {
    let mut by_value: BTreeMap<&str, HashSet<String>> = BTreeMap::new();
    for n in &snapshot.nodes {
        if let Some(v) = n.labels.get(key) {
            by_value.entry(v.as_str()).or_default().insert(n.name.clone());
        }
    }
    by_value
        .into_iter()
        .map(|(v, nodes)| Domain { value: v.to_string(), within: (Arc::new(nodes), COSCHEDULING) })
        .collect()
}

/// What a member asks for of a resource (CPU in millicores).
fn request(attempt: &Attempt, resource: &str) -> i64 {
    let r = &attempt.queued.pod.requests.requests;
    match resource {
        "cpu" => r.milli_cpu,
        "memory" => r.memory,
        other => r.get(other),
    }
}

/// What a node has free of a resource.
fn free_on(node: &NodeInfo, resource: &str) -> i64 {
    let (a, u) = (&node.allocatable, &node.requested);
    match resource {
        "cpu" => a.milli_cpu - u.milli_cpu,
        "memory" => a.memory - u.memory,
        other => a.get(other) - u.get(other),
    }
}

/// The group's dominant resource: the first (by name) device or other scalar resource a
/// member asks for that some node advertises, else CPU.
fn dominant(snapshot: &Snapshot, members: &[Attempt]) -> String {
    let mut asked: Vec<&str> =
        members.iter().flat_map(|m| m.queued.pod.requests.requests.scalar.iter().map(|(n, _)| n.as_str())).collect();
    asked.sort_unstable();
    asked.dedup();
    asked
        .into_iter()
        .find(|r| snapshot.nodes.iter().any(|n| n.allocatable.get(r) > 0))
        .map_or_else(|| "cpu".to_string(), str::to_string)
}

/// One domain tried: its members placed and not, the snapshot they were placed on, and
/// what it has left free of the dominant resource.
struct Trial {
    value: String,
    within: Within,
    placed: Vec<Placed>,
    failed: Vec<Failed>,
    scratch: Snapshot,
    left: i64,
    /// Why it was not tried (the cheap bound), if it was not.
    skipped: Option<String>,
}

/// A member's failure inside a domain, as a FailedScheduling message over its nodes only.
pub(super) fn domain_message(ev: &Evaluation, size: usize) -> String {
    if let Some(e) = &ev.error {
        return format!("running {} plugin failed: {}", e.plugin, e.message());
    }
    let mut reasons = BTreeMap::new();
    for (_, st) in ev.rejected.iter().filter(|(_, st)| st.plugin != COSCHEDULING) {
        for r in &st.reasons {
            *reasons.entry(r.to_string()).or_insert(0) += 1;
        }
    }
    FitSummary { num_nodes: size, reasons, prefilter_message: ev.fit_summary().and_then(|s| s.prefilter_message) }
        .message()
}

/// How a constrained group came out: the chosen domain's placements (or the one its
/// preemption is for), and the message when it does not fit.
pub(super) struct Outcome {
    pub placed: Vec<Placed>,
    pub failed: Vec<Failed>,
    pub preemptions: Option<Vec<Preempted>>,
    pub message: Option<String>,
}

impl Cycler {
    /// Places the members in the trial's domain, on its snapshot.
    fn try_trial(&mut self, trial: &mut Trial, members: &[Attempt], resource: &str) {
        let size = trial.within.0.len();
        let (placed, failed) = self.place_members(&mut trial.scratch, members, Some(&trial.within), size);
        let within = &trial.within.0;
        trial.left =
            trial.scratch.nodes.iter().filter(|n| within.contains(&n.name)).map(|n| free_on(n, resource)).sum();
        (trial.placed, trial.failed, trial.skipped) = (placed, failed, None);
    }

    /// Places a group constrained to one domain of `key` (see the module's text).
    pub(super) fn place_in_domains(&mut self, group: &str, need: usize, members: &[Attempt], key: &str) -> Outcome {
        let snapshot = self.snapshot.clone();
        let resource = dominant(&snapshot, members);
        let mut wanted: Vec<i64> = members.iter().map(|m| request(m, &resource)).collect();
        wanted.sort_unstable();
        let needs: i64 = wanted.iter().take(need).sum();
        let mut trials: Vec<Trial> = Vec::new();
        for d in domains(&snapshot, key) {
            let nodes: Vec<&Arc<NodeInfo>> = snapshot.nodes.iter().filter(|n| d.within.0.contains(&n.name)).collect();
            let free: i64 = nodes.iter().map(|n| free_on(n, &resource)).sum();
            let mut trial = Trial {
                value: d.value,
                within: d.within,
                placed: Vec::new(),
                failed: Vec::new(),
                scratch: snapshot.clone(),
                left: free,
                skipped: None,
            };
            if free < needs {
                trial.skipped = Some(format!("needs {needs} {resource}, {free} free"));
                trials.push(trial);
                continue;
            }
            self.try_trial(&mut trial, members, &resource);
            trials.push(trial);
        }
        // The first minimum is the first by name: trials are in name order.
        let fitting = trials.iter().enumerate().filter(|(_, t)| t.skipped.is_none() && t.placed.len() >= need);
        if let Some(i) = fitting.min_by_key(|(_, t)| t.left).map(|(i, _)| i) {
            let t = trials.swap_remove(i);
            return Outcome { placed: t.placed, failed: t.failed, preemptions: None, message: None };
        }
        // No domain holds the group. Preemption may make room where the bound saw none
        // free: with lower-priority pods about, every domain is tried for it.
        let top = members.iter().map(|m| m.queued.pod.priority).max().unwrap_or(0);
        let lower = snapshot.nodes.iter().any(|n| n.pods.iter().any(|p| p.priority < top));
        if lower {
            for t in trials.iter_mut().filter(|t| t.skipped.is_some()) {
                self.try_trial(t, members, &resource);
            }
        } else if trials.iter().all(|t| t.skipped.is_some())
            && let Some(t) = trials.iter_mut().max_by(|a, b| a.left.cmp(&b.left).then(b.value.cmp(&a.value)))
        {
            // The figures of the roomiest domain, for the message.
            self.try_trial(t, members, &resource);
        }
        // The most promising first.
        let tried = |t: &Trial| t.skipped.is_none();
        trials.sort_by(|a, b| {
            tried(b).cmp(&tried(a)).then(b.placed.len().cmp(&a.placed.len())).then(a.value.cmp(&b.value))
        });
        let message = match trials.first() {
            None => format!("pod group {group:?}: no node has the label {key}"),
            Some(t) => {
                let why = t.skipped.clone().or_else(|| t.failed.first().map(|f| f.1.clone())).unwrap_or_default();
                format!(
                    "pod group {group:?}: no {key} domain fits all {need} pods; best: {} fits {} ({why})",
                    t.value,
                    t.placed.len()
                )
            }
        };
        if lower {
            for t in trials.iter().filter(|t| t.skipped.is_none()) {
                let failed: Vec<&Attempt> = t.failed.iter().map(|f| &members[f.0]).collect();
                if let Some(p) = self.preempt_members(t.scratch.clone(), &failed, Some(&t.within)) {
                    let (placed, failed) = (t.placed.clone(), t.failed.clone());
                    return Outcome { placed, failed, preemptions: Some(p), message: Some(message) };
                }
            }
        }
        let (placed, failed) = match trials.into_iter().next() {
            Some(t) if t.skipped.is_none() => (t.placed, t.failed),
            _ => (Vec::new(), (0..members.len()).map(|i| (i, message.clone(), vec![COSCHEDULING])).collect()),
        };
        Outcome { placed, failed, preemptions: None, message: Some(message) }
    }
}

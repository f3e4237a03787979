//! Topology-constrained gangs: a group whose PodGroup names a node label (a rack, a
//! block, an NVLink domain) is placed inside one domain of it, whole or not at all.
//!
//! The candidate domains are the label's values among the nodes. A domain whose free
//! amount of the group's dominant resource (the device resource its members ask for, else
//! CPU) is below what the group needs, or, when every member asks the same amount, whose
//! nodes have room for fewer members, is skipped at once. The others are tried tightest
//! first (the least free amount of the dominant resource, which placing the group lowers
//! by the same amount anywhere; ties: the first by name), so that large domains stay whole
//! for large groups: in each the members are placed one after another exactly as for any
//! gang (filters, scores, Reserve plugins, each member seeing those before it), judging
//! only the domain's nodes while the rest of the cluster still counts for spreading and
//! affinity, and the first domain that holds the group takes it. When none holds it, preemption is tried one domain at a time (most members
//! placed first), so that victims come from one domain only; otherwise the group waits
//! with a message naming the key and the best domain's shortfall.

use std::collections::BTreeMap;
use std::sync::Arc;

use algorithms::{NodeInfo, Snapshot};

use super::gang_cycle::{COSCHEDULING, Failed, Placed};
use super::{Attempt, Cycler, Preempted};

/// The nodes (indexes into the snapshot) a constrained member may be placed on.
pub type Within = Arc<Vec<usize>>;

/// One domain of the topology key: its value and its nodes.
struct Domain {
    value: String,
    within: Within,
}

/// The key's domains among the snapshot's nodes, by value.
fn domains(snapshot: &Snapshot, key: &str) -> Vec<Domain> {
    let mut by_value: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, n) in snapshot.nodes.iter().enumerate() {
        if let Some(v) = n.labels.get(key) {
            by_value.entry(v.as_str()).or_default().push(i);
        }
    }
    by_value.into_iter().map(|(v, nodes)| Domain { value: v.to_string(), within: Arc::new(nodes) }).collect()
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
    /// The snapshot the members were placed on, once tried.
    scratch: Option<Snapshot>,
    left: i64,
    /// Why it was not tried (the cheap bound), if it was not.
    skipped: Option<String>,
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
        let mut scratch = self.snapshot.clone();
        let (placed, failed) = self.place_members(&mut scratch, members, Some(&trial.within));
        trial.left = trial.within.iter().map(|&i| free_on(&scratch.nodes[i], resource)).sum();
        (trial.placed, trial.failed, trial.skipped, trial.scratch) = (placed, failed, None, Some(scratch));
    }

    /// Places a group constrained to one domain of `key` (see the module's text).
    pub(super) fn place_in_domains(&mut self, group: &str, need: usize, members: &[Attempt], key: &str) -> Outcome {
        let snapshot = self.snapshot.clone();
        let resource = dominant(&snapshot, members);
        let mut wanted: Vec<i64> = members.iter().map(|m| request(m, &resource)).collect();
        wanted.sort_unstable();
        let needs: i64 = wanted.iter().take(need).sum();
        // Members asking the same amount (a training job's workers): a node holds as many
        // as fit in what it has free, which rules out domains fragmented across nodes.
        let each = wanted.first().copied().filter(|&w| w > 0 && wanted.iter().all(|&x| x == w));
        let mut trials: Vec<Trial> = domains(&snapshot, key)
            .into_iter()
            .map(|d| {
                let free: i64 = d.within.iter().map(|&i| free_on(&snapshot.nodes[i], &resource)).sum();
                let room =
                    |w: i64| -> i64 { d.within.iter().map(|&i| free_on(&snapshot.nodes[i], &resource) / w).sum() };
                let skipped = if free < needs {
                    Some(format!("needs {needs} {resource}, {free} free"))
                } else {
                    let short = each.filter(|&w| room(w) < need as i64);
                    short.map(|w| format!("room for {} of {need} pods of {w} {resource}", room(w)))
                };
                Trial {
                    value: d.value,
                    within: d.within,
                    placed: Vec::new(),
                    failed: Vec::new(),
                    scratch: None,
                    left: free,
                    skipped,
                }
            })
            .collect();
        // Placing the group takes the same amount of the dominant resource in any domain,
        // so the tightest is the one with the least free now: try the domains in that
        // order (then by name) and take the first that holds the group.
        trials.sort_by(|a, b| a.left.cmp(&b.left).then(a.value.cmp(&b.value)));
        for k in 0..trials.len() {
            if trials[k].skipped.is_some() {
                continue;
            }
            self.try_trial(&mut trials[k], members, &resource);
            if trials[k].placed.len() >= need {
                let t = trials.swap_remove(k);
                return Outcome { placed: t.placed, failed: t.failed, preemptions: None, message: None };
            }
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
                let scratch = t.scratch.clone().unwrap_or_else(|| self.snapshot.clone());
                if let Some(p) = self.preempt_members(scratch, &failed, Some(&t.within)) {
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

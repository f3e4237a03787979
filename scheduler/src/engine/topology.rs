//! Topology-constrained gangs: a group whose PodGroup names a node label (a rack, a
//! block, an NVLink domain) is placed inside one domain of it, whole or not at all.
//!
//! The candidate domains are the label's values among the nodes. A domain whose free
//! amount of the group's dominant resource (the device resource its members ask for, else
//! CPU) is below what the group needs, or, when every member asks the same amount, whose
//! nodes have room for fewer members, is skipped at once. The others are tried best first
//! by the profile's placement scores ([`algorithms::placement`]) as they would stand with
//! every member placed, an upper bound of what the domain can score (then the least free,
//! then by name): in each the members are placed one after another exactly as for any
//! gang (filters, scores, Reserve plugins, each member seeing those before it), judging
//! only the domain's nodes while the rest of the cluster still counts for spreading and
//! affinity. The search stops at the first domain that holds every member, whose score
//! no domain after it can beat; the placements found are scored together and the best
//! takes the group. With the default `TightestFit`, the first domain tried that holds the
//! group is the tightest, so that large domains stay whole for large groups. When none
//! holds it, preemption is found for every domain and the one whose victims cost least
//! wins (fewest pods evicted, then the lowest priorities; on a tie, the domain with most
//! members placed), so that victims come from one domain only; otherwise the group waits
//! with a message naming the key and the best domain's shortfall.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use algorithms::placement::{self, GroupFacts, Placement, PlacementScores, free_on, request};
use algorithms::{PodInfo, Snapshot};

use super::gang_cycle::{COSCHEDULING, Failed, Placed};
use super::{Attempt, Cycler, Preempted};

/// What a domain's preemption costs, least first: the pods it evicts, then the highest
/// priority among them, then the sum of their priorities.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct VictimCost {
    pods: usize,
    highest: i32,
    sum: i64,
}

impl VictimCost {
    fn of(preempted: &[Preempted]) -> Self {
        let mut seen = BTreeSet::new();
        let victims: Vec<&Arc<PodInfo>> =
            preempted.iter().flat_map(|p| p.victims.iter()).filter(|v| seen.insert(v.key())).collect();
        VictimCost {
            pods: victims.len(),
            highest: victims.iter().map(|v| v.priority).max().unwrap_or(i32::MIN),
            sum: victims.iter().map(|v| i64::from(v.priority)).sum(),
        }
    }
}

/// The nodes (indexes into the snapshot) a constrained member may be placed on.
pub type Within = Arc<Vec<usize>>;

/// How one candidate domain of a constrained group came out (what `explain` shows).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainVerdict {
    /// The label's value.
    pub domain: String,
    /// Its nodes.
    pub nodes: usize,
    /// What became of it.
    pub verdict: Verdict,
    /// Members placed in it, when tried.
    pub placed: Option<usize>,
    /// Why it was skipped, or why its first member that did not fit did not.
    pub reason: Option<String>,
    /// Its placement scores, when it holds the group.
    pub scores: Option<PlacementScores>,
}

/// What became of a candidate domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// It holds the group and scored best: the group goes there.
    Chosen,
    /// It holds the group; another scored higher.
    Feasible,
    /// Tried: too few members fit.
    TooFew,
    /// Ruled out by the capacity bound without placing anyone.
    Skipped,
    /// Not tried: a domain tried before it holds every member and no later one can
    /// score higher.
    NotTried,
}

impl Verdict {
    /// A word for tables and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Chosen => "chosen",
            Verdict::Feasible => "feasible",
            Verdict::TooFew => "too few fit",
            Verdict::Skipped => "skipped",
            Verdict::NotTried => "not tried",
        }
    }
}

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

/// The group's dominant resource: the first (by name) device or other scalar resource a
/// member asks for that some node advertises, else CPU.
/// An amount of a resource as people write it: CPU in cores or millicores.
fn amount(resource: &str, v: i64) -> String {
    match resource {
        "cpu" if v % 1000 == 0 => (v / 1000).to_string(),
        "cpu" => format!("{v}m"),
        _ => v.to_string(),
    }
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
    /// Out of the question: the group's running pods are in another domain.
    excluded: bool,
    /// The most it can score (every member placed).
    bound: i64,
    scores: Option<PlacementScores>,
}

impl Trial {
    fn verdict(&self, need: usize, chosen: bool) -> DomainVerdict {
        let verdict = match (&self.skipped, &self.scratch) {
            _ if chosen => Verdict::Chosen,
            (Some(_), None) => Verdict::Skipped,
            (_, None) => Verdict::NotTried,
            _ if self.placed.len() >= need => Verdict::Feasible,
            _ => Verdict::TooFew,
        };
        let reason = match verdict {
            Verdict::Skipped => self.skipped.clone(),
            _ => self.failed.first().map(|f| f.1.clone()),
        };
        DomainVerdict {
            domain: self.value.clone(),
            nodes: self.within.len(),
            verdict,
            placed: self.scratch.as_ref().map(|_| self.placed.len()),
            reason,
            scores: self.scores.clone(),
        }
    }
}

/// How a constrained group came out: the chosen domain's placements (or the one its
/// preemption is for), the message when it does not fit, and every domain's verdict.
pub(super) struct Outcome {
    pub placed: Vec<Placed>,
    pub failed: Vec<Failed>,
    pub preemptions: Option<Vec<Preempted>>,
    pub message: Option<String>,
    pub domains: Vec<DomainVerdict>,
}

/// The placement a domain makes: its nodes, and the members given (indexes).
fn placement_of<'a>(
    snapshot: &'a Snapshot,
    within: &Within,
    members: &'a [Attempt],
    placed: &[usize],
) -> Placement<'a> {
    Placement {
        nodes: within.iter().map(|&i| &*snapshot.nodes[i]).collect(),
        pods: placed.iter().map(|&k| &*members[k].queued.pod).collect::<Vec<&PodInfo>>(),
    }
}

impl Cycler {
    /// Places the members in the trial's domain, on its snapshot.
    fn try_trial(&mut self, trial: &mut Trial, members: &[Attempt], resource: &str) {
        let mut scratch = self.snapshot.clone();
        let (placed, failed) = self.place_members(&mut scratch, members, Some(&trial.within));
        trial.left = trial.within.iter().map(|&i| free_on(&scratch.nodes[i], resource)).sum();
        (trial.placed, trial.failed, trial.skipped, trial.scratch) = (placed, failed, None, Some(scratch));
    }

    /// Places a group constrained to one domain of `key` (see the module's text);
    /// `scheduled` of its pods are already on nodes, the nodes `homes`: the rest of the
    /// group may only join them, in their domain.
    pub(super) fn place_in_domains(
        &mut self,
        group: &str,
        (need, scheduled, homes): (usize, usize, &[usize]),
        members: &[Attempt],
        key: &str,
    ) -> Outcome {
        let snapshot = self.snapshot.clone();
        let resource = placement::dominant(&snapshot.nodes, members.iter().map(|m| &*m.queued.pod));
        let mut wanted: Vec<i64> = members.iter().map(|m| request(&m.queued.pod, &resource)).collect();
        wanted.sort_unstable();
        let needs: i64 = wanted.iter().take(need).sum();
        let all: i64 = wanted.iter().sum();
        // Members asking the same amount (a training job's workers): a node holds as many
        // as fit in what it has free, which rules out domains fragmented across nodes.
        let each = wanted.first().copied().filter(|&w| w > 0 && wanted.iter().all(|&x| x == w));
        let pinned: BTreeSet<&str> =
            homes.iter().filter_map(|&i| snapshot.nodes.get(i)?.labels.get(key).map(String::as_str)).collect();
        let mut trials: Vec<Trial> = domains(&snapshot, key)
            .into_iter()
            .map(|d| {
                let free: i64 = d.within.iter().map(|&i| free_on(&snapshot.nodes[i], &resource)).sum();
                let room =
                    |w: i64| -> i64 { d.within.iter().map(|&i| free_on(&snapshot.nodes[i], &resource) / w).sum() };
                let excluded = !pinned.is_empty() && !pinned.contains(d.value.as_str());
                let skipped = if excluded {
                    let homes: Vec<&str> = pinned.iter().copied().collect();
                    Some(format!("the group's running pods are in {}", homes.join(", ")))
                } else if free < needs {
                    Some(format!("needs {} {resource}, {} free", amount(&resource, needs), amount(&resource, free)))
                } else {
                    let short = each.map(|w| (w, room(w))).filter(|&(_, r)| r < need as i64);
                    short.map(|(w, r)| format!("room for {r} of {need} pods of {} {resource}", amount(&resource, w)))
                };
                Trial {
                    value: d.value,
                    within: d.within,
                    placed: Vec::new(),
                    failed: Vec::new(),
                    scratch: None,
                    left: free,
                    excluded,
                    skipped,
                    bound: 0,
                    scores: None,
                }
            })
            .collect();
        // What each candidate would score with every member in it bounds what it can score.
        let weighted = &self.profiles[members.first().map_or(0, |m| m.profile)].placement_scores.clone();
        let everyone: Vec<usize> = (0..members.len()).collect();
        let candidates: Vec<usize> = (0..trials.len()).filter(|&k| trials[k].skipped.is_none()).collect();
        let lefts = candidates.iter().map(|&k| trials[k].left - all);
        let range = (lefts.clone().min().unwrap_or(0), lefts.max().unwrap_or(0));
        let facts = GroupFacts { dominant: resource.clone(), scheduled, left_range: range };
        let full: Vec<Placement<'_>> =
            candidates.iter().map(|&k| placement_of(&snapshot, &trials[k].within, members, &everyone)).collect();
        let bounds = placement::score_placements(weighted, &facts, &full);
        for (&k, b) in candidates.iter().zip(bounds) {
            trials[k].bound = b.total;
        }
        drop(full);
        trials.sort_by(|a, b| b.bound.cmp(&a.bound).then(a.left.cmp(&b.left)).then(a.value.cmp(&b.value)));
        let mut feasible: Vec<usize> = Vec::new();
        for (k, trial) in trials.iter_mut().enumerate() {
            if trial.skipped.is_some() {
                continue;
            }
            self.try_trial(trial, members, &resource);
            if trial.placed.len() >= need {
                feasible.push(k);
            }
            if trial.placed.len() == members.len() {
                break;
            }
        }
        if !feasible.is_empty() {
            let placed: Vec<Vec<usize>> =
                feasible.iter().map(|&k| trials[k].placed.iter().map(|p| p.0).collect()).collect();
            let found: Vec<Placement<'_>> = feasible
                .iter()
                .zip(&placed)
                .map(|(&k, p)| placement_of(&snapshot, &trials[k].within, members, p))
                .collect();
            let scores = placement::score_placements(weighted, &facts, &found);
            drop(found);
            // The highest total; ties go to the one tried first.
            let best = (0..feasible.len()).rev().max_by_key(|&j| scores[j].total).unwrap_or(0);
            for (&k, s) in feasible.iter().zip(scores) {
                trials[k].scores = Some(s);
            }
            let chosen = feasible[best];
            let domains = trials.iter().enumerate().map(|(k, t)| t.verdict(need, k == chosen)).collect();
            let t = trials.swap_remove(chosen);
            return Outcome { placed: t.placed, failed: t.failed, preemptions: None, message: None, domains };
        }
        self.no_domain_fits(group, need, members, key, trials, &resource)
    }

    /// No domain holds the group: the preemption that would make room in one domain, or
    /// the message naming the best domain's shortfall.
    fn no_domain_fits(
        &mut self,
        group: &str,
        need: usize,
        members: &[Attempt],
        key: &str,
        mut trials: Vec<Trial>,
        resource: &str,
    ) -> Outcome {
        // Preemption may make room where the bound saw none free: with lower-priority
        // pods about, every domain is tried for it.
        let top = members.iter().map(|m| m.queued.pod.priority).max().unwrap_or(0);
        let lower = self.snapshot.nodes.iter().any(|n| n.pods.iter().any(|p| p.priority < top));
        if lower {
            for t in trials.iter_mut().filter(|t| t.skipped.is_some() && !t.excluded) {
                self.try_trial(t, members, resource);
            }
        } else if trials.iter().all(|t| t.skipped.is_some())
            && let Some(t) =
                trials.iter_mut().filter(|t| !t.excluded).max_by(|a, b| a.left.cmp(&b.left).then(b.value.cmp(&a.value)))
        {
            // The figures of the roomiest domain, for the message.
            self.try_trial(t, members, resource);
        }
        // The most promising first.
        let tried = |t: &Trial| t.skipped.is_none();
        trials.sort_by(|a, b| {
            (a.excluded.cmp(&b.excluded))
                .then(tried(b).cmp(&tried(a)))
                .then(b.placed.len().cmp(&a.placed.len()))
                .then(a.value.cmp(&b.value))
        });
        let domains = trials.iter().map(|t| t.verdict(need, false)).collect();
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
            // Every domain's preemption is found, and the one whose victims cost least
            // wins (on a tie, the domain tried first).
            let mut best: Option<(VictimCost, usize, Vec<Preempted>)> = None;
            for (k, t) in trials.iter().enumerate().filter(|(_, t)| t.skipped.is_none()) {
                let failed: Vec<&Attempt> = t.failed.iter().map(|f| &members[f.0]).collect();
                let scratch = t.scratch.clone().unwrap_or_else(|| self.snapshot.clone());
                if let Some(p) = self.preempt_members(scratch, &failed, Some(&t.within)) {
                    let cost = VictimCost::of(&p);
                    if best.as_ref().is_none_or(|(c, ..)| cost < *c) {
                        best = Some((cost, k, p));
                    }
                }
            }
            if let Some((_, k, p)) = best {
                let (placed, failed) = (trials[k].placed.clone(), trials[k].failed.clone());
                return Outcome { placed, failed, preemptions: Some(p), message: Some(message), domains };
            }
        }
        let (placed, failed) = match trials.into_iter().next() {
            Some(t) if t.skipped.is_none() => (t.placed, t.failed),
            _ => (Vec::new(), (0..members.len()).map(|i| (i, message.clone(), vec![COSCHEDULING])).collect()),
        };
        Outcome { placed, failed, preemptions: None, message: Some(message), domains }
    }
}

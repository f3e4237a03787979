//! DefaultPreemption: when a pod fits nowhere, find a node where evicting lower-priority
//! pods makes it fit, choose the victims and the node as kube-scheduler v1.36 does.
//!
//! The flow: [`eligible`] (preemptionPolicy, a terminating victim on the nominated node),
//! the nodes whose filter status was `Unschedulable` are dry-run from a random offset
//! ([`victims::select_victims`]: remove every lower-priority pod, check the pod fits,
//! reprieve victims most important first, PDB-violating ones first), up to
//! `minCandidateNodes{Percentage,Absolute}` candidates, then [`pick_one`] applies the
//! tie-breaks. The result is a candidate to act on, or PostFilter's message.
//! [`DefaultPreemption`] is the PostFilter plugin that runs it.

mod fewest;
mod victims;

use std::collections::BTreeMap;

use rand::{Rng, RngCore};

pub use crate::budgets::Budget;
pub use fewest::fewest_victims;
pub use victims::{Judge, evict, put_node, select_victims, select_victims_with};

pub use crate::framework::Candidate;
use crate::framework::{Evaluation, FitSummary, PostFilterPlugin, PostFilterResult, Profile};
use crate::pod_info::PodInfo;
use crate::snapshot::Snapshot;
use crate::status::{Code, Status};

/// Plugin name.
pub const NAME: &str = "DefaultPreemption";
/// The reason of nodes that were never dry-run.
pub const NOT_HELPFUL: &str = "Preemption is not helpful for scheduling";
/// The reason of nodes without lower-priority pods.
pub const NO_VICTIMS: &str = "No preemption victims found for incoming pod";

/// `DefaultPreemptionArgs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PreemptionArgs {
    /// At least this share of the potential nodes is dry-run (default 10).
    pub min_candidate_nodes_percentage: u32,
    /// At least this many potential nodes are dry-run (default 100).
    pub min_candidate_nodes_absolute: u32,
}

impl Default for PreemptionArgs {
    fn default() -> Self {
        PreemptionArgs { min_candidate_nodes_percentage: 10, min_candidate_nodes_absolute: 100 }
    }
}

impl PreemptionArgs {
    /// How many candidates to look for among `n` potential nodes.
    pub fn num_candidates(&self, n: usize) -> usize {
        let k = n * self.min_candidate_nodes_percentage as usize / 100;
        k.max(self.min_candidate_nodes_absolute as usize).min(n)
    }

    /// `DefaultPreemptionArgs` from configuration (`apiVersion` and `kind` ignored; none
    /// gives the defaults), validated as kube-scheduler validates them.
    pub fn from_args(args: Option<&serde_json::Value>) -> Result<Self, String> {
        let mut out = PreemptionArgs::default();
        let Some(v) = args.filter(|v| !v.is_null()) else { return Ok(out) };
        let field = |key: &str, default: u32| -> Result<u32, String> {
            match v.get(key) {
                None | Some(serde_json::Value::Null) => Ok(default),
                Some(x) => x
                    .as_u64()
                    .and_then(|n| u32::try_from(n).ok())
                    .ok_or_else(|| format!("DefaultPreemptionArgs.{key}: Invalid value: {x}")),
            }
        };
        out.min_candidate_nodes_percentage = field("minCandidateNodesPercentage", out.min_candidate_nodes_percentage)?;
        out.min_candidate_nodes_absolute = field("minCandidateNodesAbsolute", out.min_candidate_nodes_absolute)?;
        out.validate().map_err(|e| format!("DefaultPreemptionArgs.{e}"))?;
        Ok(out)
    }

    /// kube-scheduler's validation of the arguments.
    pub fn validate(&self) -> Result<(), String> {
        if self.min_candidate_nodes_percentage > 100 {
            return Err(format!(
                "minCandidateNodesPercentage: Invalid value: {}: not in valid range [0, 100]",
                self.min_candidate_nodes_percentage
            ));
        }
        if self.min_candidate_nodes_percentage == 0 && self.min_candidate_nodes_absolute == 0 {
            return Err("minCandidateNodesPercentage: Invalid value: 0: cannot be zero at the same time as minCandidateNodesAbsolute".into());
        }
        Ok(())
    }
}

/// DefaultPreemption as a PostFilter plugin: [`preempt`], its reasons behind
/// `preemption: ` as kube-scheduler writes them.
#[derive(Debug, Clone, Copy, Default)]
pub struct DefaultPreemption {
    /// Its arguments.
    pub args: PreemptionArgs,
}

impl PostFilterPlugin for DefaultPreemption {
    fn name(&self) -> &'static str {
        NAME
    }

    fn post_filter(
        &self,
        profile: &Profile,
        pod: &PodInfo,
        snapshot: &mut Snapshot,
        ev: &Evaluation,
        mut rng: &mut dyn RngCore,
    ) -> PostFilterResult {
        let budgets = snapshot.budgets.clone();
        match preempt(profile, pod, snapshot, ev, &budgets, &self.args, &mut rng) {
            PostFilterResult::Unschedulable { message, clear } => {
                PostFilterResult::Unschedulable { message: format!("preemption: {message}"), clear }
            }
            other => other,
        }
    }
}

/// Whether `pod` may preempt at all (kube-scheduler's PodEligibleToPreemptOthers); the
/// reason when not. `nominated_status` is the code the current attempt gave the pod's
/// nominated node (`None`: not judged).
pub fn eligible(pod: &PodInfo, nominated_status: Option<Code>, snapshot: &Snapshot) -> Result<(), String> {
    if pod.never_preempts {
        return Err("not eligible due to preemptionPolicy=Never.".into());
    }
    let Some(nominated) = &pod.nominated_node else { return Ok(()) };
    if nominated_status == Some(Code::UnschedulableAndUnresolvable) {
        return Ok(());
    }
    let Some(node) = snapshot.node(nominated) else { return Ok(()) };
    let victim_leaving =
        node.pods.iter().any(|p| p.priority < pod.priority && p.terminating && p.preempted_by_scheduler);
    if victim_leaving {
        return Err("not eligible due to a terminating pod on the nominated node.".into());
    }
    Ok(())
}

/// Runs DefaultPreemption for `pod`, which fit nowhere in `ev`: a nomination, or why
/// preemption does not help (an internal error of the dry runs included). `snapshot` is
/// changed during the dry runs and restored before returning.
pub fn preempt(
    profile: &Profile,
    pod: &PodInfo,
    snapshot: &mut Snapshot,
    ev: &Evaluation,
    budgets: &[Budget],
    args: &PreemptionArgs,
    rng: &mut impl Rng,
) -> PostFilterResult {
    let nominated_status = pod
        .nominated_node
        .as_ref()
        .and_then(|n| snapshot.index.get(n))
        .and_then(|&i| ev.rejected.iter().find(|(j, _)| *j == i).map(|(_, st)| st.code));
    if let Err(message) = eligible(pod, nominated_status, snapshot) {
        return PostFilterResult::Unschedulable { message, clear: false };
    }
    let potential: Vec<usize> = match &ev.prefilter_rejection {
        Some(st) if st.code == Code::Unschedulable => (0..snapshot.len()).collect(),
        Some(_) => Vec::new(),
        None => ev.rejected.iter().filter(|(_, st)| st.code == Code::Unschedulable).map(|(i, _)| i).collect(),
    };
    let offset = if potential.is_empty() { 0 } else { rng.random_range(0..potential.len()) };
    let found = dry_run(profile, pod, snapshot, &potential, offset, budgets, args);
    conclude(profile, pod, snapshot, found)
}

/// What dry runs that found `found` lead to: a nomination to the best candidate the
/// extenders agree with, or why preemption does not help (an internal error of the dry
/// runs included; nodes never dry-run count as not helpful).
pub fn conclude(profile: &Profile, pod: &PodInfo, snapshot: &Snapshot, found: DryRun) -> PostFilterResult {
    let DryRun { candidates: found, statuses, mut errors } = found;
    let all = snapshot.len();
    if found.is_empty() {
        if !errors.is_empty() {
            let message = if errors.len() == 1 { errors.remove(0) } else { format!("[{}]", errors.join(", ")) };
            return PostFilterResult::Unschedulable { message, clear: false };
        }
        let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
        for st in statuses.values() {
            for r in &st.reasons {
                *reasons.entry(r.to_string()).or_default() += 1;
            }
        }
        if statuses.len() < all {
            *reasons.entry(NOT_HELPFUL.to_string()).or_default() += all - statuses.len();
        }
        let summary = FitSummary { num_nodes: all, reasons, prefilter_message: None };
        return PostFilterResult::Unschedulable { message: summary.message(), clear: true };
    }
    let found = match &profile.extenders {
        Some(x) => match x.preempt(pod, snapshot, found) {
            Ok(found) => found,
            Err(message) => return PostFilterResult::Stopped(message),
        },
        None => found,
    };
    if found.is_empty() {
        return PostFilterResult::Unschedulable { message: "no candidate node for preemption".into(), clear: false };
    }
    PostFilterResult::Nominate(pick_one(found))
}

/// What the dry runs found.
#[derive(Debug, Default)]
pub struct DryRun {
    /// Candidates without PDB violations first, then the others, each in visit order.
    pub candidates: Vec<Candidate>,
    /// The status of each node that is no candidate.
    pub statuses: BTreeMap<usize, Status>,
    /// Internal errors met.
    pub errors: Vec<String>,
}

/// Dry-runs the `potential` nodes from `offset` (wrapping), keeping at most
/// [`PreemptionArgs::num_candidates`] candidates of each kind and stopping once there is
/// one without violations and enough in all (kube-scheduler's DryRunPreemption).
pub fn dry_run(
    profile: &Profile,
    pod: &PodInfo,
    snapshot: &mut Snapshot,
    potential: &[usize],
    offset: usize,
    budgets: &[Budget],
    args: &PreemptionArgs,
) -> DryRun {
    let mut out = DryRun::default();
    let n = potential.len();
    if n == 0 {
        return out;
    }
    let wanted = args.num_candidates(n);
    let (mut clean, mut violating) = (Vec::new(), Vec::new());
    let judge = Judge::new(profile, pod, snapshot);
    for k in 0..n {
        let i = potential[(offset + k) % n];
        match select_victims_with(&judge, pod, snapshot, i, budgets) {
            Ok((victims, _)) if victims.is_empty() => {
                let msg = format!("expected at least one victim pod on node {:?}", snapshot.nodes[i].name);
                out.errors.push(msg.clone());
                out.statuses.insert(i, Status::error(msg));
            }
            Ok((victims, pdb_violations)) => {
                let list = if pdb_violations == 0 { &mut clean } else { &mut violating };
                if list.len() < wanted {
                    list.push(Candidate { node: i, victims, pdb_violations });
                }
                if !clean.is_empty() && clean.len() + violating.len() >= wanted {
                    break;
                }
            }
            Err(st) => {
                if st.code == Code::Error {
                    out.errors.push(st.message());
                }
                out.statuses.insert(i, st);
            }
        }
    }
    out.candidates = clean.into_iter().chain(violating).collect();
    out
}

/// kube-scheduler's `MoreImportantPod`: higher priority, then earlier start (unset: now).
pub fn more_important(a: &PodInfo, b: &PodInfo) -> std::cmp::Ordering {
    b.priority.cmp(&a.priority).then_with(|| start(a).cmp(&start(b)))
}

fn start(p: &PodInfo) -> i128 {
    p.started_nanos.unwrap_or(i128::MAX)
}

/// Chooses among candidates: fewest PDB violations, lowest highest-victim priority,
/// smallest sum of (priority + 2^31), fewest victims, latest earliest start among the
/// highest-priority victims, then the first.
pub fn pick_one(mut candidates: Vec<Candidate>) -> Candidate {
    type Score = fn(&Candidate) -> i128;
    let scores: [Score; 5] = [
        |c| -(c.pdb_violations as i128),
        |c| -(c.victims.first().map_or(0, |p| p.priority) as i128),
        |c| -c.victims.iter().map(|p| p.priority as i128 + (1i128 << 31)).sum::<i128>(),
        |c| -(c.victims.len() as i128),
        |c| {
            let Some(top) = c.victims.iter().map(|p| p.priority).max() else { return i128::MIN };
            c.victims.iter().filter(|p| p.priority == top).map(|p| start(p)).min().unwrap_or(i128::MAX)
        },
    ];
    for score in scores {
        if candidates.len() <= 1 {
            break;
        }
        let best = candidates.iter().map(score).max().unwrap_or(0);
        candidates.retain(|c| score(c) == best);
    }
    candidates.swap_remove(0)
}

#[cfg(test)]
mod tests;

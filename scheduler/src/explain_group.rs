//! `explain` for a member of a topology-constrained pod group: the group's pending
//! members judged together by the scheduling loop's own gang cycle, and every candidate
//! domain's verdict.

use std::sync::Arc;
use std::time::Instant;

use algorithms::{PodInfo, Profile};

use crate::cluster::ParsedCluster;
use crate::engine::{Cycler, Engine};
use crate::explain::{DomainRow, GroupExplain};
use crate::gang;

/// How `pod`'s group would be placed, when `pod` belongs to a group held to one domain
/// of a node label; `None` otherwise. `cluster` is loaded without `pod` bound.
pub fn explain_group(profiles: &[Profile], cluster: ParsedCluster, pod: &PodInfo, seed: u64) -> Option<GroupExplain> {
    let mut engine = Engine::new(profiles.to_vec());
    let (pending, _) = crate::simulate::load(&mut engine, cluster);
    let (group, spec) = engine.groups.gang_of(pod)?;
    let key = spec.topology_key.clone()?;
    let api = gang::api_of(pod);
    let now = Instant::now();
    let member = |p: &PodInfo| gang::api_of(p) == api && gang::is_member(p, &group);
    let mut pods: Vec<PodInfo> = pending.into_iter().filter(|p| member(p) && p.key() != pod.key()).collect();
    let mut first = pod.clone();
    if !profiles.iter().any(|p| p.scheduler_name == first.scheduler_name) {
        // Explained with the first profile, as the pod alone is.
        first.scheduler_name = profiles.first()?.scheduler_name.clone();
    }
    pods.insert(0, first);
    let members = pods.len();
    for p in pods {
        engine.enqueue(Arc::new(p), now);
    }
    let mut cycler = Cycler::new(&engine, seed);
    let attempt = match cycler.begin(&mut engine, now)? {
        Ok(a) => a,
        Err(_) => return None,
    };
    let weights: Vec<(String, i64)> = {
        let profile = cycler.profile_of(&attempt);
        profile.placement_scores.iter().map(|w| (w.scorer.name().to_string(), w.weight)).collect()
    };
    let mut out = GroupExplain {
        group: group.clone(),
        topology_key: key,
        members,
        need: spec.min_member as usize,
        chosen: None,
        placements: Default::default(),
        message: None,
        domains: Vec::new(),
        weights,
    };
    let plan = match cycler.begin_group(&mut engine, attempt, &group, &spec, now) {
        Ok(a) => cycler.evaluate_group(a),
        Err(parked) => {
            if let crate::engine::Outcome::Unschedulable { message, .. } = parked.outcome {
                out.message = Some(message);
            }
            return Some(out);
        }
    };
    out.need = plan.need();
    out.message = plan.message().map(str::to_string);
    let ns = &pod.namespace;
    let placed = plan.placed();
    if placed.len() >= plan.need() {
        out.placements = placed.into_iter().map(|(name, node)| (format!("{ns}/{name}"), node)).collect();
    }
    out.domains = plan
        .domains()
        .iter()
        .map(|d| DomainRow {
            domain: d.domain.clone(),
            nodes: d.nodes,
            verdict: d.verdict.as_str().to_string(),
            placed: d.placed,
            reason: d.reason.clone(),
            scores: d.scores.iter().flat_map(|s| s.plugins.iter().map(|(p, v)| (p.to_string(), *v))).collect(),
            total: d.scores.as_ref().map(|s| s.total),
        })
        .collect();
    out.chosen = plan.domains().iter().find(|d| d.verdict == crate::engine::Verdict::Chosen).map(|d| d.domain.clone());
    Some(out)
}

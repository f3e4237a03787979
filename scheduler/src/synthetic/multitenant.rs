//! MultiTenantGPU: a GPU cluster shared by teams under a quota tree, in virtual time.
//!
//! 512 nodes of 8 GPUs (by default; `--nodes` scales it). Two departments (each
//! guaranteed half the GPUs) over three teams each, with different guarantees and
//! weights (`TEAMS`); every quota may borrow up to the whole cluster. Each team submits
//! jobs at random over eight hours of one-minute steps: single pods of 1, 2, 4 or 8 GPUs,
//! and gangs of 2 to 4 pods of 8 GPUs, running 20 to 90 minutes; team `b3` is idle for the
//! first half, then submits about the cluster's worth of GPUs at once, and then jobs at
//! the others' rate. The observer measures what the
//! quotas are for: GPU allocation, each team's GPUs against its fair share at that moment
//! (the runtime share its guarantee, weight and demand give it), how long a team within
//! its guarantee waits for its pods, victims per reclaim, quotas over `max` and gangs
//! placed in part.

use std::collections::{BTreeMap, HashMap};

use algorithms::PodInfo;
use algorithms::builders::{NodeBuilder, PodBuilder};
use algorithms::quotas::api::ElasticQuotaSpec;
use algorithms::quotas::tree::{IS_PARENT_LABEL, PARENT_LABEL, SHARED_WEIGHT_ANNOTATION};
use algorithms::quotas::{ElasticQuota, Quota, QuotaObjects, QuotaState, runtime};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

use super::namespace;
use super::workloads::{GPU, POD_GROUP_LABEL, SCHEDULER, Workload};
use crate::engine::Engine;
use crate::simulate::{Observer, PreemptionRecord, Timeline};

/// The workload's name.
pub const NAME: &str = "MultiTenantGPU";
/// Nodes by default.
pub const NODES: usize = 512;
/// Steps of one minute.
const STEPS: usize = 480;
/// GPUs a node.
const NODE_GPUS: i64 = 8;
/// Jobs team `b3` submits at once when it wakes (at 512 nodes; about 4,000 GPUs).
const BURST_JOBS: usize = 340;

/// (team, department, share of the department's guarantee in eighths, weight, jobs a
/// step when active).
const TEAMS: &[(&str, &str, i64, i64, f64)] = &[
    ("a1", "dept-a", 4, 2, 1.0),
    ("a2", "dept-a", 2, 1, 1.0),
    ("a3", "dept-a", 2, 1, 1.0),
    ("b1", "dept-b", 4, 1, 1.0),
    ("b2", "dept-b", 2, 1, 1.0),
    ("b3", "dept-b", 2, 3, 1.0),
];

fn quota(name: &str, ns: &str, min: i64, max: i64, parent: Option<&str>, weight: Option<i64>) -> Quota {
    let gpus = |v: i64| Some([(GPU.to_string(), Quantity(v.to_string()))].into_iter().collect());
    let mut labels = BTreeMap::new();
    match parent {
        Some(p) => {
            labels.insert(PARENT_LABEL.to_string(), p.to_string());
        }
        None => {
            labels.insert(IS_PARENT_LABEL.to_string(), "true".to_string());
        }
    }
    let annotations = weight.map(|w| [(SHARED_WEIGHT_ANNOTATION.to_string(), format!("{{\"{GPU}\": {w}}}"))].into());
    let api = ElasticQuota {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(ns.into()),
            labels: Some(labels),
            annotations,
            ..Default::default()
        },
        spec: ElasticQuotaSpec { min: gpus(min), max: gpus(max) },
        status: None,
    };
    // The amounts are whole numbers: they read.
    Quota::from_api(&api).unwrap_or_else(|_| Quota {
        name: name.into(),
        namespace: ns.into(),
        min: Default::default(),
        max: Default::default(),
        tree: Default::default(),
    })
}

/// The workload: nodes, namespaces and quotas, and its timeline.
pub fn generate(nodes: Option<usize>, seed: u64) -> (Workload, Timeline) {
    let n = nodes.unwrap_or(NODES).max(1);
    let capacity = n as i64 * NODE_GPUS;
    let mut w = Workload { name: NAME.to_string(), ..Default::default() };
    w.cluster.nodes = (0..n)
        .map(|i| {
            NodeBuilder::new(&format!("gpu-{i}"))
                .capacity("64", "512Gi", "110")
                .resource(GPU, &NODE_GPUS.to_string())
                .label("topology.kubernetes.io/rack", &format!("rack-{}", i / 32))
                .build()
        })
        .collect();
    let mut state = QuotaState::default();
    for dept in ["dept-a", "dept-b"] {
        let _ = state.upsert(quota(dept, "quota-system", capacity / 2, capacity, None, None));
    }
    w.cluster.namespaces = vec![namespace("quota-system", &[])];
    for &(team, dept, eighths, weight, _) in TEAMS {
        w.cluster.namespaces.push(namespace(team, &[]));
        let _ = state.upsert(quota(team, team, capacity / 2 * eighths / 8, capacity, Some(dept), Some(weight)));
    }
    w.quotas = Some(state.clone());
    let mut rng = StdRng::seed_from_u64(seed);
    let mut arrivals: Vec<Vec<PodInfo>> = vec![Vec::new(); STEPS];
    let mut runs_for = HashMap::new();
    let mut groups: HashMap<String, usize> = HashMap::new();
    let mut seq = 0usize;
    // Rates scale with the cluster: about 0.8 of its GPUs asked for in the first half, about
    // all of them in the second, on top of the burst.
    let scale = n as f64 / NODES as f64;
    for (k, step) in arrivals.iter_mut().enumerate() {
        for &(team, _, _, _, rate) in TEAMS {
            let active = team != "b3" || k >= STEPS / 2;
            if !active {
                continue;
            }
            let mut jobs = rate * 1.05 * scale;
            if team == "b3" && k == STEPS / 2 {
                // The burst: about as many GPUs as the cluster has, at once.
                jobs += BURST_JOBS as f64 * scale;
            }
            while jobs > 0.0 {
                if rng.random::<f64>() >= jobs.min(1.0) {
                    break;
                }
                jobs -= 1.0;
                seq += 1;
                let minutes = rng.random_range(20..=90);
                let gang = rng.random::<f64>() < 0.4;
                let (members, gpus) =
                    if gang { (rng.random_range(2..=4), 8) } else { (1, [1, 2, 4, 8][rng.random_range(0..4)]) };
                let job = format!("job-{seq}");
                if gang {
                    groups.insert(format!("{team}/{job}"), members);
                    w.pod_groups.push((format!("{team}/{job}"), members as u32));
                }
                for m in 0..members {
                    let mut b = PodBuilder::new(&format!("{job}-{m}"))
                        .namespace(team)
                        .scheduler(SCHEDULER)
                        .req("1", "4Gi")
                        .device(GPU, &gpus.to_string());
                    if gang {
                        b = b.label(POD_GROUP_LABEL, &job);
                    }
                    let Ok(pod) = PodInfo::from_pod(&b.build()) else { continue };
                    runs_for.insert(pod.key(), minutes);
                    step.push(pod);
                }
            }
        }
    }
    let observer = Watch::new(state, capacity, groups);
    let timeline =
        Timeline { step: std::time::Duration::from_secs(60), arrivals, runs_for, observer: Box::new(observer) };
    (w, timeline)
}

/// The GPUs a pod asks for.
fn gpus(p: &PodInfo) -> i64 {
    p.requests.requests.get(GPU)
}

/// What the observer keeps.
struct Watch {
    quotas: QuotaState,
    capacity: i64,
    groups: HashMap<String, usize>,
    /// Per step: GPUs allocated.
    allocated: Vec<i64>,
    /// Per team: the largest gap (GPUs) between its use and its fair share, and the
    /// longest run of steps it stayed over a twentieth of the cluster.
    gaps: BTreeMap<String, (i64, usize, usize)>,
    /// Pods of teams within their guarantee when they arrived, by key: their arrival step.
    guaranteed: HashMap<String, usize>,
    /// Steps from arrival to bound of those.
    waits: Vec<usize>,
    /// Each team's GPUs at the end of the last step.
    last_used: HashMap<String, i64>,
    /// Per reclaim: its victims, and the fewest pods of its node that would have sufficed.
    victims: Vec<(usize, Option<usize>)>,
    over_max: usize,
    partial_gangs: usize,
}

impl Watch {
    fn new(quotas: QuotaState, capacity: i64, groups: HashMap<String, usize>) -> Self {
        Watch {
            quotas,
            capacity,
            groups,
            allocated: Vec::new(),
            gaps: BTreeMap::new(),
            guaranteed: HashMap::new(),
            waits: Vec::new(),
            last_used: HashMap::new(),
            victims: Vec::new(),
            over_max: 0,
            partial_gangs: 0,
        }
    }
}

fn percentile(sorted: &[usize], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[i.min(sorted.len() - 1)] as f64
}

impl Observer for Watch {
    fn observe(
        &mut self,
        engine: &Engine,
        step: usize,
        arrived: &[PodInfo],
        bound: &[String],
        preemptions: &[PreemptionRecord],
    ) {
        // Pods that arrived within their team's guarantee, as the team stood then.
        let mut asked: HashMap<&str, i64> = HashMap::new();
        for p in arrived {
            let team = p.namespace.as_str();
            let min = self.quotas.named(team).map_or(0, |q| q.min.get(GPU));
            let before = self.last_used.get(team).copied().unwrap_or(0) + asked.get(team).copied().unwrap_or(0);
            *asked.entry(team).or_default() += gpus(p);
            if before + gpus(p) <= min {
                self.guaranteed.insert(p.key(), step);
            }
        }
        let snap = engine.cache.full_snapshot();
        let mut used: HashMap<String, i64> = HashMap::new();
        let mut placed: HashMap<String, usize> = HashMap::new();
        for p in snap.nodes.iter().flat_map(|n| n.pods.iter()) {
            *used.entry(p.namespace.clone()).or_default() += gpus(p);
            if let Some(g) = p.group_name() {
                *placed.entry(format!("{}/{g}", p.namespace)).or_default() += 1;
            }
        }
        self.allocated.push(used.values().sum());
        self.partial_gangs +=
            placed.iter().filter(|(g, n)| self.groups.get(*g).is_some_and(|need| **n < *need)).count();
        // Fair shares now: the quotas' guarantees and weights, and their demand (what
        // runs and what waits).
        let mut state = snap.objects.quotas().clone();
        if state.is_empty() {
            // Quotas off: the shares they would give, with the same demand.
            state = self.quotas.clone();
            for p in snap.nodes.iter().flat_map(|n| n.pods.iter()) {
                state.charge_pod(p, algorithms::dra::DraObjects::dra(&*snap.objects));
            }
        }
        state.set_waiting(&mut engine.queue.pods());
        let total =
            algorithms::resource::Resource { scalar: vec![(GPU.to_string(), self.capacity)], ..Default::default() };
        let shares = runtime::shares(&state, &total);
        for &(team, ..) in TEAMS {
            let u = used.get(team).copied().unwrap_or(0);
            let share = shares.get(team).map_or(0, |r| r.get(GPU));
            let max = self.quotas.named(team).map_or(i64::MAX, |q| q.max.get(GPU));
            self.over_max += usize::from(u > max);
            let gap = (u - share).abs();
            let e = self.gaps.entry(team.to_string()).or_insert((0, 0, 0));
            e.0 = e.0.max(gap);
            e.1 = if gap * 20 > self.capacity { e.1 + 1 } else { 0 };
            e.2 = e.2.max(e.1);
        }
        for key in bound {
            if let Some(at) = self.guaranteed.remove(key) {
                self.waits.push(step - at);
            }
        }
        self.last_used = used;
        self.victims.extend(preemptions.iter().map(|p| (p.victims.len(), p.fewest)));
    }

    fn summary(&self) -> serde_json::Value {
        let warm = self.allocated.len() / 10;
        let steady = &self.allocated[warm.min(self.allocated.len())..];
        let mean = steady.iter().sum::<i64>() as f64 / steady.len().max(1) as f64;
        let mut waits = self.waits.clone();
        waits.sort_unstable();
        let reclaims = self.victims.len().max(1) as f64;
        let victims_mean = self.victims.iter().map(|v| v.0).sum::<usize>() as f64 / reclaims;
        let measured: Vec<(usize, usize)> = self.victims.iter().filter_map(|&(v, f)| Some((v, f?))).collect();
        let fewest_mean = measured.iter().map(|m| m.1).sum::<usize>() as f64 / measured.len().max(1) as f64;
        let over = measured.iter().filter(|(v, f)| v > f).count();
        let gaps: BTreeMap<&String, serde_json::Value> = self
            .gaps
            .iter()
            .map(|(t, (gap, _, longest))| (t, json!({"largestGapGpus": gap, "longestOverTwentiethMinutes": longest})))
            .collect();
        json!({
            "gpus": self.capacity,
            "allocatedMeanPercent": 100.0 * mean / self.capacity as f64,
            "allocatedMinPercent": 100.0 * steady.iter().copied().min().unwrap_or(0) as f64 / self.capacity as f64,
            "teams": gaps,
            "guaranteedWaitMinutes": {"count": waits.len(), "p50": percentile(&waits, 50.0), "p99": percentile(&waits, 99.0)},
            "reclaims": self.victims.len(),
            "victimsPerReclaim": {"mean": victims_mean, "max": self.victims.iter().map(|v| v.0).max().unwrap_or(0),
                "fewestMean": fewest_mean, "measured": measured.len(), "moreThanFewest": over},
            "quotasOverMax": self.over_max,
            "gangsPlacedInPart": self.partial_gangs,
        })
    }

    fn lines(&self) -> Vec<String> {
        let s = self.summary();
        let mut lines = vec![format!(
            "GPUs allocated: mean {:.1}%, lowest {:.1}% (after the first tenth); reclaims {} ({:.2} victims each, at most {}; the fewest that would have sufficed {:.2}, exceeded in {} of {}); quotas over max: {}; gangs placed in part: {}",
            s["allocatedMeanPercent"].as_f64().unwrap_or(0.0),
            s["allocatedMinPercent"].as_f64().unwrap_or(0.0),
            s["reclaims"],
            s["victimsPerReclaim"]["mean"].as_f64().unwrap_or(0.0),
            s["victimsPerReclaim"]["max"],
            s["victimsPerReclaim"]["fewestMean"].as_f64().unwrap_or(0.0),
            s["victimsPerReclaim"]["moreThanFewest"],
            s["victimsPerReclaim"]["measured"],
            s["quotasOverMax"],
            s["gangsPlacedInPart"],
        )];
        lines.push(format!(
            "Pods of teams within their guarantee: {} waited p50 {} min, p99 {} min",
            s["guaranteedWaitMinutes"]["count"], s["guaranteedWaitMinutes"]["p50"], s["guaranteedWaitMinutes"]["p99"]
        ));
        for (team, (gap, _, longest)) in &self.gaps {
            lines.push(format!(
                "team {team}: largest gap to its fair share {gap} GPUs; longest over 5% of the cluster {longest} min"
            ));
        }
        lines
    }
}

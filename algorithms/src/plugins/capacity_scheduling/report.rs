//! What quotas report of a simulation: each namespace's quota with its use at the end,
//! and, over the run, each quota's use in its tree against its guarantee and its runtime
//! share, in the resources its `max` names (one point per report: per drain of the
//! queue, per step of a timeline).

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use serde_json::{Value, json};

use super::{amounts, limits};
use crate::framework::ApiWrite;
use crate::objects::ClusterObjects;
use crate::owners::{Chart, ChartLine, Controller, Reported, World};
use crate::quotas::{Quota, QuotaObjects, QuotaState, runtime};
use crate::resource::Resource;

/// One point of a quota's figures in one resource: used, runtime share, min.
type Point = (usize, [f64; 3]);

/// The quotas' report (they ask for no writes).
#[derive(Debug, Default)]
pub(super) struct QuotaReport {
    /// The points so far, by quota (`namespace/name`) and resource, and how many reports
    /// were made.
    history: Mutex<(BTreeMap<(String, String), Vec<Point>>, usize)>,
}

impl Controller for QuotaReport {
    fn apply(&self, _write: &ApiWrite, _world: &mut World<'_>) -> Option<Result<u64, String>> {
        None
    }

    fn report(&self, objects: &ClusterObjects, allocatable: &Resource) -> Reported {
        let state = objects.quotas();
        let mut quotas: Vec<&Quota> = state.quotas().collect();
        if quotas.is_empty() && state.all_named().next().is_none() {
            return Reported::default();
        }
        quotas.sort_by_key(|q| q.key());
        let mut lines = Vec::new();
        let mut rows = Vec::new();
        for q in quotas {
            let used = state.used(&q.namespace);
            lines.push(format!(
                "quota {}: used {} (min {}; max {})",
                q.key(),
                amounts(used, false),
                amounts(&q.min, true),
                limits(&q.max)
            ));
            rows.push(json!({
                "quota": q.key(),
                "used": amounts(used, false),
                "min": amounts(&q.min, true),
                "max": limits(&q.max),
            }));
        }
        let charts = self.charts(objects, allocatable);
        Reported { fields: vec![("quotas", Value::Array(rows))], lines, charts }
    }
}

impl QuotaReport {
    /// Adds this report's point to every quota's history; the charts of those with more
    /// than one point.
    fn charts(&self, objects: &ClusterObjects, allocatable: &Resource) -> Vec<Chart> {
        let state = objects.quotas();
        let shares = runtime::shares(state, allocatable);
        let used = in_tree(state);
        let mut history = self.history.lock().unwrap_or_else(|e| e.into_inner());
        let (series, reports) = &mut *history;
        let step = *reports;
        *reports += 1;
        for q in state.all_named() {
            let share = shares.get(&q.name).cloned().unwrap_or_default();
            let use_ = used.get(q.name.as_str()).cloned().unwrap_or_default();
            let figure =
                |r: &Resource, name: &str| resources(r).into_iter().find(|(n, _)| n == name).map_or(0.0, |(_, v)| v);
            for name in &q.tree.limited {
                let point = [figure(&use_, name), figure(&share, name), figure(&q.min, name)];
                series.entry((q.key(), name.clone())).or_default().push((step, point));
            }
        }
        series
            .iter()
            .filter(|(_, points)| points.len() > 1)
            .map(|((quota, resource), points)| Chart {
                title: format!("quota {quota}: {resource}"),
                lines: ["used", "runtime share", "min"]
                    .iter()
                    .enumerate()
                    .map(|(k, name)| ChartLine {
                        name: name.to_string(),
                        points: points.iter().map(|(at, p)| (*at, p[k])).collect(),
                    })
                    .collect(),
            })
            .collect()
    }
}

/// What each quota of a tree uses in it, by name: its own pods' requests, and for a
/// parent its children's.
pub(super) fn in_tree(state: &QuotaState) -> HashMap<&str, Resource> {
    let mut in_tree: HashMap<&str, Resource> = HashMap::new();
    let depth = state.all_named().count();
    for q in state.all_named() {
        let used = state.used_by(&q.name);
        let mut at = Some(q);
        for _ in 0..=depth {
            let Some(x) = at else { break };
            in_tree.entry(x.name.as_str()).or_default().add(used);
            at = state.parent_of(x);
        }
    }
    in_tree
}

/// Each finite amount in the API's units (CPU in cores, the rest as counted).
pub(super) fn resources(r: &Resource) -> Vec<(String, f64)> {
    use crate::resource::{CPU, EPHEMERAL_STORAGE, MEMORY};
    let fixed = [(CPU, r.milli_cpu), (MEMORY, r.memory), (EPHEMERAL_STORAGE, r.ephemeral_storage)];
    let named = r.scalar.iter().map(|(n, v)| (n.as_str(), *v));
    fixed
        .into_iter()
        .chain(named)
        .filter(|&(_, v)| v != i64::MAX)
        .map(|(n, v)| (n.to_string(), if n == CPU { v as f64 / 1000.0 } else { v as f64 }))
        .collect()
}

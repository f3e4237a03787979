//! Runtime shares of a quota tree, as Koordinator's elastic quota computes them: for
//! each parent (the cluster at the top) and each resource on its own, every child with
//! demand gets its `min` (scaled down together when the children's mins add up to more
//! than the parent has), a child asking less gets what it asks (or its `min` if it does
//! not lend), and what is left is divided among the children still asking in proportion
//! to their weights, in whole units (largest remainders first, ties to the first name),
//! each capped at what it asks, until nothing is left or nobody asks for more.

use super::{Quota, QuotaState};
use crate::resource::Resource;

/// One child of a parent, in one resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Child<'a> {
    /// Its name (ties in the division go to the first).
    pub name: &'a str,
    /// Its guarantee.
    pub min: i64,
    /// What it asks for: its pods' requests, capped at its `max`.
    pub request: i64,
    /// Its weight in dividing what is left.
    pub weight: i64,
    /// Whether its idle guarantee may go to its siblings.
    pub lends: bool,
}

/// Each child's runtime share of `total`, in the order given.
pub fn divide(total: i64, children: &[Child<'_>]) -> Vec<i64> {
    let mins = scaled_mins(total, children);
    let mut runtime = vec![0i64; children.len()];
    let mut asking: Vec<usize> = Vec::new();
    for (i, c) in children.iter().enumerate() {
        let m = mins[i];
        if c.request > m {
            runtime[i] = m;
            asking.push(i);
        } else {
            runtime[i] = if c.lends { c.request } else { m };
        }
    }
    let mut left = total.saturating_sub(runtime.iter().fold(0i64, |a, r| a.saturating_add(*r)));
    while left > 0 && !asking.is_empty() {
        let weights: i128 = asking.iter().map(|&i| i128::from(children[i].weight.max(0))).sum();
        if weights == 0 {
            break;
        }
        let shares = hamilton(left, &asking, children, weights);
        left = 0;
        let mut still = Vec::new();
        for (k, &i) in asking.iter().enumerate() {
            let got = runtime[i].saturating_add(shares[k]);
            if got < children[i].request {
                runtime[i] = got;
                still.push(i);
            } else {
                left += got - children[i].request;
                runtime[i] = children[i].request;
            }
        }
        if still.len() == asking.len() {
            break;
        }
        asking = still;
    }
    runtime
}

/// `left` divided in proportion to the weights of `asking`, in whole units: each its
/// floor, then one unit each to the largest remainders (ties to the first name).
fn hamilton(left: i64, asking: &[usize], children: &[Child<'_>], weights: i128) -> Vec<i64> {
    let parts: Vec<(i128, i128)> = asking
        .iter()
        .map(|&i| {
            let w = i128::from(children[i].weight.max(0));
            let exact = w * i128::from(left);
            (exact / weights, exact % weights)
        })
        .collect();
    let given: i128 = parts.iter().map(|(q, _)| q).sum();
    let mut order: Vec<usize> = (0..asking.len()).filter(|&k| children[asking[k]].weight > 0).collect();
    order.sort_by(|&a, &b| {
        parts[b].1.cmp(&parts[a].1).then_with(|| children[asking[a]].name.cmp(children[asking[b]].name))
    });
    let mut shares: Vec<i64> = parts.iter().map(|(q, _)| i64::try_from(*q).unwrap_or(i64::MAX)).collect();
    let extra = usize::try_from(i128::from(left) - given).unwrap_or(0);
    for &k in order.iter().take(extra) {
        shares[k] += 1;
    }
    shares
}

/// The children's guarantees, scaled down in proportion when they add up to more than
/// `total`.
fn scaled_mins(total: i64, children: &[Child<'_>]) -> Vec<i64> {
    let sum: i128 = children.iter().map(|c| i128::from(c.min.max(0))).sum();
    if sum <= i128::from(total) {
        return children.iter().map(|c| c.min.max(0)).collect();
    }
    let total = i128::from(total.max(0));
    children.iter().map(|c| i64::try_from(total * i128::from(c.min.max(0)) / sum).unwrap_or(0)).collect()
}

/// Every quota's runtime share of `total` (the cluster's allocatable), by quota name, in
/// the resources its `max` names. A quota's demand is what its placed and waiting pods
/// request (a parent's, its children's, each capped at its `max`); one that does not lend
/// asks at least its `min`. A quota whose parent is unknown (or in a loop) is at the top.
pub fn shares(state: &QuotaState, total: &Resource) -> std::collections::HashMap<String, Resource> {
    let quotas: Vec<&Quota> = {
        let mut all: Vec<&Quota> = state.all_named().collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all
    };
    let parents: std::collections::HashMap<&str, Option<String>> =
        quotas.iter().map(|q| (q.name.as_str(), state.parent_of(q).map(|p| p.name.clone()))).collect();
    let children = |of: Option<&str>| -> Vec<&Quota> {
        quotas.iter().copied().filter(|q| parents[q.name.as_str()].as_deref() == of).collect()
    };
    let mut resources: Vec<&str> = quotas.iter().flat_map(|q| q.tree.limited.iter().map(String::as_str)).collect();
    resources.sort_unstable();
    resources.dedup();
    // Demand, bottom up, capped at each quota's max.
    let mut limited: std::collections::HashMap<&str, Resource> = std::collections::HashMap::new();
    fn demand<'a>(
        q: &'a Quota,
        state: &QuotaState,
        children: &dyn Fn(Option<&str>) -> Vec<&'a Quota>,
        resources: &[&str],
        limited: &mut std::collections::HashMap<&'a str, Resource>,
    ) -> Resource {
        if let Some(r) = limited.get(q.name.as_str()) {
            return r.clone();
        }
        let mut asked = state.used_by(&q.name).clone();
        asked.add(state.waiting(&q.name));
        for c in children(Some(&q.name)) {
            asked.add(&demand(c, state, children, resources, limited));
        }
        let mut out = Resource::default();
        let parent = !children(Some(&q.name)).is_empty();
        for &r in resources {
            // A quota limits what its max names; a parent passes on its children's demand
            // in what it does not limit.
            let named = q.tree.limited.iter().any(|l| l == r);
            let mut v = if named || parent { asked.get(r) } else { 0 };
            if !q.tree.lends {
                v = v.max(q.min.get(r));
            }
            let cap = if named { q.max.get(r) } else { i64::MAX };
            out.set_value(r, v.min(cap).max(0));
        }
        limited.insert(q.name.as_str(), out.clone());
        out
    }
    for q in &quotas {
        demand(q, state, &children, &resources, &mut limited);
    }
    let mut out: std::collections::HashMap<String, Resource> = std::collections::HashMap::new();
    let mut level: Vec<(Option<&str>, Resource)> = vec![(None, total.clone())];
    while let Some((parent, have)) = level.pop() {
        let kids = children(parent);
        if kids.is_empty() {
            continue;
        }
        let mut given: Vec<Resource> = vec![Resource::default(); kids.len()];
        for &r in &resources {
            let line: Vec<Child<'_>> = kids
                .iter()
                .map(|q| {
                    let named = q.tree.limited.iter().any(|l| l == r);
                    Child {
                        name: &q.name,
                        min: if named { q.min.get(r) } else { 0 },
                        request: limited[q.name.as_str()].get(r),
                        weight: match &q.tree.weight {
                            Some(w) => w.get(r),
                            None if named => q.max.get(r),
                            // Not limited here: an equal say.
                            None => 1,
                        },
                        lends: q.tree.lends,
                    }
                })
                .collect();
            for (k, v) in divide(have.get(r), &line).into_iter().enumerate() {
                given[k].set_value(r, v);
            }
        }
        for (q, runtime) in kids.into_iter().zip(given) {
            level.push((Some(q.name.as_str()), runtime.clone()));
            out.insert(q.name.clone(), runtime);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn child(name: &str, min: i64, request: i64, weight: i64) -> Child<'_> {
        Child { name, min, request, weight, lends: true }
    }

    #[test]
    fn the_guarantees_come_first_then_weights_divide_the_rest_up_to_each_request() {
        // (case, total, children (name, min, request, weight), runtimes)
        type Case = (&'static str, i64, Vec<(&'static str, i64, i64, i64)>, Vec<i64>);
        let cases: Vec<Case> = vec![
            (
                "Koordinator's design example",
                100,
                vec![("a", 10, 5, 40), ("b", 15, 20, 60), ("c", 20, 40, 50), ("d", 15, 70, 80)],
                vec![5, 20, 35, 40],
            ),
            (
                "a weightless child keeps its min; what nobody may take stays unshared",
                100,
                vec![("a", 10, 5, 40), ("b", 15, 20, 60), ("c", 20, 40, 50), ("d", 15, 70, 0)],
                vec![5, 20, 40, 15],
            ),
            ("alone, up to what it asks", 120, vec![("t1", 50, 80, 1)], vec![80]),
            ("two alike share evenly", 120, vec![("t1", 50, 80, 1), ("t2", 50, 100, 1)], vec![60, 60]),
            ("an idle child lends its guarantee", 100, vec![("t1", 60, 0, 1), ("t2", 50, 90, 1)], vec![0, 90]),
            ("a child within its min gets what it asks", 100, vec![("t1", 60, 30, 1), ("t2", 50, 90, 1)], vec![30, 70]),
            (
                "guarantees past the total are scaled to it (3, 6, 10, 13, 16), the rest shared",
                50,
                (1..=5).map(|i| (["q1", "q2", "q3", "q4", "q5"][i - 1], 80 * i as i64, 10 * i as i64, 1)).collect(),
                vec![4, 7, 10, 13, 16],
            ),
            (
                "guarantees past the total are scaled down",
                200,
                vec![("a", 100, 200, 1), ("b", 100, 0, 1), ("c", 100, 200, 1)],
                vec![100, 0, 100],
            ),
        ];
        for (name, total, children, want) in cases {
            let children: Vec<Child<'_>> = children.iter().map(|&(n, m, r, w)| child(n, m, r, w)).collect();
            assert_eq!(divide(total, &children), want, "{name}");
        }
    }

    #[test]
    fn whole_units_go_by_largest_remainder_then_by_name() {
        // 81 GPUs: a donor asking nothing and ten borrowers of equal weight asking more
        // than there is.
        let names: Vec<String> = (0..10).map(|i| format!("borrower-{i:02}")).collect();
        let mut children = vec![child("donor", 3, 0, 1)];
        for (i, n) in names.iter().enumerate() {
            children.push(child(n, if i < 8 { 8 } else { 7 }, 100, 1));
        }
        let got = divide(81, &children);
        assert_eq!(got.iter().sum::<i64>(), 81);
        assert_eq!(got, vec![0, 9, 9, 9, 8, 8, 8, 8, 8, 7, 7]);
    }

    #[test]
    fn a_child_that_does_not_lend_keeps_its_guarantee_idle() {
        let children = [Child { lends: false, ..child("t2", 40, 0, 1) }, child("t1", 60, 120, 1)];
        assert_eq!(divide(100, &children), vec![40, 60]);
    }
}

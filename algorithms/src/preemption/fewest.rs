//! The fewest pods whose eviction would have let a pod fit on a node: the yardstick a
//! preemption's victims are measured against. Any pod of the node counts (whatever its
//! priority or quota, so this is a lower bound of what the rules allow), except the
//! pod's own group; the members of one pod group on the node go together.

use std::sync::Arc;

use super::victims::{Judge, evict, put_node};
use crate::framework::Profile;
use crate::pod_info::PodInfo;
use crate::snapshot::Snapshot;

/// The most sets of pods tried before giving up.
const MOST_TRIALS: usize = 2_000;

/// The fewest pods of node `i` whose eviction lets `pod` fit there, among sets of at
/// most `most` pods; `None` when no such set is found (or the search gave up). The
/// snapshot is restored.
pub fn fewest_victims(
    profile: &Profile,
    pod: &PodInfo,
    snapshot: &mut Snapshot,
    i: usize,
    most: usize,
) -> Option<usize> {
    let original = snapshot.nodes.get(i)?.clone();
    let objects = snapshot.objects.clone();
    let judge = Judge::new(profile, pod, snapshot);
    // The node's pods as units of eviction: a pod alone, or its group's members here.
    let mut units: Vec<Vec<Arc<PodInfo>>> = Vec::new();
    for p in original.pods.iter().filter(|p| !pod.same_group(p)) {
        match units.iter_mut().find(|u| u[0].same_group(p)) {
            Some(u) => u.push(p.clone()),
            None => units.push(vec![p.clone()]),
        }
    }
    let mut trials = 0usize;
    let mut best: Option<usize> = None;
    // Sets of `size` units hold at least `size` pods: past the best found, none is fewer.
    for size in 1..=most.min(units.len()) {
        if best.is_some_and(|b| size >= b) || trials >= MOST_TRIALS {
            break;
        }
        let mut chosen: Vec<usize> = (0..size).collect();
        loop {
            let removed: Vec<Arc<PodInfo>> = chosen.iter().flat_map(|&u| units[u].iter().cloned()).collect();
            if removed.len() <= most && best.is_none_or(|b| removed.len() < b) {
                trials += 1;
                let mut node = (*original).clone();
                for v in &removed {
                    node.remove_pod(&v.namespace, &v.name);
                }
                put_node(snapshot, i, node);
                evict(profile, snapshot, &objects, &removed);
                if judge.fits(snapshot, i).is_success() {
                    best = Some(removed.len());
                }
            }
            if trials >= MOST_TRIALS || !next_combination(&mut chosen, units.len()) {
                break;
            }
        }
    }
    snapshot.replace_node(i, original);
    snapshot.set_pod_flags(i);
    snapshot.objects = objects;
    best
}

/// The next `k`-combination of `0..n` in lexicographic order; false after the last.
fn next_combination(chosen: &mut [usize], n: usize) -> bool {
    let k = chosen.len();
    let Some(i) = (0..k).rev().find(|&i| chosen[i] < n - k + i) else { return false };
    chosen[i] += 1;
    for j in i + 1..k {
        chosen[j] = chosen[j - 1] + 1;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builders::{NodeBuilder, PodBuilder, snapshot};
    use crate::plugins::node_resources_fit::NodeResourcesFit;

    #[test]
    fn combinations_run_in_order() {
        let mut c = vec![0, 1];
        let mut all = vec![c.clone()];
        while next_combination(&mut c, 4) {
            all.push(c.clone());
        }
        assert_eq!(all, [[0, 1], [0, 2], [0, 3], [1, 2], [1, 3], [2, 3]]);
    }

    #[test]
    fn one_large_pod_is_fewer_than_two_small_ones() {
        // An 8-CPU node with two 2-CPU pods and one 4-CPU pod; the pod wants 4 CPUs.
        let node = NodeBuilder::new("n").capacity("8", "32Gi", "110").build();
        let placed: Vec<_> = [("a", "2"), ("b", "2"), ("c", "4")]
            .iter()
            .map(|(n, cpu)| PodBuilder::new(n).req(cpu, "").node_name("n").build())
            .collect();
        let mut snap = snapshot(&[node], &placed);
        let fit = NodeResourcesFit::new(&Default::default()).unwrap();
        let profile = Profile { filters: vec![Arc::new(fit)], ..Default::default() };
        let pod = PodBuilder::new("p").req("4", "").info();
        assert_eq!(fewest_victims(&profile, &pod, &mut snap, 0, 3), Some(1));
        let big = PodBuilder::new("q").req("7", "").info();
        assert_eq!(fewest_victims(&profile, &big, &mut snap, 0, 3), Some(3), "every pod must go");
        assert_eq!(fewest_victims(&profile, &big, &mut snap, 0, 2), None, "not within two");
        assert_eq!(snap.nodes[0].pods.len(), 3, "the snapshot is restored");
    }
}

use super::*;
use crate::builders::{NodeBuilder, PodBuilder, snapshot};
use crate::snapshot::Snapshot;

const GPU: &str = "nvidia.com/gpu";

/// Nodes of 8 GPUs, 32 CPUs and 128Gi: `used[i]` GPUs (4 CPUs each) held on node i.
fn cluster(used: &[u32]) -> Snapshot {
    let nodes: Vec<_> = (0..used.len())
        .map(|i| NodeBuilder::new(&format!("n{i}")).capacity("32", "128Gi", "110").resource(GPU, "8").build())
        .collect();
    let pods: Vec<_> = used
        .iter()
        .enumerate()
        .filter(|(_, u)| **u > 0)
        .map(|(i, u)| {
            let cpu = format!("{}", 4 * u);
            PodBuilder::new(&format!("held-{i}"))
                .req(&cpu, "1Gi")
                .device(GPU, &u.to_string())
                .node_name(&format!("n{i}"))
                .build()
        })
        .collect();
    snapshot(&nodes, &pods)
}

fn members(n: usize, gpus: u32) -> Vec<PodInfo> {
    (0..n).map(|i| PodBuilder::new(&format!("w{i}")).req("4", "1Gi").device(GPU, &gpus.to_string()).info()).collect()
}

fn placement<'a>(snap: &'a Snapshot, nodes: &[usize], pods: &'a [PodInfo]) -> Placement<'a> {
    Placement { nodes: nodes.iter().map(|&i| &*snap.nodes[i]).collect(), pods: pods.iter().collect() }
}

fn weighted(list: &[(PlacementScorer, i64)]) -> Vec<WeightedPlacementScore> {
    list.iter().map(|(s, w)| WeightedPlacementScore { scorer: s.clone(), weight: *w }).collect()
}

fn gpu_only() -> PlacementScorer {
    PlacementScorer::NodeResourcesFit(vec![(GPU.to_string(), 1)])
}

#[test]
fn requests_and_free_amounts_count_cpu_in_millicores() {
    let snap = cluster(&[3]);
    let pods = members(1, 2);
    assert_eq!(free_on(&snap.nodes[0], GPU), 5);
    assert_eq!(free_on(&snap.nodes[0], "cpu"), 20_000);
    assert_eq!(request(&pods[0], "cpu"), 4_000);
    assert_eq!(left_after(&placement(&snap, &[0], &pods), GPU), 3);
}

#[test]
fn tightest_fit_scales_what_is_left_between_the_candidates_extremes() {
    // Rack A (n0, n1) has 10 GPUs free, rack B (n2, n3) 14: a group of 2 x 4 GPUs leaves
    // 2 and 6; the range is those two, so A scores 100 and B 0.
    let snap = cluster(&[4, 2, 1, 1]);
    let pods = members(2, 4);
    let (a, b) = (placement(&snap, &[0, 1], &pods), placement(&snap, &[2, 3], &pods));
    let facts = GroupFacts { dominant: GPU.into(), scheduled: 0, left_range: (2, 6) };
    let scores = score_placements(&default_placement_scores(), &facts, &[a, b]);
    assert_eq!(scores[0].plugins, vec![(TIGHTEST_FIT, 100), (POD_GROUP_PODS_COUNT, 100)]);
    assert_eq!(scores[1].plugins, vec![(TIGHTEST_FIT, 0), (POD_GROUP_PODS_COUNT, 100)]);
    // Halfway between the extremes scores half; beyond them, the bounds.
    assert_eq!(tightness(4, (2, 6)), 50);
    assert_eq!(tightness(9, (2, 6)), 0);
    assert_eq!(tightness(1, (2, 6)), 100);
    // One candidate: its full placement scores 100, a partial one (more left) 0.
    assert_eq!(tightness(2, (2, 2)), 100);
    assert_eq!(tightness(3, (2, 2)), 0);
}

#[test]
fn node_resources_fit_packs_the_domain_taken_as_a_whole() {
    // Rack A: 4 nodes, 32 GPUs, 12 held; rack B: 2 nodes, 16 GPUs, none held. A group of
    // 2 x 4 GPUs brings A to 20/32 (62) and B to 8/16 (50): the bin-packing score prefers A
    // although B is left with less free (the tightest fit).
    let snap = cluster(&[4, 4, 4, 0, 0, 0]);
    let pods = members(2, 4);
    let a = placement(&snap, &[0, 1, 2, 3], &pods);
    let b = placement(&snap, &[4, 5], &pods);
    let facts = GroupFacts { dominant: GPU.into(), scheduled: 0, left_range: (8, 12) };
    let scores = score_placements(&weighted(&[(gpu_only(), 1)]), &facts, &[a.clone(), b.clone()]);
    assert_eq!(scores[0].total, 62);
    assert_eq!(scores[1].total, 50);
    let tight = score_placements(&default_placement_scores(), &facts, &[a, b]);
    assert!(tight[1].total > tight[0].total, "{tight:?}");
}

#[test]
fn node_resources_fit_defaults_to_cpu_and_memory_with_the_scoring_defaults() {
    // CPU: 4 nodes x 32 = 128 CPUs, 48 held + 2 x 4 asked = 56 -> 43; memory: 512Gi,
    // 3Gi held + 2Gi asked -> 0 (integer share); (43 + 0) / 2 = 21.
    let snap = cluster(&[4, 4, 4, 0]);
    let pods = members(2, 4);
    let cpu_mem = PlacementScorer::NodeResourcesFit(vec![("cpu".into(), 1), ("memory".into(), 1)]);
    let facts = GroupFacts { dominant: GPU.into(), ..Default::default() };
    let scores = score_placements(&weighted(&[(cpu_mem, 1)]), &facts, &[placement(&snap, &[0, 1, 2, 3], &pods)]);
    assert_eq!(scores[0].total, 21);
    // A pod without requests counts 100m and 200Mi, as NodeResourcesFit's scores do.
    let bare = vec![PodBuilder::new("bare").info()];
    let cpu_only = PlacementScorer::NodeResourcesFit(vec![("cpu".to_string(), 1)]);
    let small = snapshot(&[NodeBuilder::new("s").capacity("1", "1Gi", "110").build()], &[]);
    let s = score_placements(&weighted(&[(cpu_only, 1)]), &facts, &[placement(&small, &[0], &bare)]);
    assert_eq!(s[0].total, 10);
}

#[test]
fn pod_group_pods_count_scales_to_the_most_pods_among_the_placements() {
    let snap = cluster(&[0, 0, 0]);
    let all = members(4, 1);
    let facts = GroupFacts { dominant: GPU.into(), scheduled: 2, left_range: (0, 0) };
    let full = placement(&snap, &[0], &all);
    let part = placement(&snap, &[1], &all[..2]);
    let scores = score_placements(&weighted(&[(PlacementScorer::PodGroupPodsCount, 1)]), &facts, &[full, part]);
    // 2 scheduled + 4 = 6 is the most; 2 + 2 = 4 scores 4 * 100 / 6.
    assert_eq!(scores[0].total, 100);
    assert_eq!(scores[1].total, 66);
    let none = GroupFacts { scheduled: 0, ..facts };
    let empty = score_placements(
        &weighted(&[(PlacementScorer::PodGroupPodsCount, 1)]),
        &none,
        &[placement(&snap, &[2], &all[..0])],
    );
    assert_eq!(empty[0].total, 0);
}

#[test]
fn the_total_weighs_each_plugin_in_the_profiles_order() {
    let snap = cluster(&[4, 4, 4, 0, 0, 0]);
    let pods = members(2, 4);
    let a = placement(&snap, &[0, 1, 2, 3], &pods);
    let facts = GroupFacts { dominant: GPU.into(), scheduled: 0, left_range: (8, 12) };
    let list = weighted(&[(gpu_only(), 2), (PlacementScorer::PodGroupPodsCount, 1), (PlacementScorer::TightestFit, 3)]);
    let s = score_placements(&list, &facts, &[a]);
    assert_eq!(s[0].plugins, vec![(NODE_RESOURCES_FIT, 62), (POD_GROUP_PODS_COUNT, 100), (TIGHTEST_FIT, 0)]);
    assert_eq!(s[0].total, 2 * 62 + 100);
    assert!(score_placements(&list, &facts, &[]).is_empty());
}

//! The profile's placementScore plugins, as configured (the placement module scores them).

/// This scheduler's tightest-fit placement score.
pub const TIGHTEST_FIT: &str = "TightestFit";
/// kube-scheduler's pod-count placement score.
pub const POD_GROUP_PODS_COUNT: &str = "PodGroupPodsCount";
/// kube-scheduler's bin-packing placement score (NodeResourcesFit's placement part).
pub const NODE_RESOURCES_FIT: &str = "NodeResourcesFit";
/// The names a profile's `placementScore` stanza may list.
pub const PLACEMENT_SCORES: &[&str] = &[TIGHTEST_FIT, NODE_RESOURCES_FIT, POD_GROUP_PODS_COUNT];

/// A placementScore plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlacementScorer {
    /// The least left free of the dominant resource.
    TightestFit,
    /// MostAllocated over the placement's nodes, with these resources and weights.
    NodeResourcesFit(Vec<(String, i64)>),
    /// The group's pods scheduled with the placement.
    PodGroupPodsCount,
}

impl PlacementScorer {
    /// The plugin's name.
    pub fn name(&self) -> &'static str {
        match self {
            PlacementScorer::TightestFit => TIGHTEST_FIT,
            PlacementScorer::NodeResourcesFit(_) => NODE_RESOURCES_FIT,
            PlacementScorer::PodGroupPodsCount => POD_GROUP_PODS_COUNT,
        }
    }
}

/// A placementScore plugin and its weight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeightedPlacementScore {
    /// The plugin.
    pub scorer: PlacementScorer,
    /// Its weight (1-100).
    pub weight: i64,
}

/// The default placementScore plugins: `TightestFit` and `PodGroupPodsCount`, weight 1
/// each (the pod count only tells placements apart for a group whose minimum is below
/// its size: one holding more of its members wins).
pub fn default_placement_scores() -> Vec<WeightedPlacementScore> {
    vec![
        WeightedPlacementScore { scorer: PlacementScorer::TightestFit, weight: 1 },
        WeightedPlacementScore { scorer: PlacementScorer::PodGroupPodsCount, weight: 1 },
    ]
}

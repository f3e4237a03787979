//! ImageLocality: prefer nodes that already hold the pod's images, scaled by how widely spread they are.

use crate::framework::{MAX_NODE_SCORE, PluginState, ScorePlugin};
use crate::node_info::NodeInfo;
use crate::pod_info::PodInfo;
use crate::snapshot::Snapshot;

/// Plugin name.
pub const NAME: &str = "ImageLocality";

const MB: i64 = 1024 * 1024;
/// Below this total the score is zero.
const MIN_THRESHOLD: i64 = 23 * MB;
/// Per container, above this the score is the maximum.
const MAX_CONTAINER_THRESHOLD: i64 = 1000 * MB;

/// The ImageLocality score.
#[derive(Debug, Default)]
pub struct ImageLocality;

impl ScorePlugin for ImageLocality {
    fn name(&self) -> &'static str {
        NAME
    }

    fn node_local(&self) -> bool {
        true
    }

    fn reads_image_spread(&self) -> bool {
        true
    }

    fn score(&self, _: &PluginState, pod: &PodInfo, node: &NodeInfo, snapshot: &Snapshot) -> i64 {
        let total = snapshot.nodes.len().max(1) as f64;
        let mut sum: i64 = 0;
        for img in &pod.images {
            if let Some(size) = node.image_size(img) {
                let spread = snapshot.image_nodes.get(img).copied().unwrap_or(1) as f64 / total;
                // Sizes come from node status as sent: saturate rather than wrap.
                sum = sum.saturating_add((size.max(0) as f64 * spread) as i64);
            }
        }
        let max_threshold = MAX_CONTAINER_THRESHOLD.saturating_mul(pod.images.len() as i64);
        let clamped = sum.clamp(MIN_THRESHOLD, max_threshold.max(MIN_THRESHOLD));
        if max_threshold <= MIN_THRESHOLD {
            return 0;
        }
        MAX_NODE_SCORE * (clamped - MIN_THRESHOLD) / (max_threshold - MIN_THRESHOLD)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builders::{NodeBuilder, PodBuilder, score_all, snapshot};

    #[test]
    fn image_locality_table() {
        // Two nodes; node a holds a 40MB and a 300MB image, node b a 250MB and a 2GB image.
        let nodes = vec![
            NodeBuilder::new("a")
                .image(&["gcr.io/40:latest", "gcr.io/40:v1"], 40 * MB)
                .image(&["gcr.io/300:latest"], 300 * MB)
                .build(),
            NodeBuilder::new("b")
                .image(&["gcr.io/250:latest"], 250 * MB)
                .image(&["gcr.io/2000:latest"], 2000 * MB)
                .build(),
        ];
        let snap = snapshot(&nodes, &[]);
        let cases = [
            // 40MB*1/2 = 20MB < 23MB threshold: 0; 250MB*1/2=125MB -> 100*(125-23)/(1000-23) = 10.
            ("one image each", PodBuilder::new("p").images(&["gcr.io/40", "gcr.io/250"]), vec![0, 5]),
            ("untagged names match latest", PodBuilder::new("p").images(&["gcr.io/300"]), vec![12, 0]),
            ("huge image saturates per container", PodBuilder::new("p").images(&["gcr.io/2000"]), vec![0, 100]),
            ("no image present", PodBuilder::new("p").images(&["gcr.io/none"]), vec![0, 0]),
        ];
        for (name, pod, want) in cases {
            assert_eq!(score_all(&ImageLocality, &pod.build(), &snap), want, "{name}");
        }
    }

    #[test]
    fn huge_image_sizes_saturate_instead_of_wrapping() {
        let nodes = vec![
            NodeBuilder::new("a").image(&["x:1"], i64::MAX).image(&["y:1"], i64::MAX).build(),
            NodeBuilder::new("b").image(&["x:1"], -5).build(),
        ];
        let snap = snapshot(&nodes, &[]);
        let pod = PodBuilder::new("p").images(&["x:1", "y:1"]).build();
        assert_eq!(score_all(&ImageLocality, &pod, &snap), vec![100, 0]);
    }
}

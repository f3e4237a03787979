//! VolumeBinding's Score (kube-scheduler's `StorageCapacityScoring` feature): a node is
//! scored by the share of storage the pod's claims would use there, through a
//! piecewise-linear shape: static volumes' capacity, else the CSIStorageCapacity the
//! provisioner would draw from.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::binder::NodeBindings;

/// One point of the shape: utilization in percent to a score of 0-10.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ShapePoint {
    /// Utilization, 0-100.
    pub utilization: i64,
    /// Score, 0-10.
    pub score: i64,
}

/// The shape kube-scheduler uses when the feature is on and none is configured: the
/// emptiest node scores highest.
pub const DEFAULT_SHAPE: [ShapePoint; 2] =
    [ShapePoint { utilization: 0, score: 10 }, ShapePoint { utilization: 100, score: 0 }];

/// Checks a configured shape as kube-scheduler validates it.
pub fn validate(shape: &[ShapePoint]) -> Result<(), String> {
    if shape.is_empty() {
        return Err("shape: at least one point must be specified".into());
    }
    for (i, p) in shape.iter().enumerate() {
        if !(0..=100).contains(&p.utilization) {
            return Err(format!("shape[{i}].utilization: must be in the range [0, 100]"));
        }
        if !(0..=10).contains(&p.score) {
            return Err(format!("shape[{i}].score: must be in the range [0, 10]"));
        }
        if i > 0 && p.utilization <= shape[i - 1].utilization {
            return Err(format!("shape[{i}].utilization: values must be sorted in strictly increasing order"));
        }
    }
    Ok(())
}

/// The shape as a function of utilization, with scores scaled to 0-100.
fn shape_value(points: &[(i64, i64)], p: i64) -> i64 {
    let Some(first) = points.first() else { return 0 };
    if p <= first.0 {
        return first.1;
    }
    for w in points.windows(2) {
        let ((u0, s0), (u1, s1)) = (w[0], w[1]);
        if p <= u1 {
            return s0 + (s1 - s0) * (p - u0) / (u1 - u0);
        }
    }
    points.last().map_or(0, |l| l.1)
}

/// A node's score from the bindings the pod would get there.
pub fn score(shape: &[ShapePoint], b: &NodeBindings) -> i64 {
    let points: Vec<(i64, i64)> = shape.iter().map(|p| (p.utilization, p.score * 10)).collect();
    // Requested and capacity by class.
    let mut classes: BTreeMap<&str, (i64, i64)> = BTreeMap::new();
    if !b.static_bindings.is_empty() {
        for (claim, volume) in &b.static_bindings {
            let e = classes.entry(volume.class.as_str()).or_default();
            e.0 += claim.request;
            e.1 += volume.capacity;
        }
    } else {
        for (claim, cap) in b.provisions.iter().zip(&b.capacities) {
            let Some(cap) = cap else { continue };
            let e = classes.entry(claim.class.as_str()).or_default();
            e.0 += claim.request;
            e.1 = cap.capacity.unwrap_or(0);
        }
    }
    if classes.is_empty() {
        return 0;
    }
    let total: i64 = classes
        .values()
        .map(|&(requested, capacity)| {
            if capacity == 0 || requested > capacity {
                shape_value(&points, 100)
            } else {
                shape_value(&points, requested * 100 / capacity)
            }
        })
        .sum();
    let n = classes.len() as i64;
    (total * 2 + n) / (2 * n)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::volumes::builders::{sized_claim, volume};

    fn shape(points: &[(i64, i64)]) -> Vec<ShapePoint> {
        points.iter().map(|&(utilization, score)| ShapePoint { utilization, score }).collect()
    }

    /// Bindings with (class, requested, capacity) static volumes.
    fn bindings(classes: &[(&str, i64, i64)]) -> NodeBindings {
        let mut b = NodeBindings::default();
        for (i, (class, requested, capacity)) in classes.iter().enumerate() {
            let c = sized_claim(&format!("c{i}"), class, *requested);
            b.static_bindings.push((Arc::new(c), Arc::new(volume(&format!("v{i}"), class, *capacity))));
        }
        b
    }

    #[test]
    fn scorer_table() {
        let rising = shape(&[(0, 0), (100, 10)]);
        for (requested, want) in [(0, 0), (30, 30), (50, 50), (100, 100)] {
            assert_eq!(score(&rising, &bindings(&[("hdd", requested, 100)])), want, "one class {requested}");
        }
        for ((hdd, ssd), want) in [
            ((0, 0), 0),
            ((0, 30), 15),
            ((30, 30), 30),
            ((30, 60), 45),
            ((50, 50), 50),
            ((50, 100), 75),
            ((100, 100), 100),
        ] {
            assert_eq!(score(&rising, &bindings(&[("hdd", hdd, 100), ("ssd", ssd, 100)])), want, "{hdd} {ssd}");
        }
        // A custom shape (scores given out of 10 are scaled to 100 here; kube-scheduler's
        // scorer test feeds them unscaled, hence its halved figures).
        let custom = shape(&[(50, 0), (80, 3), (100, 5)]);
        for ((hdd, ssd), want) in
            [((0, 0), 0), ((0, 30), 0), ((30, 30), 0), ((30, 60), 5), ((50, 100), 25), ((90, 90), 40), ((100, 100), 50)]
        {
            assert_eq!(score(&custom, &bindings(&[("hdd", hdd, 100), ("ssd", ssd, 100)])), want, "{hdd} {ssd}");
        }
        assert_eq!(score(&rising, &NodeBindings::default()), 0);
        assert_eq!(score(&rising, &bindings(&[("hdd", 200, 100)])), 100, "over capacity");
    }

    #[test]
    fn shapes_are_validated() {
        assert!(validate(&DEFAULT_SHAPE).is_ok());
        assert!(validate(&[]).is_err());
        assert!(validate(&shape(&[(50, 1), (50, 2)])).is_err());
        assert!(validate(&shape(&[(0, 11)])).is_err());
        assert!(validate(&shape(&[(101, 1)])).is_err());
    }
}

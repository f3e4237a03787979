//! kube-scheduler's default score normalization.

use super::MAX_NODE_SCORE;

/// Scales scores to 0..=100 by the maximum; `reverse` turns high raw scores into low ones.
/// When every score is zero, all become 100 if `reverse`, else stay zero.
pub fn default_normalize(reverse: bool, scores: &mut [i64]) {
    let max = scores.iter().copied().max().unwrap_or(0).max(0);
    if max == 0 {
        if reverse {
            scores.iter_mut().for_each(|s| *s = MAX_NODE_SCORE);
        }
        return;
    }
    for s in scores.iter_mut() {
        let scaled = MAX_NODE_SCORE * *s / max;
        *s = if reverse { MAX_NODE_SCORE - scaled } else { scaled };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_by_the_maximum() {
        let mut s = vec![1, 2, 4, 0];
        default_normalize(false, &mut s);
        assert_eq!(s, vec![25, 50, 100, 0]);
        let mut r = vec![1, 2, 4, 0];
        default_normalize(true, &mut r);
        assert_eq!(r, vec![75, 50, 0, 100]);
    }

    #[test]
    fn all_zero_scores_become_max_only_when_reversed() {
        let mut s = vec![0, 0];
        default_normalize(false, &mut s);
        assert_eq!(s, vec![0, 0]);
        default_normalize(true, &mut s);
        assert_eq!(s, vec![100, 100]);
    }
}

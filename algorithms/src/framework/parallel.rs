//! The one helper through which per-node work runs in parallel.

use rayon::prelude::*;

/// Nodes handed to one rayon task at a time: big enough to amortize task overhead.
const MIN_CHUNK: usize = 32;

/// Computes `f(i)` for every `i` in `0..n` in parallel; results are in index order.
pub fn map_nodes<T: Send>(n: usize, f: impl Fn(usize) -> T + Sync + Send) -> Vec<T> {
    if n < MIN_CHUNK * 2 {
        return (0..n).map(f).collect();
    }
    (0..n).into_par_iter().with_min_len(MIN_CHUNK).map(f).collect()
}

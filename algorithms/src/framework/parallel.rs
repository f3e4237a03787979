//! The one pool through which per-node work runs in parallel.
//!
//! A thread outside a rayon pool that starts parallel work hands it over and sleeps
//! until it is done, and the pool's idle workers spin while that thread does the
//! serial parts of a cycle. On few cores both costs are a large share of a cycle, so
//! the scheduling loop runs on a worker of this pool ([`on_pool`]): its parallel
//! sections then start and end without a wake-up, and no extra thread competes for
//! the cores.

use std::sync::OnceLock;

use rayon::prelude::*;

/// Nodes handed to one rayon task at a time: big enough to amortize task overhead.
const MIN_CHUNK: usize = 32;

/// The scheduling pool, or None when its threads could not be started (rayon's global
/// pool is used then).
fn pool() -> Option<&'static rayon::ThreadPool> {
    static POOL: OnceLock<Option<rayon::ThreadPool>> = OnceLock::new();
    POOL.get_or_init(|| rayon::ThreadPoolBuilder::new().thread_name(|i| format!("scheduler-worker-{i}")).build().ok())
        .as_ref()
}

/// Runs `f` on a worker of the scheduling pool and returns its result. Work that calls
/// [`map_nodes`] from inside `f` runs without handing over between threads.
pub fn on_pool<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    match pool() {
        Some(p) => p.install(f),
        None => f(),
    }
}

/// Indexes one [`fold_chunks`] task folds.
const FOLD_CHUNK: usize = 256;

/// Folds `0..n` in chunks of consecutive indexes, in parallel: each chunk starts from
/// `init()` and folds its indexes in order with `f`. The chunks' results come back in
/// index order. Unlike [`map_nodes`] nothing is stored per index, so a pass that keeps
/// only a few of its results writes only those.
pub fn fold_chunks<A: Send>(
    n: usize,
    init: impl Fn() -> A + Sync + Send,
    f: impl Fn(&mut A, usize) + Sync + Send,
) -> Vec<A> {
    let chunks = n.div_ceil(FOLD_CHUNK);
    let run = |c: usize| {
        let mut acc = init();
        for i in c * FOLD_CHUNK..((c + 1) * FOLD_CHUNK).min(n) {
            f(&mut acc, i);
        }
        acc
    };
    if chunks <= 1 {
        return (0..chunks).map(run).collect();
    }
    on_pool(|| (0..chunks).into_par_iter().map(run).collect())
}

/// Computes `f(i)` for every `i` in `0..n` in parallel; results are in index order.
pub fn map_nodes<T: Send>(n: usize, f: impl Fn(usize) -> T + Sync + Send) -> Vec<T> {
    if n < MIN_CHUNK * 2 {
        return (0..n).map(f).collect();
    }
    on_pool(|| (0..n).into_par_iter().with_min_len(MIN_CHUNK).map(f).collect())
}

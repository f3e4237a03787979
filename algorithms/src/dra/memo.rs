//! Filter's answers kept from one pod to the next: whether claims of one shape fit the
//! devices a node reaches, while no device of the node's pools changes hands.
//!
//! A search's answer depends on the claims' requests and constraints, their compiled
//! selectors, the gates, the devices reached (one [`super::NodeDevices`] per slice
//! version) and who holds the devices of the pools reached. The first four make the
//! shape ([`shape_id`]); the last is a stamp per pool that changes with every change of
//! its holders ([`super::DraState::pool_stamp`]). Pods made from one template share a
//! shape, so after one pod takes a device only the node that gave it searches again.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{LazyLock, Mutex, RwLock};

/// How many shapes each set of devices remembers answers for.
const SHAPES_PER_REACH: usize = 4;

/// Shapes by their text, numbered from one, with the bytes their texts take; the map
/// starts over when large (numbers are never given twice).
static SHAPES: LazyLock<RwLock<(HashMap<String, u64>, usize)>> = LazyLock::new(Default::default);

/// The most shapes, and the most bytes of their texts, kept before starting over.
const MAX_SHAPES: (usize, usize) = (4_096, 16 << 20);
static NEXT_SHAPE: AtomicU64 = AtomicU64::new(1);

/// The number of a shape, given as its full text: equal numbers mean equal texts.
pub(crate) fn shape_id(text: String) -> u64 {
    if let Some(id) = SHAPES.read().unwrap_or_else(|e| e.into_inner()).0.get(&text) {
        return *id;
    }
    let mut shapes = SHAPES.write().unwrap_or_else(|e| e.into_inner());
    let (map, bytes) = &mut *shapes;
    if let Some(id) = map.get(&text) {
        return *id;
    }
    if map.len() >= MAX_SHAPES.0 || *bytes + text.len() > MAX_SHAPES.1 {
        map.clear();
        *bytes = 0;
    }
    *bytes += text.len();
    let id = NEXT_SHAPE.fetch_add(1, Ordering::Relaxed);
    map.insert(text, id);
    id
}

/// A remembered answer: `Ok` when the claims fit, else the reason a node reports (`None`
/// for a plain lack of devices).
pub(crate) type Answer = Result<(), Option<String>>;

#[derive(Debug)]
struct Remembered {
    shape: u64,
    stamps: Vec<u64>,
    answer: Answer,
}

/// The answers remembered for one set of reachable devices.
#[derive(Debug, Default)]
pub struct FitsMemo(Mutex<Vec<Remembered>>);

impl FitsMemo {
    /// The answer for `shape` if the pools' stamps are still `stamps`.
    pub(crate) fn get(&self, shape: u64, stamps: impl Iterator<Item = u64>) -> Option<Answer> {
        let entries = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let hit = entries.iter().find(|e| e.shape == shape)?;
        let mut stamps = stamps;
        let same = hit.stamps.iter().all(|s| stamps.next() == Some(*s)) && stamps.next().is_none();
        same.then(|| hit.answer.clone())
    }

    /// Remembers the answer for `shape` at `stamps`, in place of the shape's older one
    /// (or of the oldest shape's when full).
    pub(crate) fn put(&self, shape: u64, stamps: Vec<u64>, answer: Answer) {
        let mut entries = self.0.lock().unwrap_or_else(|e| e.into_inner());
        entries.retain(|e| e.shape != shape);
        if entries.len() >= SHAPES_PER_REACH {
            entries.remove(0);
        }
        entries.push(Remembered { shape, stamps, answer });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_texts_share_a_number_and_different_ones_do_not() {
        let a = shape_id("memo-test-a".into());
        assert_eq!(a, shape_id("memo-test-a".into()));
        assert_ne!(a, shape_id("memo-test-b".into()));
    }

    #[test]
    fn an_answer_holds_only_at_the_stamps_it_was_found_at() {
        let memo = FitsMemo::default();
        memo.put(7, vec![1, 2], Ok(()));
        assert_eq!(memo.get(7, [1, 2].into_iter()), Some(Ok(())));
        assert_eq!(memo.get(7, [1, 3].into_iter()), None);
        assert_eq!(memo.get(7, [1].into_iter()), None);
        assert_eq!(memo.get(7, [1, 2, 3].into_iter()), None);
        assert_eq!(memo.get(8, [1, 2].into_iter()), None);
        memo.put(7, vec![1, 3], Err(None));
        assert_eq!(memo.get(7, [1, 3].into_iter()), Some(Err(None)));
        assert_eq!(memo.get(7, [1, 2].into_iter()), None);
    }

    #[test]
    fn the_oldest_shape_makes_room() {
        let memo = FitsMemo::default();
        for shape in 0..=SHAPES_PER_REACH as u64 {
            memo.put(shape, vec![], Ok(()));
        }
        assert_eq!(memo.get(0, std::iter::empty()), None);
        assert_eq!(memo.get(SHAPES_PER_REACH as u64, std::iter::empty()), Some(Ok(())));
    }
}

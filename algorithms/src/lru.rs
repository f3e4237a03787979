//! Slot choice for the small per-plugin caches that keep results for recent pod shapes.

/// The index of the slot `is_own` accepts when there is one, a new one while there is
/// room, else the least recently used one (the caller resets a slot that is not its own).
/// `is_own` compares the whole key, never only a hash of it.
pub(crate) fn slot_index<T: Default>(
    slots: &mut Vec<T>,
    capacity: usize,
    is_own: impl Fn(&T) -> bool,
    used_of: impl Fn(&T) -> u64,
) -> usize {
    if let Some(i) = slots.iter().position(is_own) {
        return i;
    }
    if slots.len() < capacity {
        slots.push(T::default());
        return slots.len() - 1;
    }
    slots.iter().enumerate().min_by_key(|(_, s)| used_of(s)).map(|(i, _)| i).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reuses_own_slot_then_fills_then_evicts_least_recent() {
        let mut slots: Vec<(u64, u64)> = Vec::new();
        assert_eq!(slot_index(&mut slots, 2, |s| s.0 == 7, |s| s.1), 0);
        slots[0] = (7, 5);
        assert_eq!(slot_index(&mut slots, 2, |s| s.0 == 7, |s| s.1), 0);
        assert_eq!(slot_index(&mut slots, 2, |s| s.0 == 8, |s| s.1), 1);
        slots[1] = (8, 9);
        assert_eq!(slot_index(&mut slots, 2, |s| s.0 == 9, |s| s.1), 0);
    }
}

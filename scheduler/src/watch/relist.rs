//! One watched kind's relist bookkeeping, the same for every watch: the keys the current
//! list holds and those a relist under way has seen. Objects are applied as they come;
//! when a relist ends, the keys it did not see (deleted while the watch was down) are
//! deleted, and the first complete list is reported once.

use std::collections::{HashMap, HashSet};

use kube::runtime::watcher::Event;

/// What a watch event asks of the cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change<K> {
    /// The object with this key was added or changed.
    Apply(String, K),
    /// The object with this key is gone.
    Delete(String),
    /// A list is complete; `first` for the kind's first complete list.
    Listed {
        /// Whether it is the first.
        first: bool,
    },
}

/// The bookkeeping of one watched kind.
#[derive(Debug, Default)]
pub struct Relist {
    current: HashSet<String>,
    relisting: Option<HashSet<String>>,
    listed: bool,
}

impl Relist {
    /// The changes one watch event makes; `key` names an object (`namespace/name`, or
    /// the name of a cluster-scoped one).
    pub fn apply<K>(&mut self, event: Event<K>, key: impl Fn(&K) -> String) -> Vec<Change<K>> {
        match event {
            Event::Init => {
                self.relisting = Some(HashSet::new());
                Vec::new()
            }
            Event::InitApply(o) | Event::Apply(o) => {
                let k = key(&o);
                if let Some(seen) = self.relisting.as_mut() {
                    seen.insert(k.clone());
                }
                self.current.insert(k.clone());
                vec![Change::Apply(k, o)]
            }
            Event::Delete(o) => {
                let k = key(&o);
                self.current.remove(&k);
                vec![Change::Delete(k)]
            }
            Event::InitDone => {
                let mut out = Vec::new();
                if let Some(seen) = self.relisting.take() {
                    let mut gone: Vec<String> = self.current.difference(&seen).cloned().collect();
                    gone.sort();
                    out.extend(gone.into_iter().map(Change::Delete));
                    self.current = seen;
                }
                out.push(Change::Listed { first: !std::mem::replace(&mut self.listed, true) });
                out
            }
        }
    }

    /// Keys in the current list.
    pub fn len(&self) -> usize {
        self.current.len()
    }

    /// Whether the current list is empty.
    pub fn is_empty(&self) -> bool {
        self.current.is_empty()
    }

    /// Whether a complete list was seen.
    pub fn listed(&self) -> bool {
        self.listed
    }
}

/// A watched kind kept as the value the scheduler reads from each object (a selector, a
/// budget, a group's spec), by key.
#[derive(Debug)]
pub struct Mirror<V> {
    relist: Relist,
    /// The values by `namespace/name` (or name).
    pub values: HashMap<String, V>,
}

impl<V> Default for Mirror<V> {
    fn default() -> Self {
        Mirror { relist: Relist::default(), values: HashMap::new() }
    }
}

impl<V: PartialEq> Mirror<V> {
    /// Applies a watch event; `value` reads an object (`None`: nothing to keep, as for a
    /// Service without a selector). Returns whether the values changed.
    pub fn apply<K: kube::Resource>(&mut self, event: Event<K>, value: impl Fn(&K) -> Option<V>) -> bool {
        let mut changed = false;
        for change in self.relist.apply(event, key_of) {
            changed |= match change {
                Change::Apply(k, o) => match value(&o) {
                    Some(v) => {
                        let same = self.values.get(&k).is_some_and(|old| *old == v);
                        if !same {
                            self.values.insert(k, v);
                        }
                        !same
                    }
                    None => self.values.remove(&k).is_some(),
                },
                Change::Delete(k) => self.values.remove(&k).is_some(),
                Change::Listed { first } => first,
            };
        }
        changed
    }

    /// Whether a complete list was seen.
    pub fn listed(&self) -> bool {
        self.relist.listed()
    }
}

/// `namespace/name` of a namespaced object, the name of a cluster-scoped one.
pub fn key_of<K: kube::Resource>(o: &K) -> String {
    let name = o.meta().name.as_deref().unwrap_or_default();
    match &o.meta().namespace {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(s: &&str) -> String {
        s.to_string()
    }

    #[test]
    fn a_relist_deletes_what_went_away_while_the_watch_was_down() {
        let mut r = Relist::default();
        assert!(r.apply(Event::Init, k).is_empty());
        assert_eq!(r.apply(Event::InitApply("a"), k), [Change::Apply("a".into(), "a")]);
        r.apply(Event::InitApply("b"), k);
        assert_eq!(r.apply(Event::InitDone, k), [Change::Listed { first: true }]);
        assert_eq!(r.apply(Event::Apply("c"), k), [Change::Apply("c".into(), "c")]);
        assert_eq!(r.apply(Event::Delete("a"), k), [Change::Delete("a".into())]);
        // The watch broke; the relist shows only c: b went away meanwhile.
        r.apply(Event::Init, k);
        r.apply(Event::InitApply("c"), k);
        assert_eq!(r.apply(Event::InitDone, k), [Change::Delete("b".into()), Change::Listed { first: false }]);
        assert_eq!(r.len(), 1);
        assert!(r.listed());
    }
}

//! The nodes an attempt rejected, each with the status of its first failing filter.
//!
//! A cycle over thousands of nodes usually rejects most of them for one or two
//! reasons, so the statuses are kept once each and a rejected node costs one entry
//! of two integers.

use rustc_hash::FxHashMap;

use crate::status::Status;

/// Distinct statuses, each kept once, by index.
#[derive(Debug, Clone, Default)]
pub struct StatusTable {
    statuses: Vec<Status>,
    /// Index of each distinct status without a detail.
    index: FxHashMap<Status, u32>,
    /// The status interned last: neighbouring nodes are mostly rejected alike.
    last: Option<u32>,
}

impl StatusTable {
    /// The index of `status`, adding it when it is new. Statuses with a detail are
    /// always kept apart: the detail names the node.
    pub fn intern(&mut self, status: Status) -> u32 {
        if status.detail.is_some() {
            self.statuses.push(status);
            return (self.statuses.len() - 1) as u32;
        }
        if let Some(k) = self.last
            && self.statuses[k as usize] == status
        {
            return k;
        }
        let k = match self.index.get(&status) {
            Some(&k) => k,
            None => {
                let k = self.statuses.len() as u32;
                self.index.insert(status.clone(), k);
                self.statuses.push(status);
                k
            }
        };
        self.last = Some(k);
        k
    }

    /// The status at index `k`.
    pub fn get(&self, k: u32) -> Option<&Status> {
        self.statuses.get(k as usize)
    }

    /// Every status, by index.
    pub fn as_slice(&self) -> &[Status] {
        &self.statuses
    }

    /// Number of statuses.
    pub fn len(&self) -> usize {
        self.statuses.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.statuses.is_empty()
    }
}

/// Rejected nodes (indexes into the snapshot) with their statuses, in the order pushed.
#[derive(Debug, Clone, Default)]
pub struct Rejections {
    /// The distinct statuses.
    table: StatusTable,
    /// (node index, index into `table`).
    nodes: Vec<(u32, u32)>,
}

impl Rejections {
    /// No rejections.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every node of `nodes` rejected with `status`.
    pub fn all(nodes: impl IntoIterator<Item = usize>, status: Status) -> Self {
        let mut r = Rejections::new();
        let k = r.intern(status);
        r.nodes = nodes.into_iter().map(|i| (i as u32, k)).collect();
        r
    }

    /// The index of `status` among the distinct statuses, adding it when it is new.
    pub fn intern(&mut self, status: Status) -> u32 {
        self.table.intern(status)
    }

    /// Records `node` as rejected with `status`.
    pub fn push(&mut self, node: usize, status: Status) {
        let k = self.intern(status);
        self.nodes.push((node as u32, k));
    }

    /// Records `node` as rejected with the distinct status `k` (from [`Self::intern`]).
    pub fn push_interned(&mut self, node: usize, k: u32) {
        self.nodes.push((node as u32, k));
    }

    /// Moves every rejection of `other` into `self`.
    pub fn append(&mut self, other: Rejections) {
        let map: Vec<u32> = other.table.statuses.into_iter().map(|s| self.intern(s)).collect();
        self.nodes.extend(other.nodes.into_iter().map(|(i, k)| (i, map[k as usize])));
    }

    /// Orders the rejections by node index.
    pub fn sort_by_node(&mut self) {
        self.nodes.sort_unstable_by_key(|(i, _)| *i);
    }

    /// Rejected nodes with their statuses.
    pub fn iter(&self) -> impl Iterator<Item = (usize, &Status)> + '_ {
        self.nodes.iter().map(|&(i, k)| (i as usize, &self.table.statuses[k as usize]))
    }

    /// The distinct statuses.
    pub fn statuses(&self) -> &[Status] {
        self.table.as_slice()
    }

    /// Number of rejected nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether no node was rejected.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alike_statuses_are_kept_once_and_details_apart() {
        let mut r = Rejections::new();
        r.push(3, Status::unschedulable("Insufficient cpu"));
        r.push(1, Status::unschedulable("Too many pods"));
        r.push(2, Status::unschedulable("Insufficient cpu"));
        r.push(0, Status::unschedulable("Insufficient cpu").with_detail("requested 2, free 1"));
        assert_eq!(r.statuses().len(), 3);
        let mut other = Rejections::new();
        other.push(5, Status::unschedulable("Too many pods"));
        other.push(4, Status::unresolvable("node(s) had untolerated taint(s)"));
        r.append(other);
        assert_eq!(r.statuses().len(), 4);
        r.sort_by_node();
        let seen: Vec<(usize, String)> = r.iter().map(|(i, s)| (i, s.message())).collect();
        assert_eq!(
            seen,
            vec![
                (0, "Insufficient cpu".to_string()),
                (1, "Too many pods".to_string()),
                (2, "Insufficient cpu".to_string()),
                (3, "Insufficient cpu".to_string()),
                (4, "node(s) had untolerated taint(s)".to_string()),
                (5, "Too many pods".to_string()),
            ]
        );
        assert_eq!(
            r.iter().find(|(i, _)| *i == 0).and_then(|(_, s)| s.detail.clone()).as_deref(),
            Some("requested 2, free 1")
        );
        assert_eq!(r.len(), 6);
    }
}

//! Cluster objects beyond nodes and pods: what plugins read in their cycle and what the
//! binding half assumes in Reserve until the API server's versions arrive.
//!
//! The store is open: each set of objects (the volume objects, the DRA objects, the
//! quotas) is a type of its owner's folder, found here by its type. The cache owns one
//! [`ClusterObjects`] and changes it (watch events, Reserve, Unreserve); a snapshot
//! holds a copy taken when it is refreshed. Each part sits behind an `Arc` and is copied
//! only when changed while shared (its maps are persistent, so that copy is cheap too).

use std::any::{Any, TypeId};
use std::fmt;
use std::sync::Arc;

/// One part of the cluster objects, declared by its owner.
pub trait ObjectPart: Any + Clone + Default + fmt::Debug + Send + Sync {
    /// A number that changes whenever objects change on which results cached for a
    /// node depend beyond the node itself (the DRA classes and slices, which decide how
    /// extended resources are served): cached filter verdicts and scores start over
    /// then. 0 for parts no such result reads.
    fn stamp(&self) -> u64 {
        0
    }
}

/// A part as the store holds it: the value, found by its type with one check, and how
/// its stamp is read.
#[derive(Clone)]
struct Stored {
    id: TypeId,
    value: Arc<dyn Any + Send + Sync>,
    stamp: fn(&(dyn Any + Send + Sync)) -> u64,
    debug: fn(&(dyn Any + Send + Sync), &mut fmt::Formatter<'_>) -> fmt::Result,
}

impl Stored {
    fn new<T: ObjectPart>(part: T) -> Self {
        Stored {
            id: TypeId::of::<T>(),
            value: Arc::new(part),
            stamp: |v| v.downcast_ref::<T>().map_or(0, ObjectPart::stamp),
            debug: |v, f| match v.downcast_ref::<T>() {
                Some(t) => fmt::Debug::fmt(t, f),
                None => f.write_str("?"),
            },
        }
    }
}

impl fmt::Debug for Stored {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        (self.debug)(&*self.value, f)
    }
}

/// The cluster objects plugins read, one part per owner, each found by its type.
#[derive(Debug, Clone, Default)]
pub struct ClusterObjects {
    /// The parts, few: looked up by a scan.
    parts: Vec<Stored>,
}

impl ClusterObjects {
    /// The part of type `T`, if one was stored.
    pub fn get<T: ObjectPart>(&self) -> Option<&T> {
        let id = TypeId::of::<T>();
        self.parts.iter().find(|p| p.id == id)?.value.downcast_ref::<T>()
    }

    /// The part of type `T` itself, to hold on to, if one was stored.
    pub fn shared<T: ObjectPart>(&self) -> Option<Arc<T>> {
        let id = TypeId::of::<T>();
        self.parts.iter().find(|p| p.id == id)?.value.clone().downcast::<T>().ok()
    }

    /// The part of type `T` to change, made empty first if there was none (and copied
    /// first if a snapshot shares it).
    pub fn get_mut<T: ObjectPart>(&mut self) -> &mut T {
        let id = TypeId::of::<T>();
        let at = match self.parts.iter().position(|p| p.id == id) {
            Some(at) => at,
            None => {
                self.parts.push(Stored::new(T::default()));
                self.parts.len() - 1
            }
        };
        let part = &mut self.parts[at];
        if Arc::get_mut(&mut part.value).is_none() {
            // Shared with a snapshot: this copy changes alone.
            let copy = part.value.downcast_ref::<T>().cloned().unwrap_or_default();
            part.value = Arc::new(copy);
        }
        match Arc::get_mut(&mut part.value).and_then(|v| v.downcast_mut::<T>()) {
            Some(value) => value,
            // A part is stored under its own type, and was made unshared just above.
            None => unreachable!("a part of another type under this one's"),
        }
    }

    /// Replaces the part of type `T`.
    pub fn set<T: ObjectPart>(&mut self, part: T) {
        *self.get_mut::<T>() = part;
    }

    /// The parts' stamps together ([`ObjectPart::stamp`]): equal while none changed.
    pub fn stamp(&self) -> u64 {
        self.parts.iter().fold(0u64, |acc, p| acc.rotate_left(17) ^ (p.stamp)(&*p.value))
    }

    /// These objects with `part` stored.
    pub fn with<T: ObjectPart>(mut self, part: T) -> Self {
        self.set(part);
        self
    }
}

/// A kind of cluster object beyond nodes and pods, declared by the folder that owns it
/// (`object_kind!("PersistentVolumeClaim")`): its name and kube-scheduler's names of its
/// events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ObjectKind {
    /// The API's kind (`ResourceClaim`).
    pub name: &'static str,
    /// The event of an addition (`ResourceClaimAdd`).
    pub added: &'static str,
    /// The event of a change (`ResourceClaimUpdate`).
    pub updated: &'static str,
    /// The event of a deletion (`ResourceClaimDelete`).
    pub deleted: &'static str,
}

/// An [`ObjectKind`] from the API's kind name.
#[macro_export]
macro_rules! object_kind {
    ($name:literal) => {
        $crate::objects::ObjectKind {
            name: $name,
            added: concat!($name, "Add"),
            updated: concat!($name, "Update"),
            deleted: concat!($name, "Delete"),
        }
    };
}

/// What happened to a cluster object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ObjectAction {
    /// Created.
    Add,
    /// Changed.
    Update,
    /// Deleted.
    Delete,
}

/// A change of one cluster object beyond nodes and pods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectEvent {
    /// The object's kind.
    pub kind: ObjectKind,
    /// What happened.
    pub action: ObjectAction,
    /// The object's key: `namespace/name` for namespaced kinds, else its name.
    pub key: String,
}

impl ObjectEvent {
    /// An event of `kind`.
    pub fn new(kind: ObjectKind, action: ObjectAction, key: impl Into<String>) -> Self {
        ObjectEvent { kind, action, key: key.into() }
    }

    /// kube-scheduler's name of the event (`PersistentVolumeClaimAdd`, `CSINodeUpdate`).
    pub fn label(&self) -> &'static str {
        match self.action {
            ObjectAction::Add => self.kind.added,
            ObjectAction::Update => self.kind.updated,
            ObjectAction::Delete => self.kind.deleted,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, Default, PartialEq)]
    struct Apples(u32);

    #[derive(Debug, Clone, Default, PartialEq)]
    struct Pears(Vec<&'static str>);

    impl ObjectPart for Apples {}
    impl ObjectPart for Pears {}

    #[test]
    fn each_part_is_found_by_its_type_and_absent_until_stored() {
        let mut objects = ClusterObjects::default();
        assert_eq!(objects.get::<Apples>(), None);
        objects.get_mut::<Apples>().0 = 3;
        objects.set(Pears(vec!["conference"]));
        assert_eq!(objects.get::<Apples>(), Some(&Apples(3)));
        assert_eq!(objects.get::<Pears>(), Some(&Pears(vec!["conference"])));
    }

    #[test]
    fn a_copy_keeps_its_parts_while_the_original_changes() {
        let mut objects = ClusterObjects::default().with(Apples(1));
        let copy = objects.clone();
        objects.get_mut::<Apples>().0 = 2;
        assert_eq!(copy.get::<Apples>(), Some(&Apples(1)));
        assert_eq!(objects.get::<Apples>(), Some(&Apples(2)));
    }
}

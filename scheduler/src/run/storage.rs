//! Watches the storage objects the volume plugins read (PersistentVolumeClaims,
//! PersistentVolumes, StorageClasses, CSINodes, CSIDrivers, CSIStorageCapacities) and
//! the DRA objects DynamicResources reads (ResourceClaims, ResourceSlices,
//! DeviceClasses) into the cache's cluster objects, with the events that requeue the
//! pods they may help.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use algorithms::dra;
use algorithms::events::{ClusterEvent, StorageAction, StorageEvent, StorageKind};
use algorithms::objects::ClusterObjects;
use algorithms::volumes::{Capacity, Claim, CsiDriver, CsiNode, StorageClass, Volume};
use futures::{Stream, StreamExt, stream};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::resource::v1 as resource;
use k8s_openapi::api::storage::v1 as storage;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, Resource};
use tracing::{info, warn};

use super::Shared;
use super::relist::{Change, Relist, key_of};
use super::state::Feed;
use super::watches::{Watched, watch};

/// A parsed storage object.
enum Object {
    Claim(Claim),
    Volume(Volume),
    Class(StorageClass),
    CsiNode(CsiNode),
    Driver(CsiDriver),
    Capacity(Capacity),
    ResourceClaim(dra::Claim),
    ResourceSlice(dra::Slice),
    DeviceClass(dra::DeviceClass),
}

/// One watch's output: an event with each object's key and, when it can be read, its
/// parsed form; or a failure.
enum Op {
    /// An event of `kind`.
    Event(StorageKind, Event<(String, Option<Box<Object>>)>),
    /// The watch could not run (not served, forbidden, failing): the kind counts as listed
    /// so that scheduling does not wait on it; pods needing it retry when it arrives.
    Failed(StorageKind, String),
}

/// A watch of one kind as store operations; objects that do not parse are logged and skipped.
fn ops<K>(
    client: &Client,
    kind: StorageKind,
    name: &'static str,
    parse: fn(&K) -> Result<Object, String>,
) -> impl Stream<Item = Op> + Send + 'static
where
    K: Resource<DynamicType = ()> + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    let api: Api<K> = Api::all(client.clone());
    let read = move |o: K| {
        let key = key_of(&o);
        let object = parse(&o)
            .map_err(|e| warn!(kind = name, object = %key, error = %e, "ignoring an object the scheduler cannot read"))
            .ok()
            .map(Box::new);
        (key, object)
    };
    watch(name, api, watcher::Config::default()).filter_map(move |w| {
        let op = match w {
            Watched::Event(ev) => Some(Op::Event(kind, map(ev, read))),
            Watched::Expired(n) => {
                info!(kind = n, "watch expired (410 Gone); relisting");
                None
            }
            Watched::Failed(_, e) => Some(Op::Failed(kind, e)),
        };
        futures::future::ready(op)
    })
}

/// An event with its object turned into something else.
fn map<K, T>(ev: Event<K>, f: impl Fn(K) -> T) -> Event<T> {
    match ev {
        Event::Init => Event::Init,
        Event::InitApply(o) => Event::InitApply(f(o)),
        Event::InitDone => Event::InitDone,
        Event::Apply(o) => Event::Apply(f(o)),
        Event::Delete(o) => Event::Delete(f(o)),
    }
}

fn upsert(objects: &mut ClusterObjects, object: Object) -> bool {
    let st = &mut objects.volumes;
    match object {
        Object::ResourceClaim(c) => objects.dra.upsert_claim(c).is_some(),
        Object::ResourceSlice(s) => objects.dra.upsert_slice(s).is_some(),
        Object::DeviceClass(c) => objects.dra.upsert_class(c).is_some(),
        Object::Claim(c) => st.upsert_claim(c).is_some(),
        Object::Volume(v) => st.upsert_volume(v).is_some(),
        Object::Class(c) => st.upsert_class(c).is_some(),
        Object::CsiNode(n) => st.upsert_csi_node(n).is_some(),
        Object::Driver(d) => st.upsert_driver(d).is_some(),
        Object::Capacity(c) => st.upsert_capacity(c).is_some(),
    }
}

fn remove(objects: &mut ClusterObjects, kind: StorageKind, key: &str) -> bool {
    let st = &mut objects.volumes;
    match kind {
        StorageKind::ResourceClaim => objects.dra.remove_claim(key).is_some(),
        StorageKind::ResourceSlice => objects.dra.remove_slice(key).is_some(),
        StorageKind::DeviceClass => objects.dra.remove_class(key).is_some(),
        StorageKind::ResourceClaimTemplate => objects.dra.remove_template(key).is_some(),
        StorageKind::Claim => st.remove_claim(key).is_some(),
        StorageKind::Volume => st.remove_volume(key).is_some(),
        StorageKind::Class => st.remove_class(key).is_some(),
        StorageKind::CsiNode => st.remove_csi_node(key).is_some(),
        StorageKind::CsiDriver => st.remove_driver(key).is_some(),
        StorageKind::Capacity => st.remove_capacity(key).is_some(),
    }
}

const KINDS: [StorageKind; 9] = [
    StorageKind::Claim,
    StorageKind::Volume,
    StorageKind::Class,
    StorageKind::CsiNode,
    StorageKind::CsiDriver,
    StorageKind::Capacity,
    StorageKind::ResourceClaim,
    StorageKind::ResourceSlice,
    StorageKind::DeviceClass,
];

fn slot(kind: StorageKind) -> usize {
    KINDS.iter().position(|k| *k == kind).unwrap_or(0)
}

/// Runs the watches until the process stops.
pub async fn run(client: Client, shared: Arc<Shared>) {
    let all = stream::select_all([
        ops::<PersistentVolumeClaim>(&client, StorageKind::Claim, "persistentvolumeclaims", |o| {
            Claim::from_api(o).map(Object::Claim)
        })
        .boxed(),
        ops::<PersistentVolume>(&client, StorageKind::Volume, "persistentvolumes", |o| {
            Volume::from_api(o).map(Object::Volume)
        })
        .boxed(),
        ops::<storage::StorageClass>(&client, StorageKind::Class, "storageclasses", |o| {
            StorageClass::from_api(o).map(Object::Class)
        })
        .boxed(),
        ops::<storage::CSINode>(&client, StorageKind::CsiNode, "csinodes", |o| {
            CsiNode::from_api(o).map(Object::CsiNode)
        })
        .boxed(),
        ops::<storage::CSIDriver>(&client, StorageKind::CsiDriver, "csidrivers", |o| {
            CsiDriver::from_api(o).map(Object::Driver)
        })
        .boxed(),
        ops::<storage::CSIStorageCapacity>(&client, StorageKind::Capacity, "csistoragecapacities", |o| {
            Capacity::from_api(o).map(Object::Capacity)
        })
        .boxed(),
        ops::<resource::ResourceClaim>(&client, StorageKind::ResourceClaim, "resourceclaims", |o| {
            dra::Claim::from_api(o).map(Object::ResourceClaim)
        })
        .boxed(),
        ops::<resource::ResourceSlice>(&client, StorageKind::ResourceSlice, "resourceslices", |o| {
            dra::Slice::from_api(o).map(Object::ResourceSlice)
        })
        .boxed(),
        ops::<resource::DeviceClass>(&client, StorageKind::DeviceClass, "deviceclasses", |o| {
            dra::DeviceClass::from_api(o).map(Object::DeviceClass)
        })
        .boxed(),
    ]);
    let mut all = all;
    let mut relists: [Relist; 9] = Default::default();
    let mut failing: HashSet<StorageKind> = HashSet::new();
    while let Some(op) = all.next().await {
        let mut guard = shared.lock();
        let now = Instant::now();
        let mut events: Vec<StorageEvent> = Vec::new();
        {
            let st = guard.engine.cache.objects_mut();
            match op {
                Op::Event(kind, ev) => {
                    for change in relists[slot(kind)].apply(ev, |(k, _)| k.clone()) {
                        match change {
                            Change::Apply(key, (_, Some(object))) => {
                                failing.remove(&kind);
                                let action =
                                    if upsert(st, *object) { StorageAction::Update } else { StorageAction::Add };
                                events.push(StorageEvent { kind, action, key });
                            }
                            Change::Apply(_, (_, None)) | Change::Listed { .. } => {}
                            Change::Delete(key) => {
                                if remove(st, kind, &key) {
                                    events.push(StorageEvent { kind, action: StorageAction::Delete, key });
                                }
                            }
                        }
                    }
                }
                Op::Failed(kind, e) => {
                    if failing.insert(kind) {
                        warn!(kind = ?kind, error = %e, "storage watch failed; retrying (pods with volumes wait for it)");
                    }
                }
            }
        }
        for e in events {
            guard.engine.on_event(ClusterEvent::Storage(e), now);
        }
        let listed = KINDS.iter().all(|k| relists[slot(*k)].listed() || failing.contains(k));
        if listed && !guard.has_listed(Feed::Storage) {
            let [claims, volumes, classes, csi_nodes, drivers, capacities] =
                guard.engine.cache.objects().volumes.counts();
            let [resource_claims, resource_slices, device_classes, _] = guard.engine.cache.objects().dra.counts();
            info!(
                claims,
                volumes,
                classes,
                csi_nodes,
                drivers,
                capacities,
                resource_claims,
                resource_slices,
                device_classes,
                "storage and DRA objects listed"
            );
            guard.listed(Feed::Storage);
        }
        drop(guard);
        shared.wake();
    }
}

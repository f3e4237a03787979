//! The in-memory API server of `simulate`: it answers the binding cycle's writes and
//! Bindings at once and plays the controllers that react to them, the PV controller
//! (a volume's claimRef binds its claim) and the external provisioner (a claim's
//! selected node gets a volume that node can reach), and stores ResourceClaims'
//! allocations with the API server's resource-version precondition. Faults can be injected to drive
//! the cycle's failure paths, as a test does against the fake API server in `run`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use algorithms::PodInfo;
use algorithms::dra::ClaimWrite;
use algorithms::events::{ClusterEvent, StorageAction, StorageEvent, StorageKind};
use algorithms::framework::ApiWrite;
use algorithms::labels::{LabelSelector, Labels, NodeSelector, NodeSelectorTerm, Operator, Requirement};
use algorithms::volumes::{Claim, ClaimRef, Volume, VolumeHandle, VolumeState};

use super::{BindOutcome, ClusterApi, Host};
use crate::engine::Engine;

/// The node labels a provisioned volume's affinity names when its class has no
/// `allowedTopologies`, most specific last: the first the node carries is used.
const TOPOLOGY_KEYS: [&str; 2] = ["topology.kubernetes.io/zone", "kubernetes.io/hostname"];

/// What the in-memory API server remembers across binding cycles.
#[derive(Debug, Default)]
pub struct MemoryApi {
    /// Resource versions it hands out.
    version: AtomicU64,
    /// Claims bound so far (`namespace/name` to the volume's name).
    claims: Mutex<BTreeMap<String, String>>,
    /// Writes to fail before answering again.
    failing_writes: AtomicUsize,
    /// Bindings to fail before answering again.
    failing_binds: AtomicUsize,
}

impl MemoryApi {
    /// Fails the next `n` writes (PreBind then fails).
    pub fn fail_writes(&self, n: usize) {
        self.failing_writes.store(n, Ordering::SeqCst);
    }

    /// Fails the next `n` Bindings.
    pub fn fail_binds(&self, n: usize) {
        self.failing_binds.store(n, Ordering::SeqCst);
    }

    /// Claims bound so far, each to its volume.
    pub fn take_claims(&self) -> BTreeMap<String, String> {
        std::mem::take(&mut *self.claims.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn next_version(&self) -> String {
        (self.version.fetch_add(1, Ordering::SeqCst) + 1).to_string()
    }

    fn injected(counter: &AtomicUsize) -> bool {
        counter.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok()
    }
}

/// The engine of a simulation, with the in-memory API and the virtual clock: a binding
/// cycle's host and the API it calls.
pub struct MemoryHost<'a> {
    engine: Mutex<&'a mut Engine>,
    api: &'a MemoryApi,
    clock: Instant,
}

impl<'a> MemoryHost<'a> {
    /// A host over `engine` at virtual time `clock`.
    pub fn new(engine: &'a mut Engine, api: &'a MemoryApi, clock: Instant) -> Self {
        MemoryHost { engine: Mutex::new(engine), api, clock }
    }

    fn lock(&self) -> MutexGuard<'_, &'a mut Engine> {
        self.engine.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Applies a write as the API server and the controllers would; the informers'
    /// storage events follow.
    fn apply(&self, write: &ApiWrite) -> Result<u64, String> {
        if let ApiWrite::Claim(w) = write {
            return self.write_claim(w);
        }
        if let ApiWrite::ReleaseClaim { namespace, name, claim_uid, pod_uid } = write {
            return self.release_claim(&format!("{namespace}/{name}"), claim_uid, pod_uid);
        }
        match write {
            ApiWrite::CreateClaim(w) => return self.create_claim(w),
            ApiWrite::DeleteClaim { namespace, name } => return self.delete_claim(&format!("{namespace}/{name}")),
            // The pod's status is not kept here: its claim is found by owner and annotation.
            ApiWrite::PodExtendedClaim { .. } => return Ok(self.api.next_version().parse().unwrap_or(0)),
            _ => {}
        }
        let mut engine = self.lock();
        let version = self.api.next_version();
        let labels = |node: &str| engine.cache.node(node).map(|n| n.labels.clone());
        let (claim, volume, written) = match write {
            ApiWrite::BindVolume { volume, claim } => {
                let mut c = (**claim).clone();
                let mut v = Volume { resource_version: version.clone(), ..(**volume).clone() };
                if c.uid.is_empty() {
                    // The API server gives every object a UID; a dump may leave it out.
                    c.uid = format!("uid-{}-{}", c.namespace, c.name);
                    v.claim_ref = v.claim_ref.take().map(|r| ClaimRef { uid: c.uid.clone(), ..r });
                }
                (c, v, version.clone())
            }
            ApiWrite::Claim(_)
            | ApiWrite::ReleaseClaim { .. }
            | ApiWrite::CreateClaim(_)
            | ApiWrite::DeleteClaim { .. }
            | ApiWrite::PodExtendedClaim { .. } => {
                return Err("a DRA write reached the volume path".into());
            }
            ApiWrite::SelectNode { claim, node } => {
                let Some(labels) = labels(node) else {
                    return Err(format!("selecting node {node} for claim {}: node not found", claim.key()));
                };
                let c = Claim { resource_version: version.clone(), ..(**claim).clone() };
                let v = provisioned(&engine.cache.objects().volumes, &c, &labels);
                (c, v, version.clone())
            }
        };
        let key = claim.key();
        let name = volume.name.clone();
        let st = &mut engine.cache.objects_mut().volumes;
        bind(st, &claim, volume, &self.api.next_version());
        self.api.claims.lock().unwrap_or_else(|e| e.into_inner()).insert(key.clone(), name.clone());
        for (kind, key) in [(StorageKind::Volume, name), (StorageKind::Claim, key)] {
            let event = StorageEvent { kind, action: StorageAction::Update, key };
            engine.on_event(ClusterEvent::Storage(event), self.clock);
        }
        Ok(written.parse().unwrap_or(0))
    }
}

impl MemoryHost<'_> {
    /// Stores a claim's allocation and consumers as the API server does: refused when
    /// the claim changed since it was assumed (its resource version moved on).
    fn write_claim(&self, w: &ClaimWrite) -> Result<u64, String> {
        let mut engine = self.lock();
        let key = w.claim.key();
        let what = super::claim_write_verb(w);
        let Some(current) = engine.cache.objects().dra.api_claim(&key).cloned() else {
            return Err(format!("{what} claim {key}: resourceclaims \"{}\" not found", w.claim.name));
        };
        let base = w.claim.api.metadata.resource_version.clone().unwrap_or_default();
        if current.resource_version != base {
            return Err(format!(
                "{what} claim {key}: Operation cannot be fulfilled on resourceclaims.resource.k8s.io \"{}\": \
                 the object has been modified; please apply your changes to the latest version and try again",
                w.claim.name
            ));
        }
        let version = self.api.next_version();
        let mut object = (*w.claim.api).clone();
        object.metadata.resource_version = Some(version.clone());
        report_binding_conditions(&mut object);
        let claim = algorithms::dra::Claim::from_api(&object)?;
        engine.cache.objects_mut().dra.upsert_claim(claim);
        let event = StorageEvent { kind: StorageKind::ResourceClaim, action: StorageAction::Update, key };
        engine.on_event(ClusterEvent::Storage(event), self.clock);
        Ok(version.parse().unwrap_or(0))
    }
}

/// The in-memory API plays the DRA driver: every binding condition of an allocated
/// device is reported true at once, so the binding cycle goes on (a simulation has no
/// driver that could report them later).
fn report_binding_conditions(object: &mut k8s_openapi::api::resource::v1::ResourceClaim) {
    use k8s_openapi::api::resource::v1::AllocatedDeviceStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
    let Some(status) = object.status.as_mut() else { return };
    let results = status.allocation.as_ref().and_then(|a| a.devices.as_ref()).and_then(|d| d.results.clone());
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    for r in results.into_iter().flatten() {
        let Some(wanted) = r.binding_conditions.filter(|c| !c.is_empty()) else { continue };
        let devices = status.devices.get_or_insert_with(Vec::new);
        let at = match devices.iter().position(|d| d.driver == r.driver && d.pool == r.pool && d.device == r.device) {
            Some(i) => i,
            None => {
                devices.push(AllocatedDeviceStatus {
                    driver: r.driver.clone(),
                    pool: r.pool.clone(),
                    device: r.device.clone(),
                    ..Default::default()
                });
                devices.len() - 1
            }
        };
        let conditions = devices[at].conditions.get_or_insert_with(Vec::new);
        for t in wanted {
            conditions.retain(|c| c.type_ != t);
            conditions.push(Condition {
                type_: t,
                status: "True".into(),
                reason: "Simulated".into(),
                message: "reported by the in-memory API".into(),
                last_transition_time: now.clone(),
                observed_generation: None,
            });
        }
    }
}

impl MemoryHost<'_> {
    /// Creates a pod's extended resource claim with its allocation and consumer, as the
    /// creation and the status write do (refused when the name is taken).
    fn create_claim(&self, w: &ClaimWrite) -> Result<u64, String> {
        let mut engine = self.lock();
        let key = w.claim.key();
        if engine.cache.objects().dra.api_claim(&key).is_some() {
            return Err(format!(
                "create claim for extended resources {key}: resourceclaims \"{}\" already exists",
                w.claim.name
            ));
        }
        let version = self.api.next_version();
        let mut object = (*w.claim.api).clone();
        object.metadata.resource_version = Some(version.clone());
        object.metadata.uid = Some(format!("uid-{}", key.replace('/', "-")));
        report_binding_conditions(&mut object);
        engine.cache.objects_mut().dra.upsert_claim(algorithms::dra::Claim::from_api(&object)?);
        let event = StorageEvent { kind: StorageKind::ResourceClaim, action: StorageAction::Add, key };
        engine.on_event(ClusterEvent::Storage(event), self.clock);
        Ok(version.parse().unwrap_or(0))
    }

    /// Deletes a claim (one already gone is no error).
    fn delete_claim(&self, key: &str) -> Result<u64, String> {
        let mut engine = self.lock();
        if engine.cache.objects_mut().dra.remove_claim(key).is_some() {
            let event =
                StorageEvent { kind: StorageKind::ResourceClaim, action: StorageAction::Delete, key: key.into() };
            engine.on_event(ClusterEvent::Storage(event), self.clock);
        }
        Ok(self.api.next_version().parse().unwrap_or(0))
    }

    /// Takes a pod out of a claim's `reservedFor`, as the strategic-merge patch does (a
    /// claim of another UID, or without the pod, is left as it is).
    fn release_claim(&self, key: &str, claim_uid: &str, pod_uid: &str) -> Result<u64, String> {
        let mut engine = self.lock();
        let Some(current) = engine.cache.objects().dra.api_claim(key).cloned() else {
            return Err(format!("resourceclaims \"{key}\" not found"));
        };
        let mut object = (*current.api).clone();
        let reserved = object.status.as_mut().and_then(|s| s.reserved_for.as_mut());
        let Some(list) = reserved.filter(|l| l.iter().any(|c| c.uid == pod_uid)) else {
            return Ok(0);
        };
        if !claim_uid.is_empty() && current.uid != claim_uid {
            return Err(format!("resourceclaims \"{key}\": the claim's UID is not {claim_uid}"));
        }
        list.retain(|c| c.uid != pod_uid);
        let version = self.api.next_version();
        object.metadata.resource_version = Some(version.clone());
        engine.cache.objects_mut().dra.upsert_claim(algorithms::dra::Claim::from_api(&object)?);
        let event = StorageEvent { kind: StorageKind::ResourceClaim, action: StorageAction::Update, key: key.into() };
        engine.on_event(ClusterEvent::Storage(event), self.clock);
        Ok(version.parse().unwrap_or(0))
    }
}

impl ClusterApi for MemoryHost<'_> {
    async fn write(&self, write: &ApiWrite) -> Result<u64, String> {
        if MemoryApi::injected(&self.api.failing_writes) {
            return Err("the in-memory API server refused the write (injected fault)".into());
        }
        self.apply(write)
    }

    async fn bind(&self, pod: &PodInfo, _node: &str) -> BindOutcome {
        if MemoryApi::injected(&self.api.failing_binds) {
            return BindOutcome::Failed("the in-memory API server refused the binding (injected fault)".into());
        }
        // The watch would confirm the binding; here it is confirmed at once.
        self.lock().cache.confirm(&pod.key());
        BindOutcome::Bound
    }
}

impl Host for MemoryHost<'_> {
    type Api = Self;

    fn api(&self) -> &Self {
        self
    }

    fn with_engine<R>(&self, f: impl FnOnce(&mut Engine) -> R) -> R {
        f(&mut self.lock())
    }

    async fn pause(&self) -> bool {
        false
    }

    async fn throttle(&self) {}

    fn stopping(&self) -> bool {
        false
    }

    fn now(&self) -> Instant {
        self.clock
    }
}

/// Stores the volume and its claim as bound to each other, as the PV controller does.
fn bind(st: &mut VolumeState, claim: &Claim, mut volume: Volume, version: &str) {
    volume.phase = "Bound".into();
    volume.resource_version = version.to_string();
    let mut c = claim.clone();
    c.volume_name = volume.name.clone();
    c.bind_completed = true;
    c.phase = "Bound".into();
    c.resource_version = version.to_string();
    st.upsert_volume(volume);
    st.upsert_claim(c);
}

/// The volume a provisioner creates for a claim on a node with `labels`: the claim's
/// size and modes, reachable from the node's zone (or the keys `allowedTopologies` names).
fn provisioned(st: &VolumeState, claim: &Claim, labels: &Labels) -> Volume {
    let class = st.class(&claim.class).cloned();
    let keys: Vec<String> = match class.as_ref().map(|c| &c.allowed_topologies) {
        Some(terms) if !terms.is_empty() => terms[0].iter().map(|(k, _)| k.clone()).collect(),
        _ => TOPOLOGY_KEYS.iter().find(|k| labels.contains_key(**k)).map(|k| vec![k.to_string()]).unwrap_or_default(),
    };
    let expressions: Vec<Requirement> = keys
        .iter()
        .filter_map(|k| {
            let v = labels.get(k)?;
            let mut sel = LabelSelector::default();
            sel.push(k, Operator::In, v);
            sel.requirements.pop()
        })
        .collect();
    let name = if claim.uid.is_empty() {
        format!("pvc-{}-{}", claim.namespace, claim.name)
    } else {
        format!("pvc-{}", claim.uid)
    };
    Volume {
        name: name.clone(),
        class: claim.class.clone(),
        capacity: claim.request,
        access_modes: claim.access_modes.clone(),
        block: claim.block,
        node_affinity: (!expressions.is_empty()).then(|| NodeSelector {
            terms: vec![NodeSelectorTerm { expressions, fields: Vec::new() }],
            errors: Vec::new(),
        }),
        claim_ref: Some(ClaimRef {
            namespace: claim.namespace.clone(),
            name: claim.name.clone(),
            uid: claim.uid.clone(),
        }),
        phase: "Bound".into(),
        handle: class.map(|c| VolumeHandle { driver: c.provisioner.clone(), handle: name }),
        ..Default::default()
    }
}

//! The binding cycle against the in-memory API: injected failures go through Unreserve,
//! the forget event and the retry, as `run`'s do against the fake API server; and a
//! plugin of every binding role, added to a profile, is run by the cycle in order.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use algorithms::builders::{NodeBuilder, PodBuilder};
use algorithms::dra::DraObjects;
use algorithms::framework::{ApiWrite, Permit, PermitPlugin, PreBindPlugin, Progress, ReservePlugin, Reserved};
use algorithms::objects::ClusterObjects;
use algorithms::volumes::VolumeObjects;
use algorithms::volumes::builders::{GI, class, sized_claim};
use algorithms::{NodeInfo, PodInfo, Status};

use super::memory::{MemoryApi, MemoryHost};
use super::{BindOutcome, BindRequest, ClusterApi, Finished, Host};
use crate::engine::{Cycler, Engine, Outcome};

const ZONE: &str = "topology.kubernetes.io/zone";

/// One node with two CPUs in zone z1, a WaitForFirstConsumer class and one unbound claim.
fn engine(profile: algorithms::Profile) -> (Engine, Cycler) {
    let mut engine = Engine::new(vec![profile]);
    let node = NodeBuilder::new("a").label(ZONE, "z1").capacity("2", "8Gi", "110").build();
    engine.cache.upsert_node(NodeInfo::from_node(&node).unwrap());
    let st = engine.cache.objects_mut().volumes_mut();
    st.upsert_class(class("wffc", "csi.example.com", true));
    st.upsert_claim(sized_claim("data", "wffc", GI));
    let cycler = Cycler::new(&engine, 1);
    (engine, cycler)
}

fn default_engine() -> (Engine, Cycler) {
    engine(algorithms::config::default_profile("custom-scheduler"))
}

/// Schedules the next pod; returns its binding request.
fn schedule(engine: &mut Engine, cycler: &mut Cycler, clock: Instant) -> BindRequest {
    let cycle = cycler.schedule_one(engine, clock).expect("a pod is ready");
    let Outcome::Scheduled { node } = cycle.outcome else { panic!("not scheduled: {:?}", cycle.outcome) };
    BindRequest {
        pod: cycle.queued.pod,
        node,
        attempts: cycle.queued.attempts,
        profile: cycle.profile,
        started: clock,
        queued_since: clock,
    }
}

/// `p` (two CPUs, with the claim) is assumed on the only node; `q` (one CPU) is parked
/// as unschedulable behind it.
fn with_a_pod_assumed_and_one_waiting(clock: Instant) -> (Engine, Cycler, BindRequest) {
    let (mut engine, mut cycler) = default_engine();
    let p = PodBuilder::new("p").scheduler("custom-scheduler").req("2", "1Gi").claim("d", "data").info();
    engine.enqueue(Arc::new(p), clock);
    let req = schedule(&mut engine, &mut cycler, clock);
    let q = PodBuilder::new("q").scheduler("custom-scheduler").req("1", "1Gi").info();
    engine.enqueue(Arc::new(q), clock);
    let cycle = cycler.schedule_one(&mut engine, clock).unwrap();
    assert!(matches!(cycle.outcome, Outcome::Unschedulable { .. }), "{:?}", cycle.outcome);
    assert_eq!(engine.queue.lengths().unschedulable, 1);
    (engine, cycler, req)
}

fn run(engine: &mut Engine, api: &MemoryApi, req: &BindRequest, clock: Instant) -> Finished {
    futures::executor::block_on(super::run(&MemoryHost::new(engine, api, clock), req))
}

#[test]
fn a_failed_prebind_write_unreserves_forgets_wakes_the_waiting_and_retries() {
    let t0 = Instant::now();
    let (mut engine, mut cycler, req) = with_a_pod_assumed_and_one_waiting(t0);
    assert_eq!(engine.cache.objects().volumes().claim("default/data").unwrap().selected_node.as_deref(), Some("a"));
    let api = MemoryApi::default();
    api.fail_writes(1);
    let Finished::Failed { step, message, requeued } = run(&mut engine, &api, &req, t0) else { panic!("bound") };
    assert_eq!(step, "PreBind");
    assert!(message.starts_with("running PreBind plugin \"VolumeBinding\": "), "{message}");
    assert!(requeued);
    // Unreserve: the claim's node selection was only assumed, and is gone.
    assert_eq!(engine.cache.objects().volumes().claim("default/data").unwrap().selected_node, None);
    assert!(!engine.cache.has_reservation("default/p"));
    assert_eq!(engine.cache.node_of("default/p"), None);
    // The forget event freed the CPUs q waited for; p is back with backoff.
    let lengths = engine.queue.lengths();
    assert_eq!((lengths.unschedulable, lengths.backoff), (0, 2), "{lengths:?}");
    // The retry: q leaves, p is scheduled again and bound after its claim.
    engine.queue.delete("default/q");
    let later = t0 + Duration::from_secs(11);
    let req = schedule(&mut engine, &mut cycler, later);
    assert_eq!(req.pod.name, "p");
    assert_eq!(run(&mut engine, &api, &req, later), Finished::Bound);
    let st = engine.cache.objects().volumes();
    let claim = st.api_claim("default/data").unwrap();
    assert!(claim.fully_bound(), "{claim:?}");
    assert!(st.api_volume(&claim.volume_name).unwrap().admits(&[(ZONE.to_string(), "z1".to_string())].into()));
    assert!(!engine.cache.is_assumed("default/p"));
    let reported = api.report(&engine);
    let claims = reported.fields.iter().find(|(name, _)| *name == "claims").map(|(_, v)| v.clone());
    assert_eq!(claims.unwrap_or_default()["default/data"].as_str(), Some(claim.volume_name.as_str()));
}

#[test]
fn a_failed_binding_forgets_wakes_the_waiting_and_retries() {
    let t0 = Instant::now();
    let (mut engine, mut cycler, req) = with_a_pod_assumed_and_one_waiting(t0);
    let api = MemoryApi::default();
    api.fail_binds(1);
    let Finished::Failed { step, requeued, .. } = run(&mut engine, &api, &req, t0) else { panic!("bound") };
    assert_eq!((step, requeued), ("Bind", true));
    assert_eq!(engine.cache.node_of("default/p"), None);
    let lengths = engine.queue.lengths();
    assert_eq!((lengths.unschedulable, lengths.backoff), (0, 2), "{lengths:?}");
    // PreBind had completed: the claim stays bound, and decides p's node on the retry.
    assert!(engine.cache.objects().volumes().api_claim("default/data").unwrap().fully_bound());
    engine.queue.delete("default/q");
    let later = t0 + Duration::from_secs(11);
    let req = schedule(&mut engine, &mut cycler, later);
    assert_eq!((req.pod.name.as_str(), req.node.as_str()), ("p", "a"));
    assert_eq!(run(&mut engine, &api, &req, later), Finished::Bound);
    assert_eq!(engine.cache.node_of("default/p"), Some("a"));
}

/// A plugin with every binding role, keeping a log of its calls. Its Permit makes pods
/// wait `permit_waits` times before allowing them (or rejects them), its PreBind asks
/// for `pre_bind_waits` looks before it is done.
struct Ledger {
    log: Arc<Mutex<Vec<String>>>,
    permit_waits: Mutex<usize>,
    reject: bool,
    pre_bind_waits: Mutex<usize>,
}

impl Ledger {
    fn new(permit_waits: usize, reject: bool, pre_bind_waits: usize) -> Arc<Self> {
        Arc::new(Ledger {
            log: Arc::default(),
            permit_waits: Mutex::new(permit_waits),
            reject,
            pre_bind_waits: Mutex::new(pre_bind_waits),
        })
    }

    fn note(&self, what: String) {
        self.log.lock().unwrap().push(what);
    }

    fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    fn profile(self: &Arc<Self>) -> algorithms::Profile {
        let mut profile = algorithms::config::default_profile("custom-scheduler");
        profile.reserves.push(self.clone());
        profile.permits.push(self.clone());
        profile.pre_binds.push(self.clone());
        profile
    }
}

impl ReservePlugin for Ledger {
    fn name(&self) -> &'static str {
        "Ledger"
    }
    fn reserve(&self, _: &mut ClusterObjects, pod: &PodInfo, node: &NodeInfo) -> Result<Option<Reserved>, Status> {
        self.note(format!("reserve {} on {}", pod.name, node.name));
        Ok(Some(Arc::new(format!("{} on {}", pod.name, node.name))))
    }
    fn unreserve(&self, _: &mut ClusterObjects, key: &str, reserved: &Reserved) {
        self.note(format!("unreserve {key} ({})", reserved.downcast_ref::<String>().unwrap()));
    }
}

impl PermitPlugin for Ledger {
    fn name(&self) -> &'static str {
        "Ledger"
    }
    fn permit(&self, _: &ClusterObjects, pod: &PodInfo, _: &str) -> Permit {
        let mut waits = self.permit_waits.lock().unwrap();
        if *waits > 0 {
            *waits -= 1;
            self.note(format!("permit {}: wait", pod.name));
            return Permit::Wait(Duration::from_secs(30));
        }
        if self.reject {
            self.note(format!("permit {}: reject", pod.name));
            return Permit::Reject(Status::unschedulable("the ledger is closed"));
        }
        self.note(format!("permit {}: allow", pod.name));
        Permit::Allow
    }
}

impl PreBindPlugin for Ledger {
    fn name(&self) -> &'static str {
        "Ledger"
    }
    fn pre_bind(&self, reserved: &Reserved, _: &str) -> Vec<ApiWrite> {
        self.note(format!("pre-bind {}", reserved.downcast_ref::<String>().unwrap()));
        Vec::new()
    }
    fn check(&self, _: &ClusterObjects, _: &Reserved, _: &NodeInfo, _: &[u64]) -> Progress {
        let mut waits = self.pre_bind_waits.lock().unwrap();
        if *waits > 0 {
            *waits -= 1;
            return Progress::Waiting;
        }
        self.note("pre-bind done".into());
        Progress::Done
    }
    fn timeout(&self) -> Duration {
        Duration::from_secs(30)
    }
}

/// The in-memory host whose waits end at once with the objects looked at again, as
/// `run`'s host does after its poll interval.
struct Patient<'a>(MemoryHost<'a>);

impl ClusterApi for Patient<'_> {
    async fn write(&self, write: &ApiWrite) -> Result<u64, String> {
        self.0.write(write).await
    }
    async fn bind(&self, pod: &PodInfo, node: &str) -> BindOutcome {
        self.0.bind(pod, node).await
    }
}

impl Host for Patient<'_> {
    type Api = Self;
    fn api(&self) -> &Self {
        self
    }
    fn with_engine<R>(&self, f: impl FnOnce(&mut Engine) -> R) -> R {
        self.0.with_engine(f)
    }
    async fn pause(&self) -> bool {
        true
    }
    async fn throttle(&self) {}
    fn stopping(&self) -> bool {
        false
    }
    fn now(&self) -> Instant {
        self.0.now()
    }
}

#[test]
fn a_plugin_of_every_binding_role_is_run_in_order_by_the_cycle() {
    let ledger = Ledger::new(2, false, 3);
    let (mut engine, mut cycler) = engine(ledger.profile());
    let t0 = Instant::now();
    engine.enqueue(Arc::new(PodBuilder::new("p").scheduler("custom-scheduler").info()), t0);
    let req = schedule(&mut engine, &mut cycler, t0);
    assert!(engine.permit_deadline("default/p").is_some(), "Permit made the pod wait");
    let api = MemoryApi::default();
    let finished = futures::executor::block_on(super::run(&Patient(MemoryHost::new(&mut engine, &api, t0)), &req));
    assert_eq!(finished, Finished::Bound);
    assert_eq!(
        ledger.log(),
        ["reserve p on a", "permit p: wait", "permit p: wait", "permit p: allow", "pre-bind p on a", "pre-bind done"]
    );
    assert!(engine.permit_deadline("default/p").is_none());
    assert!(!engine.cache.has_reservation("default/p"), "the bound pod's reservation has served");
}

#[test]
fn a_wait_at_permit_that_never_ends_times_out_and_unreserves() {
    // The in-memory API changes nothing while a cycle waits: the wait ends at once.
    let ledger = Ledger::new(usize::MAX, false, 0);
    let (mut engine, mut cycler) = engine(ledger.profile());
    let t0 = Instant::now();
    engine.enqueue(Arc::new(PodBuilder::new("p").scheduler("custom-scheduler").info()), t0);
    let req = schedule(&mut engine, &mut cycler, t0);
    let api = MemoryApi::default();
    let Finished::Failed { step, message, requeued } = run(&mut engine, &api, &req, t0) else { panic!("bound") };
    assert_eq!(step, "Permit");
    assert_eq!(message, "rejected due to timeout after waiting 30s at plugin Ledger");
    assert!(requeued);
    assert_eq!(ledger.log().last().map(String::as_str), Some("unreserve default/p (p on a)"));
    assert!(engine.permit_deadline("default/p").is_none());
}

#[test]
fn a_permit_rejection_leaves_the_pod_unschedulable_and_unreserved() {
    let ledger = Ledger::new(0, true, 0);
    let (mut engine, mut cycler) = engine(ledger.profile());
    let t0 = Instant::now();
    engine.enqueue(Arc::new(PodBuilder::new("p").scheduler("custom-scheduler").info()), t0);
    let cycle = cycler.schedule_one(&mut engine, t0).unwrap();
    let Outcome::Unschedulable { message, .. } = cycle.outcome else { panic!("{:?}", cycle.outcome) };
    assert_eq!(message, "0/1 nodes are available: the ledger is closed.");
    assert_eq!(ledger.log(), ["reserve p on a", "permit p: reject", "unreserve default/p (p on a)"]);
    assert_eq!(engine.cache.node_of("default/p"), None);
    assert_eq!(engine.queue.lengths().unschedulable, 1);
}

/// Node `a` with one GPU of a DRA driver, its class, and the claim `gpu` asking for it.
fn dra_engine() -> (Engine, Cycler) {
    dra_engine_with(serde_json::json!({"name": "gpu-0"}))
}

fn dra_engine_with(device: serde_json::Value) -> (Engine, Cycler) {
    use algorithms::dra::{Claim, DeviceClass, Slice};
    let (mut engine, cycler) = default_engine();
    let dra = engine.cache.objects_mut().dra_mut();
    let class = serde_json::json!({"metadata": {"name": "gpu"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver == \"gpu.example.com\""}}]}});
    dra.upsert_class(DeviceClass::from_api(&serde_json::from_value(class).unwrap()).unwrap());
    let slice = serde_json::json!({"metadata": {"name": "a-gpus"}, "spec": {"driver": "gpu.example.com", "nodeName": "a",
        "pool": {"name": "a", "generation": 1, "resourceSliceCount": 1}, "devices": [device]}});
    dra.upsert_slice(Slice::from_api(&serde_json::from_value(slice).unwrap()).unwrap());
    let claim = serde_json::json!({"metadata": {"name": "gpu", "namespace": "default", "uid": "claim-uid", "resourceVersion": "1"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}});
    dra.upsert_claim(Claim::from_api(&serde_json::from_value(claim).unwrap()).unwrap());
    (engine, cycler)
}

#[test]
fn a_failed_binding_takes_the_pod_out_of_the_claims_it_was_reserved_in() {
    let t0 = Instant::now();
    let (mut engine, mut cycler) = dra_engine();
    let p = PodBuilder::new("p").scheduler("custom-scheduler").req("1", "1Gi").resource_claim("gpu", "gpu").info();
    engine.enqueue(Arc::new(p), t0);
    let req = schedule(&mut engine, &mut cycler, t0);
    let api = MemoryApi::default();
    api.fail_binds(1);
    let Finished::Failed { step, .. } = run(&mut engine, &api, &req, t0) else { panic!("bound") };
    assert_eq!(step, "Bind");
    // PreBind wrote the allocation and the reservation; Unreserve took the pod back out
    // through the API, and left the allocation, as kube-scheduler's Unreserve does.
    let claim = engine.cache.objects().dra().api_claim("default/gpu").unwrap().clone();
    let status = claim.api.status.clone().unwrap_or_default();
    assert!(status.allocation.is_some(), "the allocation stays");
    assert!(status.reserved_for.unwrap_or_default().is_empty(), "the pod left reservedFor");
    // The retry reserves it again and binds.
    let later = t0 + Duration::from_secs(11);
    let req = schedule(&mut engine, &mut cycler, later);
    assert_eq!(run(&mut engine, &api, &req, later), Finished::Bound);
    let claim = engine.cache.objects().dra().api_claim("default/gpu").unwrap().clone();
    let consumers: Vec<String> = claim
        .api
        .status
        .clone()
        .unwrap_or_default()
        .reserved_for
        .unwrap_or_default()
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(consumers, vec!["p".to_string()]);
}

#[test]
fn the_in_memory_api_reports_binding_conditions_as_a_driver_would() {
    let t0 = Instant::now();
    let device = serde_json::json!({"name": "gpu-0", "bindingConditions": ["Attached"]});
    let (mut engine, mut cycler) = dra_engine_with(device);
    let p = PodBuilder::new("p").scheduler("custom-scheduler").req("1", "1Gi").resource_claim("gpu", "gpu").info();
    engine.enqueue(Arc::new(p), t0);
    let req = schedule(&mut engine, &mut cycler, t0);
    assert_eq!(run(&mut engine, &MemoryApi::default(), &req, t0), Finished::Bound);
    let claim = engine.cache.objects().dra().api_claim("default/gpu").unwrap().clone();
    let status = claim.api.status.clone().unwrap_or_default();
    let devices = status.devices.unwrap_or_default();
    let conditions: Vec<(String, String)> =
        devices[0].conditions.clone().unwrap_or_default().into_iter().map(|c| (c.type_, c.status)).collect();
    assert_eq!(conditions, vec![("Attached".to_string(), "True".to_string())]);
    assert!(status.allocation.and_then(|a| a.allocation_timestamp).is_some());
}

//! The in-memory API server of `simulate`: it answers the binding cycle's writes and
//! Bindings at once, each write through the in-memory controller of the owner whose
//! write it is ([`algorithms::owners::Controller`]: the PV controller and provisioner,
//! the DRA driver), with the API server's resource-version preconditions. Faults can be
//! injected to drive the cycle's failure paths, as a test does against the fake API
//! server in `run`.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use algorithms::PodInfo;
use algorithms::events::ClusterEvent;
use algorithms::framework::ApiWrite;
use algorithms::owners::{Controller, Reported, World};
use algorithms::plugins::registry::OWNERS;

use super::{BindOutcome, ClusterApi, Host};
use crate::engine::Engine;

/// What the in-memory API server remembers across binding cycles.
pub struct MemoryApi {
    /// Resource versions it hands out.
    version: AtomicU64,
    /// Each owner's controller.
    controllers: Vec<Box<dyn Controller>>,
    /// Writes to fail before answering again.
    failing_writes: AtomicUsize,
    /// Bindings to fail before answering again.
    failing_binds: AtomicUsize,
}

impl Default for MemoryApi {
    fn default() -> Self {
        MemoryApi {
            version: AtomicU64::new(0),
            controllers: OWNERS.iter().map(|o| o.controller()).collect(),
            failing_writes: AtomicUsize::new(0),
            failing_binds: AtomicUsize::new(0),
        }
    }
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

    /// What the controllers report of the run since the last report, and of the objects
    /// as they are now.
    pub fn report(&self, engine: &Engine) -> Reported {
        let mut out = Reported::default();
        let allocatable = engine.cache.allocatable();
        for c in &self.controllers {
            let r = c.report(engine.cache.objects(), &allocatable);
            out.fields.extend(r.fields);
            out.lines.extend(r.lines);
            out.charts.extend(r.charts);
        }
        out
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
    /// events follow.
    fn apply(&self, write: &ApiWrite) -> Result<u64, String> {
        let mut engine = self.lock();
        let (answer, events) = {
            let (objects, node) = engine.cache.objects_and_nodes();
            let mut world = World { objects, node: &node, versions: &self.api.version, events: Vec::new() };
            let answer = self.api.controllers.iter().find_map(|c| c.apply(write, &mut world));
            (answer, world.events)
        };
        for e in events {
            engine.on_event(ClusterEvent::Object(e), self.clock);
        }
        answer.unwrap_or_else(|| Err(format!("no owner makes the write {write:?}")))
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

//! An in-process fake kube-apiserver over real HTTP (axum on 127.0.0.1:0).
//!
//! It behaves like the real one where the scheduler relies on it: list and watch with
//! resourceVersions (watch history, `410 Gone` once compacted, DELETED when an object
//! leaves a field selector), the pods/binding subresource (404 when gone, 409 when
//! already bound), pod status patches, events and leases (409 on a stale
//! resourceVersion). Faults can be injected: failed requests, slow answers, dropped
//! watches, and a restart that compacts the history.

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::broadcast;

use super::api_util::*;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Node,
    Pod,
    Namespace,
    Lease,
    Event,
    Service,
    ReplicationController,
    ReplicaSet,
    StatefulSet,
    PodDisruptionBudget,
    PersistentVolumeClaim,
    PersistentVolume,
    StorageClass,
}

impl Kind {
    fn from_plural(p: &str) -> Option<Kind> {
        Some(match p {
            "nodes" => Kind::Node,
            "pods" => Kind::Pod,
            "namespaces" => Kind::Namespace,
            "leases" => Kind::Lease,
            "events" => Kind::Event,
            "services" => Kind::Service,
            "replicationcontrollers" => Kind::ReplicationController,
            "replicasets" => Kind::ReplicaSet,
            "statefulsets" => Kind::StatefulSet,
            "poddisruptionbudgets" => Kind::PodDisruptionBudget,
            "persistentvolumeclaims" => Kind::PersistentVolumeClaim,
            "persistentvolumes" => Kind::PersistentVolume,
            "storageclasses" => Kind::StorageClass,
            _ => return None,
        })
    }
    fn list_kind(self) -> &'static str {
        match self {
            Kind::Node => "NodeList",
            Kind::Pod => "PodList",
            Kind::Namespace => "NamespaceList",
            Kind::Lease => "LeaseList",
            Kind::Event => "EventList",
            Kind::Service => "ServiceList",
            Kind::ReplicationController => "ReplicationControllerList",
            Kind::ReplicaSet => "ReplicaSetList",
            Kind::StatefulSet => "StatefulSetList",
            Kind::PodDisruptionBudget => "PodDisruptionBudgetList",
            Kind::PersistentVolumeClaim => "PersistentVolumeClaimList",
            Kind::PersistentVolume => "PersistentVolumeList",
            Kind::StorageClass => "StorageClassList",
        }
    }
}

/// One recorded change, as watches replay it.
#[derive(Clone, Debug)]
pub struct Change {
    pub rv: u64,
    pub kind: Kind,
    pub kind_type: &'static str,
    pub object: Value,
    pub old: Option<Value>,
}

#[derive(Default)]
struct Store {
    rv: u64,
    objects: BTreeMap<(Kind, String, String), Value>,
    history: VecDeque<Change>,
    oldest: u64,
    bindings: Vec<(String, String)>,
    binding_attempts: usize,
    faults: Vec<Fault>,
    delay: Duration,
    epoch: u64,
}

#[derive(Clone, Debug)]
struct Fault {
    method: Option<Method>,
    path_contains: String,
    status: u16,
    remaining: usize,
}

/// A running fake API server.
#[derive(Clone)]
pub struct FakeApi {
    store: Arc<Mutex<Store>>,
    changes: broadcast::Sender<Change>,
    /// Where it listens.
    pub addr: SocketAddr,
}

impl FakeApi {
    /// Starts a server on 127.0.0.1 with an ephemeral port.
    pub async fn start() -> FakeApi {
        let (tx, _) = broadcast::channel(1 << 16);
        let store = Arc::new(Mutex::new(Store { rv: 100, oldest: 100, ..Default::default() }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let api = FakeApi { store, changes: tx, addr };
        let app = Router::new().fallback(handle).with_state(api.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        api
    }

    /// A kubeconfig pointing at this server.
    pub fn kubeconfig(&self) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: http://{}\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\ncurrent-context: fake\nusers:\n- name: fake\n  user: {{}}\n",
            self.addr
        )
    }

    /// Writes the kubeconfig to a temporary file and returns its path.
    /// Each call writes its own file: a scheduler still reading an earlier one never sees it truncated.
    pub fn kubeconfig_file(&self) -> std::path::PathBuf {
        static WRITTEN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = WRITTEN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("fake-kubeconfig-{}-{}-{n}", std::process::id(), self.addr.port());
        let path = std::env::temp_dir().join(name);
        std::fs::write(&path, self.kubeconfig()).unwrap();
        path
    }

    fn record(&self, s: &mut Store, kind: Kind, kind_type: &'static str, object: Value, old: Option<Value>) {
        let change = Change { rv: s.rv, kind, kind_type, object, old };
        s.history.push_back(change.clone());
        let _ = self.changes.send(change);
    }

    fn key_of(kind: Kind, obj: &Value) -> (Kind, String, String) {
        let ns = obj["metadata"]["namespace"].as_str().unwrap_or("").to_string();
        let ns = if kind == Kind::Node || kind == Kind::Namespace { String::new() } else { ns };
        (kind, ns, obj["metadata"]["name"].as_str().unwrap_or("").to_string())
    }

    /// Creates or replaces an object (as a controller or kubectl would).
    pub fn apply(&self, kind: Kind, mut obj: Value) {
        let (api_version, k) = match kind {
            Kind::Node => ("v1", "Node"),
            Kind::Pod => ("v1", "Pod"),
            Kind::Namespace => ("v1", "Namespace"),
            Kind::Lease => ("coordination.k8s.io/v1", "Lease"),
            Kind::Event => ("events.k8s.io/v1", "Event"),
            Kind::Service => ("v1", "Service"),
            Kind::ReplicationController => ("v1", "ReplicationController"),
            Kind::ReplicaSet => ("apps/v1", "ReplicaSet"),
            Kind::StatefulSet => ("apps/v1", "StatefulSet"),
            Kind::PodDisruptionBudget => ("policy/v1", "PodDisruptionBudget"),
            Kind::PersistentVolumeClaim => ("v1", "PersistentVolumeClaim"),
            Kind::PersistentVolume => ("v1", "PersistentVolume"),
            Kind::StorageClass => ("storage.k8s.io/v1", "StorageClass"),
        };
        if obj.get("kind").is_none_or(Value::is_null) {
            obj["apiVersion"] = json!(api_version);
            obj["kind"] = json!(k);
        }
        let mut s = self.store.lock().unwrap();
        s.rv += 1;
        obj["metadata"]["resourceVersion"] = json!(s.rv.to_string());
        if obj["metadata"]["uid"].is_null() {
            obj["metadata"]["uid"] = json!(format!("uid-{}", s.rv));
        }
        if obj["metadata"]["creationTimestamp"].is_null() {
            obj["metadata"]["creationTimestamp"] = json!("2026-01-01T00:00:00Z");
        }
        let key = Self::key_of(kind, &obj);
        let old = s.objects.insert(key, obj.clone());
        let t = if old.is_some() { "MODIFIED" } else { "ADDED" };
        self.record(&mut s, kind, t, obj, old);
    }

    /// Deletes an object.
    pub fn delete(&self, kind: Kind, namespace: &str, name: &str) {
        let mut s = self.store.lock().unwrap();
        let ns = if kind == Kind::Node || kind == Kind::Namespace { "" } else { namespace };
        if let Some(mut old) = s.objects.remove(&(kind, ns.to_string(), name.to_string())) {
            s.rv += 1;
            old["metadata"]["resourceVersion"] = json!(s.rv.to_string());
            self.record(&mut s, kind, "DELETED", old.clone(), Some(old));
        }
    }

    /// An object, if present.
    pub fn get(&self, kind: Kind, namespace: &str, name: &str) -> Option<Value> {
        let s = self.store.lock().unwrap();
        let ns = if kind == Kind::Node || kind == Kind::Namespace { "" } else { namespace };
        s.objects.get(&(kind, ns.to_string(), name.to_string())).cloned()
    }

    /// All objects of a kind.
    pub fn list(&self, kind: Kind) -> Vec<Value> {
        let s = self.store.lock().unwrap();
        s.objects.iter().filter(|((k, _, _), _)| *k == kind).map(|(_, v)| v.clone()).collect()
    }

    /// Every successful binding, in order: (namespace/name, node).
    pub fn bindings(&self) -> Vec<(String, String)> {
        self.store.lock().unwrap().bindings.clone()
    }

    /// How many binding requests arrived (successful or not).
    pub fn binding_attempts(&self) -> usize {
        self.store.lock().unwrap().binding_attempts
    }

    /// Makes the next `count` requests whose path contains `path_contains` fail with `status`.
    pub fn fail_next(&self, method: Option<Method>, path_contains: &str, status: u16, count: usize) {
        self.store.lock().unwrap().faults.push(Fault {
            method,
            path_contains: path_contains.into(),
            status,
            remaining: count,
        });
    }

    /// Drops the injected faults not yet triggered.
    pub fn clear_faults(&self) {
        self.store.lock().unwrap().faults.clear();
    }

    /// Injected faults not yet triggered.
    pub fn faults_remaining(&self) -> usize {
        self.store.lock().unwrap().faults.iter().map(|f| f.remaining).sum()
    }

    /// Delays every answer.
    pub fn set_delay(&self, d: Duration) {
        self.store.lock().unwrap().delay = d;
    }

    /// Closes every open watch (clients reconnect and resume from their resourceVersion).
    pub fn drop_watches(&self) {
        self.store.lock().unwrap().epoch += 1;
        let _ =
            self.changes.send(Change { rv: 0, kind: Kind::Event, kind_type: "EPOCH", object: Value::Null, old: None });
    }

    /// A restart: open watches close and the history is compacted, so resuming
    /// watches get `410 Gone` and must relist.
    pub fn restart(&self) {
        {
            let mut s = self.store.lock().unwrap();
            s.history.clear();
            s.oldest = s.rv;
        }
        self.drop_watches();
    }

    fn check_fault(&self, method: &Method, path: &str) -> Option<u16> {
        let mut s = self.store.lock().unwrap();
        for f in s.faults.iter_mut() {
            if f.remaining > 0 && path.contains(&f.path_contains) && f.method.as_ref().is_none_or(|m| m == method) {
                f.remaining -= 1;
                return Some(f.status);
            }
        }
        None
    }
}

async fn handle(State(api): State<FakeApi>, req: Request) -> Response {
    let method = req.method().clone();
    let uri = req.uri().clone();
    let path = uri.path().to_string();
    let delay = api.store.lock().unwrap().delay;
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    if let Some(code) = api.check_fault(&method, &path) {
        return status(code, "InternalError", "injected fault");
    }
    let body = axum::body::to_bytes(req.into_body(), 64 << 20).await.unwrap_or_default();
    let q = query(&uri);
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    // /api/v1/... or /apis/{group}/{version}/...
    let rest: &[&str] = match segs.as_slice() {
        ["api", "v1", rest @ ..] => rest,
        ["apis", _, _, rest @ ..] => rest,
        ["version"] => {
            return axum::Json(json!({"major": "1", "minor": "36", "gitVersion": "v1.36.0-fake"})).into_response();
        }
        _ => return status(404, "NotFound", &format!("no route for {path}")),
    };
    let (ns, rest) = match rest {
        ["namespaces", ns, more @ ..] if !more.is_empty() => (Some(*ns), more),
        r => (None, r),
    };
    let Some(kind) = rest.first().and_then(|p| Kind::from_plural(p)) else {
        return status(404, "NotFound", &format!("unknown resource in {path}"));
    };
    let name = rest.get(1).copied();
    let sub = rest.get(2).copied();
    match (method.clone(), name, sub) {
        (Method::GET, None, None) if q.get("watch").is_some_and(|w| w == "true" || w == "1") => {
            watch(api, kind, ns, &q).await
        }
        (Method::GET, None, None) => {
            let s = api.store.lock().unwrap();
            let items: Vec<Value> = s
                .objects
                .iter()
                .filter(|((k, ons, _), v)| {
                    *k == kind
                        && ns.is_none_or(|n| n == ons)
                        && matches_fields(v, q.get("fieldSelector").map(String::as_str))
                })
                .map(|(_, v)| v.clone())
                .collect();
            axum::Json(json!({"kind": kind.list_kind(), "apiVersion": "v1",
                              "metadata": {"resourceVersion": s.rv.to_string()}, "items": items}))
            .into_response()
        }
        (Method::GET, Some(name), None) => match api.get(kind, ns.unwrap_or(""), name) {
            Some(v) => axum::Json(v).into_response(),
            None => status(404, "NotFound", &format!("{} \"{name}\" not found", rest[0])),
        },
        (Method::POST, Some(name), Some("binding")) if kind == Kind::Pod => {
            bind(&api, ns.unwrap_or("default"), name, &body)
        }
        (Method::PATCH, Some(name), Some("status")) | (Method::PATCH, Some(name), None) => {
            let Ok(patch) = serde_json::from_slice::<Value>(&body) else {
                return status(400, "BadRequest", "patch is not JSON");
            };
            let Some(mut obj) = api.get(kind, ns.unwrap_or(""), name) else {
                return status(404, "NotFound", &format!("{name} not found"));
            };
            merge(&mut obj, &patch);
            api.apply(kind, obj.clone());
            axum::Json(api.get(kind, ns.unwrap_or(""), name).unwrap_or(obj)).into_response()
        }
        (Method::POST, None, None) => {
            let Ok(mut obj) = serde_json::from_slice::<Value>(&body) else {
                return status(400, "BadRequest", "body is not JSON");
            };
            if let Some(ns) = ns {
                obj["metadata"]["namespace"] = json!(ns);
            }
            if obj["metadata"]["name"].is_null() {
                let prefix = obj["metadata"]["generateName"].as_str().unwrap_or("obj-").to_string();
                let n = api.store.lock().unwrap().rv;
                obj["metadata"]["name"] = json!(format!("{prefix}{n}"));
            }
            let name = obj["metadata"]["name"].as_str().unwrap_or("").to_string();
            if api.get(kind, ns.unwrap_or(""), &name).is_some() {
                return status(409, "AlreadyExists", &format!("{name} already exists"));
            }
            api.apply(kind, obj);
            (StatusCode::CREATED, axum::Json(api.get(kind, ns.unwrap_or(""), &name))).into_response()
        }
        (Method::PUT, Some(name), None) => {
            let Ok(mut obj) = serde_json::from_slice::<Value>(&body) else {
                return status(400, "BadRequest", "body is not JSON");
            };
            let Some(cur) = api.get(kind, ns.unwrap_or(""), name) else {
                return status(404, "NotFound", &format!("{name} not found"));
            };
            let sent_rv = obj["metadata"]["resourceVersion"].as_str().unwrap_or("").to_string();
            if !sent_rv.is_empty() && cur["metadata"]["resourceVersion"].as_str() != Some(sent_rv.as_str()) {
                return status(
                    409,
                    "Conflict",
                    "the object has been modified; please apply your changes to the latest version and try again",
                );
            }
            obj["metadata"]["uid"] = cur["metadata"]["uid"].clone();
            api.apply(kind, obj);
            axum::Json(api.get(kind, ns.unwrap_or(""), name)).into_response()
        }
        (Method::DELETE, Some(name), None) => {
            api.delete(kind, ns.unwrap_or(""), name);
            status(200, "", "deleted")
        }
        _ => status(405, "MethodNotAllowed", &format!("{method} {path} is not supported")),
    }
}

fn bind(api: &FakeApi, ns: &str, name: &str, body: &[u8]) -> Response {
    api.store.lock().unwrap().binding_attempts += 1;
    let Ok(binding) = serde_json::from_slice::<Value>(body) else {
        return status(400, "BadRequest", "binding is not JSON");
    };
    let Some(node) = binding["target"]["name"].as_str().map(str::to_string) else {
        return status(400, "BadRequest", "binding has no target.name");
    };
    let Some(mut pod) = api.get(Kind::Pod, ns, name) else {
        return status(404, "NotFound", &format!("pods \"{name}\" not found"));
    };
    if let Some(cur) = pod["spec"]["nodeName"].as_str().filter(|n| !n.is_empty()) {
        return status(
            409,
            "Conflict",
            &format!(
                "Operation cannot be fulfilled on pods/binding \"{name}\": pod {name} is already assigned to node \"{cur}\""
            ),
        );
    }
    pod["spec"]["nodeName"] = json!(node);
    api.apply(Kind::Pod, pod);
    api.store.lock().unwrap().bindings.push((format!("{ns}/{name}"), node));
    (StatusCode::CREATED, axum::Json(json!({"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201})))
        .into_response()
}

async fn watch(api: FakeApi, kind: Kind, ns: Option<&str>, q: &BTreeMap<String, String>) -> Response {
    let fields = q.get("fieldSelector").cloned();
    let ns = ns.map(str::to_string);
    let timeout = q.get("timeoutSeconds").and_then(|t| t.parse::<u64>().ok()).unwrap_or(60).min(60);
    let rx = api.changes.subscribe();
    let (replay, epoch, gone) = {
        let s = api.store.lock().unwrap();
        let from: u64 = q.get("resourceVersion").and_then(|r| r.parse().ok()).unwrap_or(s.rv);
        let gone = from != 0 && from < s.oldest;
        let replay: Vec<Change> = s.history.iter().filter(|c| c.rv > from).cloned().collect();
        (replay, s.epoch, gone)
    };
    if gone {
        let err = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                         "message": "too old resource version", "reason": "Expired", "code": 410});
        return Response::new(Body::from(watch_event("ERROR", &err)));
    }
    let last_replayed = replay.last().map(|c| c.rv).unwrap_or(0);
    let initial: Vec<Result<Bytes, std::io::Error>> = replay
        .iter()
        .filter_map(|c| visible(c, kind, ns.as_deref(), fields.as_deref()))
        .map(|(t, o)| Ok(watch_event(t, &o)))
        .collect();
    let store = api.store.clone();
    let live = tokio_stream_from_broadcast(rx)
        .take_while(move |c| {
            let alive = store.lock().unwrap().epoch == epoch && c.kind_type != "EPOCH";
            async move { alive }
        })
        .filter_map(move |c| {
            let out = if c.rv <= last_replayed {
                None
            } else {
                visible(&c, kind, ns.as_deref(), fields.as_deref()).map(|(t, o)| Ok(watch_event(t, &o)))
            };
            async move { out }
        });
    let stream = futures::stream::iter(initial).chain(live);
    let limited = tokio_util_timeout(stream, Duration::from_secs(timeout));
    Response::new(Body::from_stream(limited))
}

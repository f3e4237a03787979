//! A pod's effective resource request, computed the way kube-scheduler does.
//!
//! Effective request = max(sum of app containers + restartable (sidecar) init
//! containers, each regular init container + the sidecars started before it),
//! with pod-level requests overriding CPU and memory where set, plus overhead.
//! Requests missing on a container default to its limits, as the API server does.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;

use crate::quantity::{Quantity, QuantityError};
use crate::resource::{CPU, DEFAULT_MEMORY_REQUEST, DEFAULT_MILLI_CPU_REQUEST, MEMORY, Resource};

/// Requests of one pod.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodRequests {
    /// What the pod asks for (used for fit and most scoring).
    pub requests: Resource,
    /// CPU with 100m counted for each container that has no CPU request (scoring only).
    pub non_zero_milli_cpu: i64,
    /// Memory with 200Mi counted for each container that has no memory request (scoring only).
    pub non_zero_memory: i64,
    /// What the pod adds to its node's scoring sums once placed: as the two above, but
    /// with CPU and memory requested at pod level (`spec.resources`) taking the
    /// containers' place, as kube-scheduler's node information counts a placed pod.
    pub placed_non_zero: (i64, i64),
}

/// A request computation error, naming the container and resource.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("container {container:?}: resource {resource:?}: {source}")]
pub struct RequestError {
    /// The container (or `pod` for overhead and pod-level resources).
    pub container: String,
    /// The resource name.
    pub resource: String,
    /// The quantity error.
    #[source]
    pub source: QuantityError,
}

/// Amounts per resource in billionths, added exactly: kube-scheduler sums a pod's
/// quantities before it rounds the total up, so `1073741823500m` and `500m` of memory make
/// exactly 1Gi, not a byte more.
#[derive(Debug, Clone, Default)]
struct Exact(BTreeMap<String, i128>);

impl Exact {
    fn add(&mut self, other: &Exact) {
        for (k, v) in &other.0 {
            *self.0.entry(k.clone()).or_default() += v;
        }
    }

    fn set_max(&mut self, other: &Exact) {
        for (k, v) in &other.0 {
            let e = self.0.entry(k.clone()).or_default();
            *e = (*e).max(*v);
        }
    }

    fn get(&self, name: &str) -> i128 {
        self.0.get(name).copied().unwrap_or(0)
    }

    /// The totals, each rounded up as kube-scheduler rounds them (millicores for CPU,
    /// whole units for the rest).
    fn to_resource(&self) -> Resource {
        let mut r = Resource::default();
        for (name, nanos) in &self.0 {
            let value = if name == CPU { ceil_div(*nanos, 1_000_000) } else { ceil_div(*nanos, 1_000_000_000) };
            r.set_value(name, i64::try_from(value).unwrap_or(i64::MAX));
        }
        r
    }
}

fn ceil_div(n: i128, d: i128) -> i128 {
    if n <= 0 { n / d } else { (n + d - 1) / d }
}

fn parse_list(owner: &str, list: &BTreeMap<String, ApiQuantity>) -> Result<Exact, RequestError> {
    let mut r = Exact::default();
    for (name, q) in list {
        let parsed = Quantity::parse_non_negative(&q.0).map_err(|source| RequestError {
            container: owner.to_string(),
            resource: name.clone(),
            source,
        })?;
        r.0.insert(name.clone(), parsed.nanos());
    }
    Ok(r)
}

/// Requests of one container: its `requests`, with `limits` filling in missing keys.
/// Returns the requests and whether CPU / memory were present at all.
fn container_requests(c: &core::Container) -> Result<(Exact, bool, bool), RequestError> {
    let Some(res) = &c.resources else { return Ok((Exact::default(), false, false)) };
    let mut merged: BTreeMap<String, ApiQuantity> = res.requests.clone().unwrap_or_default();
    for (k, v) in res.limits.iter().flatten() {
        merged.entry(k.clone()).or_insert_with(|| v.clone());
    }
    let has_cpu = merged.contains_key(CPU);
    let has_mem = merged.contains_key(MEMORY);
    Ok((parse_list(&c.name, &merged)?, has_cpu, has_mem))
}

fn with_defaults(mut r: Exact, has_cpu: bool, has_mem: bool) -> Exact {
    if !has_cpu {
        *r.0.entry(CPU.to_string()).or_default() += i128::from(DEFAULT_MILLI_CPU_REQUEST) * 1_000_000;
    }
    if !has_mem {
        *r.0.entry(MEMORY.to_string()).or_default() += i128::from(DEFAULT_MEMORY_REQUEST) * 1_000_000_000;
    }
    r
}

/// Aggregates containers per the sidecar rules; `non_missing` applies the scoring defaults.
fn aggregate(spec: &core::PodSpec, non_missing: bool) -> Result<Exact, RequestError> {
    let mut reqs = Exact::default();
    for c in &spec.containers {
        let (r, cpu, mem) = container_requests(c)?;
        let r = if non_missing { with_defaults(r, cpu, mem) } else { r };
        reqs.add(&r);
    }
    let mut sidecars = Exact::default();
    let mut init_max = Exact::default();
    for c in spec.init_containers.iter().flatten() {
        let (r, cpu, mem) = container_requests(c)?;
        let r = if non_missing { with_defaults(r, cpu, mem) } else { r };
        let step = if c.restart_policy.as_deref() == Some("Always") {
            reqs.add(&r);
            sidecars.add(&r);
            sidecars.clone()
        } else {
            let mut step = r;
            step.add(&sidecars);
            step
        };
        init_max.set_max(&step);
    }
    reqs.set_max(&init_max);
    Ok(reqs)
}

/// Pod-level requests for the resources that support them (cpu, memory, hugepages).
fn pod_level(spec: &core::PodSpec) -> Result<Option<Exact>, RequestError> {
    let Some(res) = &spec.resources else { return Ok(None) };
    let mut merged: BTreeMap<String, ApiQuantity> = BTreeMap::new();
    for (k, v) in res.requests.iter().flatten().chain(res.limits.iter().flatten()) {
        if k == CPU || k == MEMORY || k.starts_with(crate::resource::HUGEPAGES_PREFIX) {
            merged.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
    if merged.is_empty() {
        return Ok(None);
    }
    Ok(Some(parse_list("pod", &merged)?))
}

fn override_pod_level(reqs: &mut Exact, level: &Exact) {
    for (name, v) in &level.0 {
        // CPU and memory at pod level replace the containers' sum when set; hugepages
        // always do.
        if (name != CPU && name != MEMORY) || *v > 0 {
            reqs.0.insert(name.clone(), *v);
        }
    }
}

/// Computes a pod's requests from its spec.
pub fn pod_requests(spec: &core::PodSpec) -> Result<PodRequests, RequestError> {
    let mut requests = aggregate(spec, false)?;
    let mut non_zero = aggregate(spec, true)?;
    let mut placed = non_zero.clone();
    if let Some(level) = pod_level(spec)? {
        // The incoming pod's scoring amounts stay the containers' (with the 100m/200Mi
        // defaults): a pod with only pod-level requests scores as kube-scheduler v1.36.2
        // scores it (recorded on a real one: NodeResourcesFit 92 and 97 on empty 1- and
        // 16-CPU nodes of 4Gi for a pod of 1 CPU and 3Gi at pod level). Once placed, its
        // pod-level requests count on its node (recorded too: NodeResourcesFit 37, not 83,
        // beside a pod of 2 CPUs and 2Gi at pod level on a node of 4 CPUs and 4Gi).
        override_pod_level(&mut requests, &level);
        override_pod_level(&mut placed, &level);
    }
    if let Some(overhead) = &spec.overhead {
        let o = parse_list("overhead", overhead)?;
        requests.add(&o);
        non_zero.add(&o);
        placed.add(&o);
    }
    let milli = |e: &Exact| i64::try_from(ceil_div(e.get(CPU), 1_000_000)).unwrap_or(i64::MAX);
    let bytes = |e: &Exact| i64::try_from(ceil_div(e.get(MEMORY), 1_000_000_000)).unwrap_or(i64::MAX);
    Ok(PodRequests {
        requests: requests.to_resource(),
        non_zero_milli_cpu: milli(&non_zero),
        non_zero_memory: bytes(&non_zero),
        placed_non_zero: (milli(&placed), bytes(&placed)),
    })
}

/// [`pod_requests`] counting, for each container, the larger of its spec and what the
/// kubelet reports it allocated or actuated (`status.containerStatuses[].allocatedResources`
/// and `.resources.requests`), as kube-scheduler counts a pod whose in-place resize is
/// pending or in progress: a node is never overcommitted while a resize is under way.
pub fn pod_requests_with_status(pod: &core::Pod) -> Result<PodRequests, RequestError> {
    let Some(spec) = pod.spec.as_ref() else { return Ok(PodRequests::default()) };
    let Some(status) = pod.status.as_ref() else { return pod_requests(spec) };
    let statuses: Vec<&core::ContainerStatus> = status
        .container_statuses
        .iter()
        .flatten()
        .chain(status.init_container_statuses.iter().flatten())
        .filter(|s| s.allocated_resources.is_some() || s.resources.as_ref().is_some_and(|r| r.requests.is_some()))
        .collect();
    if statuses.is_empty() {
        return pod_requests(spec);
    }
    let mut spec = spec.clone();
    for c in spec.containers.iter_mut().chain(spec.init_containers.iter_mut().flatten()) {
        let Some(s) = statuses.iter().find(|s| s.name == c.name) else { continue };
        let reported = s
            .allocated_resources
            .iter()
            .flatten()
            .chain(s.resources.as_ref().and_then(|r| r.requests.as_ref()).into_iter().flatten());
        let requests = c.resources.get_or_insert_with(Default::default).requests.get_or_insert_with(BTreeMap::new);
        for (name, q) in reported {
            let larger = match requests.get(name) {
                Some(current) => larger_quantity(current, q),
                None => true,
            };
            if larger {
                requests.insert(name.clone(), q.clone());
            }
        }
    }
    pod_requests(&spec)
}

/// Whether `candidate` is larger than `current` (an unparsable one never is).
fn larger_quantity(current: &ApiQuantity, candidate: &ApiQuantity) -> bool {
    match (Quantity::parse(&current.0), Quantity::parse(&candidate.0)) {
        (Ok(a), Ok(b)) => b.nanos() > a.nanos(),
        (Err(_), Ok(_)) => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resize_under_way_counts_the_larger_of_spec_and_what_the_kubelet_reports() {
        let pod = |spec: &str, allocated: Option<&str>, actual: Option<&str>| -> core::Pod {
            let q = |v: &str| BTreeMap::from([(CPU.to_string(), ApiQuantity(v.into()))]);
            core::Pod {
                spec: Some(core::PodSpec {
                    containers: vec![core::Container {
                        name: "app".into(),
                        resources: Some(core::ResourceRequirements { requests: Some(q(spec)), ..Default::default() }),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
                status: Some(core::PodStatus {
                    container_statuses: Some(vec![core::ContainerStatus {
                        name: "app".into(),
                        allocated_resources: allocated.map(q),
                        resources: actual
                            .map(|a| core::ResourceRequirements { requests: Some(q(a)), ..Default::default() }),
                        ..Default::default()
                    }]),
                    ..Default::default()
                }),
                ..Default::default()
            }
        };
        let cases = [
            ("no status", pod("1", None, None), 1000),
            ("resized up, not yet allocated", pod("3", Some("1"), Some("1")), 3000),
            ("resized down, not yet actuated", pod("1", Some("3"), Some("3")), 3000),
            ("allocated down, still running at the old size", pod("1", Some("1"), Some("3")), 3000),
            ("resize done", pod("1", Some("1"), Some("1")), 1000),
        ];
        for (name, p, milli) in cases {
            assert_eq!(pod_requests_with_status(&p).unwrap().requests.milli_cpu, milli, "{name}");
        }
    }

    fn container(name: &str, cpu: Option<&str>, mem: Option<&str>, sidecar: bool) -> core::Container {
        let mut requests = BTreeMap::new();
        if let Some(c) = cpu {
            requests.insert(CPU.to_string(), ApiQuantity(c.into()));
        }
        if let Some(m) = mem {
            requests.insert(MEMORY.to_string(), ApiQuantity(m.into()));
        }
        core::Container {
            name: name.into(),
            resources: Some(core::ResourceRequirements { requests: Some(requests), ..Default::default() }),
            restart_policy: sidecar.then(|| "Always".to_string()),
            ..Default::default()
        }
    }

    fn spec(containers: Vec<core::Container>, init: Vec<core::Container>) -> core::PodSpec {
        core::PodSpec { containers, init_containers: Some(init), ..Default::default() }
    }

    #[test]
    fn init_and_sidecar_rules_table() {
        struct Case {
            name: &'static str,
            spec: core::PodSpec,
            cpu: i64,
            non_zero_cpu: i64,
            non_zero_mem: i64,
        }
        let cases = vec![
            Case {
                name: "app containers add up",
                spec: spec(
                    vec![container("a", Some("1"), Some("1Gi"), false), container("b", Some("500m"), None, false)],
                    vec![],
                ),
                cpu: 1500,
                non_zero_cpu: 1500,
                non_zero_mem: (1 << 30) + DEFAULT_MEMORY_REQUEST,
            },
            Case {
                name: "a larger regular init container wins",
                spec: spec(vec![container("a", Some("1"), None, false)], vec![container("i", Some("3"), None, false)]),
                cpu: 3000,
                non_zero_cpu: 3000,
                non_zero_mem: DEFAULT_MEMORY_REQUEST,
            },
            Case {
                name: "sidecars run beside app containers",
                spec: spec(
                    vec![container("a", Some("1"), Some("1"), false)],
                    vec![container("s", Some("2"), Some("1"), true)],
                ),
                cpu: 3000,
                non_zero_cpu: 3000,
                non_zero_mem: 2,
            },
            Case {
                name: "an init container after a sidecar counts the sidecar",
                spec: spec(
                    vec![container("a", Some("1"), Some("1"), false)],
                    vec![container("s", Some("1"), Some("1"), true), container("i", Some("3"), Some("1"), false)],
                ),
                cpu: 4000,
                non_zero_cpu: 4000,
                non_zero_mem: 2,
            },
            Case {
                name: "an init container before a sidecar does not count it",
                spec: spec(
                    vec![container("a", Some("1"), Some("1"), false)],
                    vec![container("i", Some("3"), Some("1"), false), container("s", Some("1"), Some("1"), true)],
                ),
                cpu: 3000,
                non_zero_cpu: 3000,
                non_zero_mem: 2,
            },
            Case {
                name: "containers without requests count the scoring defaults only",
                spec: spec(vec![container("a", None, None, false), container("b", None, None, false)], vec![]),
                cpu: 0,
                non_zero_cpu: 2 * DEFAULT_MILLI_CPU_REQUEST,
                non_zero_mem: 2 * DEFAULT_MEMORY_REQUEST,
            },
            Case {
                name: "an explicit zero request is not replaced by the default",
                spec: spec(vec![container("a", Some("0"), Some("0"), false)], vec![]),
                cpu: 0,
                non_zero_cpu: 0,
                non_zero_mem: 0,
            },
        ];
        for c in cases {
            let r = pod_requests(&c.spec).unwrap();
            assert_eq!(r.requests.milli_cpu, c.cpu, "{}: cpu", c.name);
            assert_eq!(r.non_zero_milli_cpu, c.non_zero_cpu, "{}: non-zero cpu", c.name);
            assert_eq!(r.non_zero_memory, c.non_zero_mem, "{}: non-zero memory", c.name);
        }
    }

    #[test]
    fn overhead_and_pod_level_requests_apply() {
        let mut s = spec(vec![container("a", Some("1"), Some("1Gi"), false)], vec![]);
        s.overhead = Some([(CPU.to_string(), ApiQuantity("250m".into()))].into());
        s.resources = Some(core::ResourceRequirements {
            requests: Some([(MEMORY.to_string(), ApiQuantity("2Gi".into()))].into()),
            ..Default::default()
        });
        let r = pod_requests(&s).unwrap();
        assert_eq!(r.requests.milli_cpu, 1250);
        assert_eq!(r.requests.memory, 2 << 30);
        // Scoring: the incoming pod by its containers, the placed pod by its pod level.
        assert_eq!((r.non_zero_milli_cpu, r.non_zero_memory), (1250, 1 << 30));
        assert_eq!(r.placed_non_zero, (1250, 2 << 30));
        let mut bare = spec(vec![container("a", None, None, false)], vec![]);
        bare.resources = s.resources.clone();
        let r = pod_requests(&bare).unwrap();
        assert_eq!((r.non_zero_milli_cpu, r.non_zero_memory), (DEFAULT_MILLI_CPU_REQUEST, DEFAULT_MEMORY_REQUEST));
        assert_eq!(r.placed_non_zero, (DEFAULT_MILLI_CPU_REQUEST, 2 << 30), "CPU not set at pod level: the default");
    }

    #[test]
    fn limits_fill_in_missing_requests() {
        let c = core::Container {
            name: "a".into(),
            resources: Some(core::ResourceRequirements {
                limits: Some([(CPU.to_string(), ApiQuantity("2".into()))].into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let r = pod_requests(&spec(vec![c], vec![])).unwrap();
        assert_eq!(r.requests.milli_cpu, 2000);
        assert_eq!(r.non_zero_milli_cpu, 2000);
    }

    #[test]
    fn a_bad_quantity_names_the_container_and_resource() {
        let err = pod_requests(&spec(vec![container("web", Some("lots"), None, false)], vec![])).unwrap_err();
        assert_eq!(err.container, "web");
        assert_eq!(err.resource, "cpu");
        assert!(err.to_string().contains("web"));
    }

    #[test]
    fn negative_requests_are_refused_as_the_api_server_refuses_them() {
        // A negative request would subtract from what the node holds and let pods fit
        // where they do not.
        let err = pod_requests(&spec(vec![container("web", Some("-1500m"), None, false)], vec![])).unwrap_err();
        assert_eq!((err.container.as_str(), err.resource.as_str()), ("web", "cpu"));
        assert!(err.to_string().contains("must be greater than or equal to 0"), "{err}");
        let node = crate::builders::NodeBuilder::new("n").capacity("-4", "1Gi", "10").build();
        let err = crate::NodeInfo::from_node(&node).unwrap_err();
        assert!(err.to_string().contains("must be greater than or equal to 0"), "{err}");
        assert!(pod_requests(&spec(vec![container("web", Some("0"), None, false)], vec![])).is_ok());
    }
}

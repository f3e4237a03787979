//! The extenders against an in-process extender that answers as each test says.

use std::net::SocketAddr;
use std::sync::Mutex;

use algorithms::Code;
use algorithms::builders::{NodeBuilder, PodBuilder, snapshot};
use algorithms::config::default_profile;
use algorithms::framework::{EvaluateOptions, evaluate};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
use rand::SeedableRng;
use rand::rngs::SmallRng;
use serde_json::{Value, json};

use super::*;

type Answer = Box<dyn Fn(&str, &Value) -> (u16, Value) + Send + Sync>;

/// What the test extender was asked: (verb, body).
#[derive(Clone, Default)]
struct Calls(Arc<Mutex<Vec<(String, Value)>>>);

impl Calls {
    fn verbs(&self) -> Vec<String> {
        self.0.lock().unwrap().iter().map(|(v, _)| v.clone()).collect()
    }
    fn body(&self, verb: &str) -> Value {
        self.0.lock().unwrap().iter().find(|(v, _)| v == verb).map(|(_, b)| b.clone()).unwrap_or(Value::Null)
    }
}

/// Serves `answer` on a loopback port in a thread of its own; returns its address.
fn serve(answer: Answer) -> (SocketAddr, Calls) {
    let calls = Calls::default();
    let state = (Arc::new(answer), calls.clone());
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            let app = Router::new()
                .route(
                    "/ext/{verb}",
                    post(
                        |State((answer, calls)): State<(Arc<Answer>, Calls)>,
                         Path(verb): Path<String>,
                         Json(body): Json<Value>| async move {
                            let (code, out) = answer(&verb, &body);
                            calls.0.lock().unwrap().push((verb, body));
                            (StatusCode::from_u16(code).unwrap(), Json(out))
                        },
                    ),
                )
                .with_state(state);
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
    });
    (addr, calls)
}

fn set(configs: Vec<Value>) -> Arc<ExtenderSet> {
    let configs: Vec<ExtenderConfig> = configs.into_iter().map(|c| serde_json::from_value(c).unwrap()).collect();
    ExtenderSet::new(&configs).unwrap().unwrap()
}

fn cluster(n: usize) -> (Vec<k8s_openapi::api::core::v1::Node>, Snapshot) {
    let nodes: Vec<_> = (0..n).map(|i| NodeBuilder::new(&format!("n{i}")).build()).collect();
    let snap = snapshot(&nodes, &[]);
    (nodes, snap)
}

fn pending(set: &ExtenderSet, pod: &Pod, nodes: &[k8s_openapi::api::core::v1::Node]) -> PodInfo {
    let info = PodInfo::from_pod(pod).unwrap();
    set.objects.put_pod(&info.key(), pod);
    for n in nodes {
        set.objects.put_node(n);
    }
    info
}

fn all_feasible(snap: &Snapshot) -> Evaluation {
    Evaluation { num_nodes: snap.len(), feasible: (0..snap.len()).collect(), ..Default::default() }
}

fn names(snap: &Snapshot, idx: &[usize]) -> Vec<String> {
    idx.iter().map(|&i| snap.nodes[i].name.clone()).collect()
}

#[test]
fn filter_keeps_what_the_extender_passes_and_records_its_reasons() {
    let (addr, calls) = serve(Box::new(|_, _| {
        (
            200,
            json!({"NodeNames": ["n0", "n3"], "FailedNodes": {"n1": "too hot", "n2": "ignored: unresolvable wins"},
                   "FailedAndUnresolvableNodes": {"n2": "wrong rack"}, "Error": ""}),
        )
    }));
    let x =
        set(vec![json!({"urlPrefix": format!("http://{addr}/ext"), "filterVerb": "filter", "nodeCacheCapable": true})]);
    let (nodes, snap) = cluster(5);
    let pod = pending(&x, &PodBuilder::new("p").req("1", "1Gi").build(), &nodes);
    let mut ev = all_feasible(&snap);
    x.filter(&pod, &snap, &mut ev);
    assert!(ev.error.is_none(), "{:?}", ev.error);
    assert_eq!(names(&snap, &ev.feasible), ["n0", "n3"]);
    let mut rejected: Vec<(String, String, Code)> =
        ev.rejected.iter().map(|(i, s)| (snap.nodes[i].name.clone(), s.message(), s.code)).collect();
    rejected.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        rejected,
        vec![
            ("n1".into(), "too hot".into(), Code::Unschedulable),
            ("n2".into(), "wrong rack".into(), Code::UnschedulableAndUnresolvable),
        ]
    );
    assert!(ev.rejected.iter().all(|(_, s)| s.plugin == EXTENDER));
    // A node cache capable extender is sent names, not nodes.
    let body = calls.body("filter");
    assert_eq!(body["NodeNames"], json!(["n0", "n1", "n2", "n3", "n4"]));
    assert!(body["Nodes"].is_null());
    assert_eq!(body["Pod"]["metadata"]["name"], "p");
}

#[test]
fn an_extender_without_a_node_cache_is_sent_whole_nodes_and_answers_with_nodes() {
    let (addr, calls) = serve(Box::new(|_, body| {
        let keep: Vec<Value> = body["Nodes"]["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|n| n["metadata"]["name"] != "n1")
            .cloned()
            .collect();
        (200, json!({"Nodes": {"items": keep}, "FailedNodes": null, "FailedAndUnresolvableNodes": null, "Error": ""}))
    }));
    let x = set(vec![json!({"urlPrefix": format!("http://{addr}/ext/"), "filterVerb": "filter"})]);
    let (nodes, snap) = cluster(3);
    let pod = pending(&x, &PodBuilder::new("p").build(), &nodes);
    let mut ev = all_feasible(&snap);
    x.filter(&pod, &snap, &mut ev);
    assert!(ev.error.is_none(), "{:?}", ev.error);
    assert_eq!(names(&snap, &ev.feasible), ["n0", "n2"]);
    // Dropped without a reason: no rejection is recorded for it.
    assert!(ev.rejected.is_empty());
    let body = calls.body("filter");
    assert_eq!(body["Nodes"]["items"].as_array().map(Vec::len), Some(3));
    assert_eq!(body["Nodes"]["items"][0]["status"]["allocatable"]["cpu"], "32");
}

#[test]
fn errors_stop_the_attempt_unless_the_extender_is_ignorable() {
    let (addr, _) = serve(Box::new(|_, _| (500, json!({}))));
    let (nodes, snap) = cluster(2);
    let cases = [
        (json!({"urlPrefix": format!("http://{addr}/ext"), "filterVerb": "filter"}), Some("code 500")),
        (json!({"urlPrefix": format!("http://{addr}/ext"), "filterVerb": "filter", "ignorable": true}), None),
        // Nothing listens on port 9 of loopback.
        (
            json!({"urlPrefix": "http://127.0.0.1:9/ext", "filterVerb": "filter"}),
            Some("Post \"http://127.0.0.1:9/ext/filter\""),
        ),
        (json!({"urlPrefix": "http://127.0.0.1:9/ext", "filterVerb": "filter", "ignorable": true}), None),
    ];
    for (cfg, want) in cases {
        let x = set(vec![cfg.clone()]);
        let pod = pending(&x, &PodBuilder::new("p").build(), &nodes);
        let mut ev = all_feasible(&snap);
        x.filter(&pod, &snap, &mut ev);
        match want {
            Some(w) => {
                let err = ev.error.as_ref().map(|s| (s.plugin, s.message()));
                assert!(err.as_ref().is_some_and(|(p, m)| *p == EXTENDER && m.contains(w)), "{cfg}: {err:?}");
            }
            None => {
                assert!(ev.error.is_none(), "{cfg}: {:?}", ev.error);
                assert_eq!(ev.feasible, vec![0, 1], "{cfg}");
            }
        }
    }
}

#[test]
fn an_answer_naming_a_node_it_was_not_sent_is_an_error() {
    let (addr, _) = serve(Box::new(|_, _| (200, json!({"NodeNames": ["elsewhere"]}))));
    let x = set(vec![json!({"urlPrefix": format!("http://{addr}/ext"), "filterVerb": "f", "nodeCacheCapable": true})]);
    let (nodes, snap) = cluster(2);
    let pod = pending(&x, &PodBuilder::new("p").build(), &nodes);
    let mut ev = all_feasible(&snap);
    x.filter(&pod, &snap, &mut ev);
    let msg = ev.error.map(|s| s.message()).unwrap_or_default();
    assert!(msg.contains("claims a filtered node \"elsewhere\" which is not found in the input node list"), "{msg}");
}

#[test]
fn an_extender_managing_resources_is_asked_only_about_pods_that_use_them() {
    let (addr, calls) = serve(Box::new(|_, _| (200, json!({"NodeNames": []}))));
    let x =
        set(vec![json!({"urlPrefix": format!("http://{addr}/ext"), "filterVerb": "filter", "nodeCacheCapable": true,
        "managedResources": [{"name": "example.com/gpu"}]})]);
    let (nodes, snap) = cluster(2);
    let plain = pending(&x, &PodBuilder::new("plain").req("1", "1Gi").build(), &nodes);
    let mut ev = all_feasible(&snap);
    x.filter(&plain, &snap, &mut ev);
    assert_eq!(ev.feasible, vec![0, 1]);
    assert!(calls.verbs().is_empty());
    let gpu = pending(&x, &PodBuilder::new("gpu").device("example.com/gpu", "1").build(), &nodes);
    x.filter(&gpu, &snap, &mut ev);
    assert_eq!(calls.verbs(), ["filter"]);
    assert!(ev.feasible.is_empty());
}

#[test]
fn prioritize_scores_are_weighted_and_scaled_and_failures_give_nothing() {
    let (addr, _) = serve(Box::new(|_, _| (200, json!([{"Host": "n1", "Score": 7}, {"Host": "n2", "Score": 10}]))));
    let (down, _) = serve(Box::new(|_, _| (503, json!({}))));
    let x = set(vec![
        json!({"urlPrefix": format!("http://{addr}/ext"), "prioritizeVerb": "prioritize", "weight": 3, "nodeCacheCapable": true}),
        json!({"urlPrefix": format!("http://{down}/ext"), "prioritizeVerb": "prioritize", "weight": 5}),
    ]);
    let (nodes, snap) = cluster(3);
    let pod = pending(&x, &PodBuilder::new("p").build(), &nodes);
    assert_eq!(x.score(&pod, &snap, &[0, 1, 2]), vec![0, 210, 300]);
    // Aligned with the nodes asked about.
    assert_eq!(x.score(&pod, &snap, &[2, 0]), vec![300, 0]);
}

#[test]
fn the_profile_calls_the_extenders_between_its_filters_and_its_scores() {
    // The extender rejects n0 and prefers n2 strongly enough to outweigh every plugin.
    let (addr, calls) = serve(Box::new(|verb, body| match verb {
        "filter" => {
            let keep: Vec<&Value> = body["NodeNames"].as_array().unwrap().iter().filter(|n| *n != "n0").collect();
            (200, json!({"NodeNames": keep, "FailedNodes": {"n0": "busy"}}))
        }
        _ => (200, json!([{"Host": "n2", "Score": 10}])),
    }));
    let x = set(vec![json!({"urlPrefix": format!("http://{addr}/ext"), "filterVerb": "filter",
        "prioritizeVerb": "prioritize", "weight": 100, "nodeCacheCapable": true})]);
    let (nodes, snap) = cluster(4);
    let pod = pending(&x, &PodBuilder::new("p").req("1", "1Gi").build(), &nodes);
    let mut profile = default_profile("custom-scheduler");
    profile.extenders = Some(x.clone() as Arc<dyn Extenders>);
    let mut rng = SmallRng::seed_from_u64(1);
    let ev = evaluate(&profile, &pod, &snap, &mut rng, EvaluateOptions::default());
    assert_eq!(ev.selected.map(|i| snap.nodes[i].name.as_str()), Some("n2"));
    assert_eq!(names(&snap, &ev.feasible), ["n1", "n2", "n3"]);
    assert_eq!(calls.verbs(), ["filter", "prioritize"]);
    // Prioritize is asked about the nodes the filter kept.
    assert_eq!(calls.body("prioritize")["NodeNames"], json!(["n1", "n2", "n3"]));
    let busy: Vec<usize> = ev.rejected.iter().filter(|(_, s)| s.message() == "busy").map(|(i, _)| i).collect();
    assert_eq!(busy, vec![0]);
}

#[test]
fn the_first_interested_binder_binds_and_an_ignorable_failure_falls_through() {
    let (addr, calls) = serve(Box::new(|_, _| (200, json!({"Error": ""}))));
    let x = set(vec![json!({"urlPrefix": format!("http://{addr}/ext"), "bindVerb": "bind"})]);
    let (nodes, _) = cluster(1);
    let pod = pending(&x, &PodBuilder::new("p").build(), &nodes);
    assert_eq!(x.bind(&pod, "n0"), Some(Ok(())));
    let body = calls.body("bind");
    assert_eq!(body["PodName"], "p");
    assert_eq!(body["PodNamespace"], "default");
    assert_eq!(body["Node"], "n0");

    let (refuses, _) = serve(Box::new(|_, _| (200, json!({"Error": "no room"}))));
    let strict = set(vec![json!({"urlPrefix": format!("http://{refuses}/ext"), "bindVerb": "bind"})]);
    let pod = pending(&strict, &PodBuilder::new("p").build(), &nodes);
    assert_eq!(strict.bind(&pod, "n0"), Some(Err("no room".to_string())));
    let lenient =
        set(vec![json!({"urlPrefix": format!("http://{refuses}/ext"), "bindVerb": "bind", "ignorable": true})]);
    let pod = pending(&lenient, &PodBuilder::new("p").build(), &nodes);
    assert_eq!(lenient.bind(&pod, "n0"), None);
}

#[test]
fn ignorable_extenders_are_called_last() {
    let x = set(vec![
        json!({"urlPrefix": "http://a", "ignorable": true}),
        json!({"urlPrefix": "http://b"}),
        json!({"urlPrefix": "http://c", "ignorable": true}),
        json!({"urlPrefix": "http://d"}),
    ]);
    let order: Vec<&str> = x.extenders().iter().map(HttpExtender::name).collect();
    assert_eq!(order, ["http://b", "http://d", "http://a", "http://c"]);
}

fn preemption_cluster() -> (Vec<k8s_openapi::api::core::v1::Node>, Snapshot) {
    let nodes: Vec<_> = (0..2).map(|i| NodeBuilder::new(&format!("n{i}")).build()).collect();
    let victims = [PodBuilder::new("v0").node_name("n0").build(), PodBuilder::new("v1").node_name("n1").build()];
    let snap = snapshot(&nodes, &victims);
    (nodes, snap)
}

fn candidates(snap: &Snapshot) -> Vec<Candidate> {
    (0..2).map(|i| Candidate { node: i, victims: snap.nodes[i].pods.to_vec(), pdb_violations: 0 }).collect()
}

#[test]
fn preempt_narrows_candidates_to_those_the_extender_agrees_with() {
    let (addr, calls) = serve(Box::new(|_, _| {
        (200, json!({"NodeNameToMetaVictims": {"n1": {"Pods": [{"UID": "uid-v1"}], "NumPDBViolations": 0}}}))
    }));
    let x = set(vec![
        json!({"urlPrefix": format!("http://{addr}/ext"), "preemptVerb": "preempt", "nodeCacheCapable": true}),
    ]);
    let (nodes, snap) = preemption_cluster();
    let pod = pending(&x, &PodBuilder::new("p").priority(10).build(), &nodes);
    let kept = x.preempt(&pod, &snap, candidates(&snap)).unwrap();
    let kept: Vec<(usize, Vec<String>)> =
        kept.iter().map(|c| (c.node, c.victims.iter().map(|v| v.name.clone()).collect())).collect();
    assert_eq!(kept, vec![(1, vec!["v1".to_string()])]);
    let body = calls.body("preempt");
    assert_eq!(body["NodeNameToMetaVictims"]["n0"]["Pods"][0]["UID"], "uid-v0");
    assert!(body["NodeNameToVictims"].is_null());
}

#[test]
fn preempt_answers_kube_scheduler_refuses_are_errors_unless_ignorable() {
    let (nodes, snap) = preemption_cluster();
    let answers = [
        (
            json!({"NodeNameToMetaVictims": {"n0": {"Pods": [{"UID": "uid-v1"}]}}}),
            "claims to preempt pod (UID: uid-v1) on node: n0",
        ),
        (json!({"NodeNameToMetaVictims": {"n0": {"Pods": []}}}), "expected at least one victim pod on node \"n0\""),
        (
            json!({"NodeNameToMetaVictims": {"elsewhere": {"Pods": []}}}),
            "nodeinfo not found for node name \"elsewhere\"",
        ),
    ];
    for (answer, want) in answers {
        let a = answer.clone();
        let (addr, _) = serve(Box::new(move |_, _| (200, a.clone())));
        let strict = set(vec![
            json!({"urlPrefix": format!("http://{addr}/ext"), "preemptVerb": "preempt", "nodeCacheCapable": true}),
        ]);
        let pod = pending(&strict, &PodBuilder::new("p").priority(10).build(), &nodes);
        let err = strict.preempt(&pod, &snap, candidates(&snap)).unwrap_err();
        assert!(err.contains(want), "{answer}: {err}");
        let lenient = set(vec![json!({"urlPrefix": format!("http://{addr}/ext"), "preemptVerb": "preempt",
            "nodeCacheCapable": true, "ignorable": true})]);
        let pod = pending(&lenient, &PodBuilder::new("p").priority(10).build(), &nodes);
        assert!(lenient.preempt(&pod, &snap, candidates(&snap)).is_ok(), "{answer}");
    }
}

#[test]
fn preemption_nominates_only_where_the_extender_agrees() {
    // Two full nodes, each with one low-priority pod; the extender only agrees to n1.
    let (addr, _) = serve(Box::new(|_, _| {
        (200, json!({"NodeNameToMetaVictims": {"n1": {"Pods": [{"UID": "uid-v1"}], "NumPDBViolations": 0}}}))
    }));
    let x = set(vec![
        json!({"urlPrefix": format!("http://{addr}/ext"), "preemptVerb": "preempt", "nodeCacheCapable": true}),
    ]);
    let nodes: Vec<_> = (0..2).map(|i| NodeBuilder::new(&format!("n{i}")).build()).collect();
    let victims = [
        PodBuilder::new("v0").node_name("n0").req("32", "1Gi").build(),
        PodBuilder::new("v1").node_name("n1").req("32", "1Gi").build(),
    ];
    let mut snap = snapshot(&nodes, &victims);
    let pod = pending(&x, &PodBuilder::new("p").priority(10).req("1", "1Gi").build(), &nodes);
    let mut profile = default_profile("custom-scheduler");
    profile.extenders = Some(x.clone() as Arc<dyn Extenders>);
    let mut rng = SmallRng::seed_from_u64(1);
    for _ in 0..5 {
        let ev = evaluate(&profile, &pod, &snap, &mut rng, EvaluateOptions::default());
        assert!(ev.selected.is_none());
        let result = algorithms::framework::run_post_filters(&profile, &pod, &mut snap, &ev, &mut rng);
        match result {
            Some(algorithms::framework::PostFilterResult::Nominate(c)) => assert_eq!(c.node, 1),
            other => panic!("{other:?}"),
        }
    }
}

/// Serves the answer over HTTPS with a certificate for 127.0.0.1 signed by a test CA;
/// returns the address and the CA's PEM.
fn serve_https(answer: Answer) -> (SocketAddr, String, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let certs = testing::certs::Certificates::write(dir.path()).unwrap();
    let ca = std::fs::read_to_string(&certs.ca).unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let answer = Arc::new(answer);
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            let tls = axum_server::tls_rustls::RustlsConfig::from_pem_file(&certs.serving_cert, &certs.serving_key)
                .await
                .unwrap();
            let app = Router::new().route(
                "/ext/{verb}",
                post(move |Path(verb): Path<String>, Json(body): Json<Value>| {
                    let answer = answer.clone();
                    async move { Json(answer(&verb, &body).1) }
                }),
            );
            axum_server::from_tcp_rustls(listener, tls).unwrap().serve(app.into_make_service()).await.unwrap();
        });
    });
    (addr, ca, dir)
}

#[test]
fn https_extenders_are_verified_against_the_configured_authority() {
    let (addr, ca, _dir) = serve_https(Box::new(|_, _| (200, json!({"NodeNames": ["n1"]}))));
    let (nodes, snap) = cluster(2);
    let url = format!("https://{addr}/ext");
    let b64 = |s: &str| k8s_openapi::ByteString(s.as_bytes().to_vec());
    let ca_data = serde_json::to_value(b64(&ca)).unwrap();
    let other_ca = {
        let dir = tempfile::tempdir().unwrap();
        let c = testing::certs::Certificates::write(dir.path()).unwrap();
        serde_json::to_value(b64(&std::fs::read_to_string(c.ca).unwrap())).unwrap()
    };
    let cases = [
        // The server's own authority: verified.
        (json!({"enableHTTPS": true, "tlsConfig": {"caData": ca_data}}), true),
        // HTTPS without an authority is not verified, as kube-scheduler's transport.
        (json!({"enableHTTPS": true}), true),
        // Another authority: refused.
        (json!({"enableHTTPS": true, "tlsConfig": {"caData": other_ca}}), false),
        // Another authority, told to skip verification.
        (json!({"enableHTTPS": true, "tlsConfig": {"caData": other_ca, "insecure": true}}), true),
    ];
    for (tls, ok) in cases {
        let mut cfg = json!({"urlPrefix": url, "filterVerb": "filter", "nodeCacheCapable": true});
        cfg.as_object_mut().unwrap().extend(tls.as_object().unwrap().clone());
        let x = set(vec![cfg.clone()]);
        let pod = pending(&x, &PodBuilder::new("p").build(), &nodes);
        let mut ev = all_feasible(&snap);
        x.filter(&pod, &snap, &mut ev);
        if ok {
            assert!(ev.error.is_none(), "{cfg}: {:?}", ev.error);
            assert_eq!(names(&snap, &ev.feasible), ["n1"], "{cfg}");
        } else {
            assert!(ev.error.is_some(), "{cfg}: an unknown authority was accepted");
        }
    }
}

#[test]
fn pods_no_extender_judges_keep_the_equivalence_cache_and_make_no_call() {
    let (addr, calls) = serve(Box::new(|_, _| (200, json!({"NodeNames": []}))));
    let x =
        set(vec![json!({"urlPrefix": format!("http://{addr}/ext"), "filterVerb": "filter", "nodeCacheCapable": true,
        "managedResources": [{"name": "example.com/gpu"}]})]);
    let nodes: Vec<_> =
        (0..3).map(|i| NodeBuilder::new(&format!("n{i}")).resource("example.com/gpu", "4").build()).collect();
    let snap = snapshot(&nodes, &[]);
    let plain = pending(&x, &PodBuilder::new("plain").req("1", "1Gi").build(), &nodes);
    let gpu = pending(&x, &PodBuilder::new("gpu").device("example.com/gpu", "1").build(), &nodes);
    assert!(!x.applies_to(&plain));
    assert!(x.applies_to(&gpu));
    let mut profile = default_profile("custom-scheduler");
    profile.extenders = Some(x.clone() as Arc<dyn Extenders>);
    let mut rng = SmallRng::seed_from_u64(1);
    let mut cache = algorithms::framework::EquivalenceCache::new();
    let opts = EvaluateOptions::default();
    let ev = algorithms::framework::evaluate_cached(&profile, &plain, &snap, &mut rng, opts.clone(), &mut cache);
    assert!(ev.selected.is_some());
    assert!(calls.verbs().is_empty());
    // The extender rejects every node for the GPU pod (it answers with none).
    let ev = algorithms::framework::evaluate_cached(&profile, &gpu, &snap, &mut rng, opts, &mut cache);
    assert_eq!(calls.verbs(), ["filter"]);
    assert!(ev.selected.is_none());
}

//! Our `/metrics` against kube-scheduler v1.36.2's after each drained the same backlog on
//! a real kube-apiserver (started by the test from `KUBE_ASSETS`): every `scheduler_*`
//! family kube-scheduler exposes is exposed by ours with the same type and label names,
//! or is listed in the README as not applicable, with the reason.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod realapi;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use algorithms::builders::{NodeBuilder, PodBuilder};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use realapi::{Ours, plane};
use serde_json::json;
use testing::api::{self, node_of, wait_for};

const NS: &str = "default";

/// A metric family: its type and the label names its series carry (`le` and `quantile`
/// left out).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Family {
    kind: String,
    labels: BTreeSet<String>,
}

/// The `scheduler_*` families of a Prometheus text page.
fn families(page: &str) -> BTreeMap<String, Family> {
    let mut out: BTreeMap<String, Family> = BTreeMap::new();
    for line in page.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut parts = rest.split_whitespace();
            if let (Some(name), Some(kind)) = (parts.next(), parts.next())
                && name.starts_with("scheduler_")
            {
                // OpenMetrics names a counter family without its `_total`; the Prometheus
                // text format (kube-scheduler's) with it.
                let name = match kind {
                    "counter" if !name.ends_with("_total") => format!("{name}_total"),
                    _ => name.to_string(),
                };
                out.insert(name, Family { kind: kind.to_string(), labels: BTreeSet::new() });
            }
        }
    }
    for line in page.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, _)) = line.rsplit_once(' ') else { continue };
        let (name, labels) = series.split_once('{').unwrap_or((series, ""));
        let family = ["_bucket", "_sum", "_count", "_total", "_created", ""]
            .iter()
            .filter_map(|s| name.strip_suffix(s))
            .find(|f| out.contains_key(*f));
        let Some(f) = family.and_then(|f| out.get_mut(f)) else { continue };
        for pair in labels.trim_end_matches('}').split("\",") {
            if let Some((k, _)) = pair.split_once('=')
                && !k.is_empty()
                && k != "le"
                && k != "quantile"
            {
                f.labels.insert(k.trim().to_string());
            }
        }
    }
    out
}

/// The families the README lists as not applicable (its "Metrics not exposed" table).
fn not_applicable() -> BTreeSet<String> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    let section = readme.split("#### kube-scheduler metrics not exposed").nth(1).unwrap_or_default();
    section
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .filter_map(|l| l.split('|').nth(1))
        .map(|c| c.trim().trim_matches('`').to_string())
        .filter(|c| c.starts_with("scheduler_"))
        .collect()
}

/// Eight nodes, a class of pods that never preempt, and a backlog: pods that fit, one that
/// fits nowhere, and a high-priority pod that preempts a low-priority one.
async fn backlog(client: &kube::Client, scheduler: &str) {
    for i in 0..8 {
        api::create_node(client, &NodeBuilder::new(&format!("n{i}")).capacity("4", "8Gi", "110").build())
            .await
            .unwrap();
    }
    let classes = [("low", 0), ("high", 1000)];
    for (name, value) in classes {
        let class: k8s_openapi::api::scheduling::v1::PriorityClass =
            serde_json::from_value(json!({"metadata": {"name": name}, "value": value})).unwrap();
        Api::all(client.clone()).create(&PostParams::default(), &class).await.unwrap();
    }
    let pod = |name: &str| PodBuilder::new(name).namespace(NS).scheduler(scheduler);
    let mut pods: Vec<Pod> = (0..40).map(|i| pod(&format!("p-{i}")).req("100m", "128Mi").build()).collect();
    pods.push(pod("too-big").req("64", "1Gi").build());
    api::create_pods(client, &pods, 8).await.unwrap();
    api::wait_bound(client, NS, 40, Duration::from_secs(60)).await;
    // A low-priority pod fills n0; a high-priority pod that only n0 takes preempts it.
    let filler = pod("filler").req("3500m", "1Gi").priority_class("low").node_selector("kubernetes.io/hostname", "n0");
    api::create_pod(client, &filler.build()).await.unwrap();
    api::wait_bound(client, NS, 41, Duration::from_secs(60)).await;
    let urgent = pod("urgent").req("3500m", "1Gi").priority_class("high").node_selector("kubernetes.io/hostname", "n0");
    api::create_pod(client, &urgent.build()).await.unwrap();
    wait_for("the filler to be evicted", Duration::from_secs(60), || async {
        let p = Api::<Pod>::namespaced(client.clone(), NS).get("filler").await.ok();
        (p.is_none() || p.is_some_and(|p| p.metadata.deletion_timestamp.is_some())).then_some(())
    })
    .await;
    // No kubelet: the evicted pod is removed as a kubelet would.
    let now = kube::api::DeleteParams { grace_period_seconds: Some(0), ..Default::default() };
    let _ = Api::<Pod>::namespaced(client.clone(), NS).delete("filler", &now).await;
    wait_for("the urgent pod to be bound", Duration::from_secs(60), || async {
        let p = Api::<Pod>::namespaced(client.clone(), NS).get("urgent").await.ok()?;
        node_of(&p).map(|_| ())
    })
    .await;
}

/// GET over HTTPS with the admin token, not verifying the scheduler's self-signed certificate.
fn https_get(url: &str, token: &str) -> String {
    let tls = ureq::tls::TlsConfig::builder().disable_verification(true).build();
    let agent: ureq::Agent = ureq::Agent::config_builder().tls_config(tls).build().into();
    let mut resp = agent.get(url).header("Authorization", &format!("Bearer {token}")).call().unwrap();
    resp.body_mut().read_to_string().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_metrics_are_kube_schedulers_families() {
    let Some(p) = plane("our_metrics_are_kube_schedulers_families").await else { return };
    let port = testing::free_port().unwrap();
    let flags = ["-v=2".to_string(), format!("--secure-port={port}")];
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let config = json!({"profiles": [{"schedulerName": "default-scheduler"}]});
    let _kube = testing::start_kube_scheduler_with(&p.plane, "kube-scheduler", config, &flags).unwrap();
    backlog(&p.client, "default-scheduler").await;
    let url = format!("https://127.0.0.1:{port}/metrics");
    let token = p.plane.token().to_string();
    let kube_page = tokio::task::spawn_blocking(move || https_get(&url, &token)).await.unwrap();
    drop(p);

    let Some(p) = plane("our_metrics_are_kube_schedulers_families").await else { return };
    let ours = Ours::start(&p.plane, "custom-scheduler", None, &[]);
    backlog(&p.client, "custom-scheduler").await;
    let our_page = ours.get("/metrics").await.unwrap();

    let (kube, mine, skipped) = (families(&kube_page), families(&our_page), not_applicable());
    assert!(kube.len() > 20, "kube-scheduler's page: {kube:?}");
    let mut missing = Vec::new();
    for (name, f) in &kube {
        match mine.get(name) {
            _ if skipped.contains(name) => {}
            Some(m) if m == f => {}
            Some(m) => missing
                .push(format!("{name}: ours {} {:?}, kube-scheduler's {} {:?}", m.kind, m.labels, f.kind, f.labels)),
            None => missing.push(format!("{name}: missing ({} {:?})", f.kind, f.labels)),
        }
    }
    println!(
        "kube-scheduler exposed {} scheduler_* families; {} listed as not applicable; ours exposes {}",
        kube.len(),
        skipped.len(),
        mine.len()
    );
    println!("kube-scheduler's: {:?}", kube.keys().collect::<Vec<_>>());
    // The extension points each side times.
    let points = |page: &str| -> BTreeSet<String> {
        page.lines()
            .filter(|l| l.starts_with("scheduler_framework_extension_point_duration_seconds_count"))
            .filter_map(|l| l.split("extension_point=\"").nth(1)?.split('"').next().map(String::from))
            .collect()
    };
    let (kube_points, our_points) = (points(&kube_page), points(&our_page));
    println!("extension points timed: kube-scheduler {kube_points:?}, ours {our_points:?}");
    // Filter, PreScore and Score run fused per node here (docs/architecture.md says so).
    let fused: BTreeSet<String> = ["Filter", "PreScore", "Score"].iter().map(|s| s.to_string()).collect();
    let untimed: Vec<&String> = kube_points.difference(&our_points).filter(|p| !fused.contains(*p)).collect();
    assert!(untimed.is_empty(), "extension points kube-scheduler times and ours does not: {untimed:?}");
    let listed_but_exposed: Vec<&String> = skipped.iter().filter(|s| mine.contains_key(*s)).collect();
    assert!(listed_but_exposed.is_empty(), "listed as not applicable yet exposed: {listed_but_exposed:?}");
    assert!(missing.is_empty(), "{} families differ:\n{}", missing.len(), missing.join("\n"));
}

/// A service account's token, from the API server's TokenRequest.
async fn token(client: &kube::Client, ns: &str, name: &str) -> String {
    use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
    use k8s_openapi::api::core::v1::ServiceAccount;
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    let account = ServiceAccount {
        metadata: kube::api::ObjectMeta { name: Some(name.into()), ..Default::default() },
        ..Default::default()
    };
    accounts.create(&PostParams::default(), &account).await.unwrap();
    let request = TokenRequest { spec: Some(TokenRequestSpec::default()), ..Default::default() };
    let issued: TokenRequest =
        accounts.create_subresource("token", name, &PostParams::default(), &request).await.unwrap();
    issued.status.unwrap().token.unwrap()
}

/// `GET path` over HTTPS (the certificate is self-signed, so not verified), with an
/// optional bearer token: the status and the body.
async fn secure_get(addr: std::net::SocketAddr, path: &str, bearer: Option<String>) -> Option<(u16, String)> {
    let url = format!("https://{addr}{path}");
    tokio::task::spawn_blocking(move || {
        let tls = ureq::tls::TlsConfig::builder().disable_verification(true).build();
        let agent: ureq::Agent =
            ureq::Agent::config_builder().tls_config(tls).http_status_as_error(false).build().into();
        let mut request = agent.get(&url);
        if let Some(t) = bearer {
            request = request.header("Authorization", &format!("Bearer {t}"));
        }
        let mut response = request.call().ok()?;
        Some((response.status().as_u16(), response.body_mut().read_to_string().ok()?))
    })
    .await
    .unwrap()
}

/// Tokens of two service accounts: `prometheus`, bound to a ClusterRole that may get the
/// non-resource URL `/metrics`, and `stranger`, bound to nothing.
async fn metrics_tokens(client: &kube::Client) -> (String, String) {
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject};
    api::create_namespace(client, "monitoring").await.unwrap();
    let reader = token(client, "monitoring", "prometheus").await;
    let stranger = token(client, "monitoring", "stranger").await;
    let role = ClusterRole {
        metadata: kube::api::ObjectMeta { name: Some("metrics-reader".into()), ..Default::default() },
        rules: Some(vec![PolicyRule {
            non_resource_urls: Some(vec!["/metrics".into()]),
            verbs: vec!["get".into()],
            ..Default::default()
        }]),
        ..Default::default()
    };
    Api::<ClusterRole>::all(client.clone()).create(&PostParams::default(), &role).await.unwrap();
    let binding = ClusterRoleBinding {
        metadata: kube::api::ObjectMeta { name: Some("prometheus-metrics".into()), ..Default::default() },
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "ClusterRole".into(),
            name: "metrics-reader".into(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: "prometheus".into(),
            namespace: Some("monitoring".into()),
            ..Default::default()
        }]),
    };
    Api::<ClusterRoleBinding>::all(client.clone()).create(&PostParams::default(), &binding).await.unwrap();

    (reader, stranger)
}

/// The secure port, as kube-scheduler's: HTTPS with a self-signed certificate, health
/// checks open, `/metrics` for a token the API server authenticates and allows to get
/// it (a service account bound to a ClusterRole with the non-resource URL), 403 for one
/// it does not allow, 401 without a token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_secure_port_serves_metrics_only_to_tokens_allowed_to_get_them() {
    let Some(p) = plane("the_secure_port_serves_metrics_only_to_tokens_allowed_to_get_them").await else {
        return;
    };
    let client = &p.client;
    let (reader, stranger) = metrics_tokens(client).await;
    let secure = std::net::SocketAddr::from(([127, 0, 0, 1], testing::free_port().unwrap()));
    let _ours = Ours::start(&p.plane, "custom-scheduler", None, &["--secure-listen", &secure.to_string()]);
    let theirs = std::net::SocketAddr::from(([127, 0, 0, 1], testing::free_port().unwrap()));
    let flags = [format!("--secure-port={}", theirs.port())];
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let _kube = testing::start_kube_scheduler_with(&p.plane, "kube-scheduler", json!({}), &flags).unwrap();
    for port in [secure, theirs] {
        wait_for("the secure ports", Duration::from_secs(30), || async {
            secure_get(port, "/readyz", None).await.filter(|(code, _)| *code == 200)
        })
        .await;
    }
    let (code, body) = secure_get(secure, "/metrics", Some(reader.clone())).await.unwrap();
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("scheduler_pending_pods"), "{body}");
    let (code, body) = secure_get(secure, "/metrics", Some(stranger.clone())).await.unwrap();
    assert_eq!(code, 403, "{body}");
    assert!(body.contains("system:serviceaccount:monitoring:stranger"), "{body}");
    // Each path and token gets the status code kube-scheduler v1.36.2 gives it.
    let tokens = [
        ("the reader", Some(reader)),
        ("a stranger", Some(stranger)),
        ("no token", None),
        ("a bad token", Some("not-a-token".to_string())),
    ];
    for path in ["/metrics", "/healthz", "/livez", "/readyz"] {
        for (who, token) in &tokens {
            let ours = secure_get(secure, path, token.clone()).await.map(|r| r.0);
            let kube = secure_get(theirs, path, token.clone()).await.map(|r| r.0);
            assert_eq!(ours, kube, "{path} with {who}: ours {ours:?}, kube-scheduler {kube:?}");
        }
    }
}

/// The extender's secure port: with cluster access and `--secure-listen`, `/metrics` is
/// served over HTTPS to the token allowed to get it (403 for another), health checks
/// stay open, and the verbs port no longer serves `/metrics`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_extenders_secure_port_serves_metrics_only_to_tokens_allowed_to_get_them() {
    let Some(p) = plane("the_extenders_secure_port_serves_metrics_only_to_tokens_allowed_to_get_them").await else {
        return;
    };
    let client = &p.client;
    let (reader, stranger) = metrics_tokens(client).await;
    let secure = std::net::SocketAddr::from(([127, 0, 0, 1], testing::free_port().unwrap()));
    let ext = realapi::OurExtender::start(&p.plane, "extender", true, &["--secure-listen", &secure.to_string()]).await;
    let (code, body) = wait_for("the extender's secure port", Duration::from_secs(30), || async {
        secure_get(secure, "/metrics", Some(reader.clone())).await.filter(|(code, _)| *code == 200)
    })
    .await;
    assert_eq!(code, 200);
    assert!(body.contains("# EOF"), "an OpenMetrics page: {body}");
    assert_eq!(secure_get(secure, "/metrics", Some(stranger)).await.unwrap().0, 403);
    assert_eq!(secure_get(secure, "/healthz", None).await.unwrap().0, 200);
    let plain = realapi::http_status(ext.listen, "/metrics").await.unwrap();
    assert_eq!(plain.0, 404, "{plain:?}");
}

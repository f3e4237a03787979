//! Support for the tests against a real kube-apiserver: one control plane at a time,
//! `custom-scheduler` started as a process, its metrics read over HTTP.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod dra;
pub mod gang;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use serde_json::Value;
use testing::{Assets, ControlPlane, Process, free_port};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{Mutex, MutexGuard};

/// The scheduler binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_custom-scheduler");

/// Tests start their own control plane; on two cores they run one at a time.
static SERIAL: Mutex<()> = Mutex::const_new(());

/// A started control plane, held alone.
pub struct Plane {
    /// The control plane.
    pub plane: ControlPlane,
    /// An admin client.
    pub client: kube::Client,
    _serial: MutexGuard<'static, ()>,
}

/// Starts a control plane, or returns `None` (after one line saying why) when the
/// binaries are not configured outside CI.
pub async fn plane(test: &str) -> Option<Plane> {
    plane_with(test, testing::ControlPlaneOptions::default()).await
}

/// [`plane`] with extra kube-apiserver flags.
pub async fn plane_with(test: &str, opts: testing::ControlPlaneOptions) -> Option<Plane> {
    let assets: Assets = testing::assets_or_skip(test)?;
    let serial = SERIAL.lock().await;
    let plane = ControlPlane::start_with(&assets, opts).await.unwrap_or_else(|e| panic!("{test}: {e}"));
    let client = plane.client().await.unwrap();
    Some(Plane { plane, client, _serial: serial })
}

/// A running `custom-scheduler`.
pub struct Ours {
    /// The process.
    pub process: Process,
    /// Address of /healthz, /readyz and /metrics.
    pub listen: SocketAddr,
}

impl Ours {
    /// Starts `custom-scheduler <mode>` against the control plane with an optional
    /// configuration (JSON) and extra arguments.
    pub fn start(plane: &ControlPlane, name: &str, config: Option<Value>, extra: &[&str]) -> Ours {
        let listen = SocketAddr::from(([127, 0, 0, 1], free_port().unwrap()));
        let mut cmd = Command::new(BIN);
        cmd.arg("run")
            .arg("--kubeconfig")
            .arg(plane.kubeconfig())
            .arg("--listen")
            .arg(listen.to_string())
            .arg("--identity")
            .arg(name)
            .args(extra)
            // The default log level, as users run it.
            .env_remove("RUST_LOG");
        if let Some(config) = config {
            let path: PathBuf = plane.dir().join(format!("{name}-config.json"));
            std::fs::write(&path, config.to_string()).unwrap();
            cmd.arg("--config").arg(path);
        }
        let process = Process::spawn(name, cmd, &plane.dir().join(format!("{name}.log"))).unwrap();
        Ours { process, listen }
    }

    /// The body of `GET path` on the health and metrics address, if it answers.
    pub async fn get(&self, path: &str) -> Option<String> {
        http_get(self.listen, path).await
    }

    /// A counter or gauge from /metrics (the sum over series whose labels contain `labels`).
    pub async fn metric(&self, name: &str, labels: &[&str]) -> f64 {
        let body = self.get("/metrics").await.unwrap_or_default();
        metric_value(&body, name, labels)
    }
}

/// Sums the samples of `name` whose label set contains every one of `labels`.
pub fn metric_value(body: &str, name: &str, labels: &[&str]) -> f64 {
    body.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (metric, rest) = series.split_once('{').unwrap_or((series, ""));
            (metric == name && labels.iter().all(|want| rest.contains(want))).then(|| value.parse::<f64>().ok())?
        })
        .sum()
}

/// A plain HTTP/1.0 GET on loopback: the body when the status is 200.
pub async fn http_get(addr: SocketAddr, path: &str) -> Option<String> {
    http_status(addr, path).await.filter(|(code, _)| *code == 200).map(|(_, body)| body)
}

/// A plain HTTP/1.0 GET on loopback: the status code and the body.
pub async fn http_status(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut stream =
        tokio::time::timeout(Duration::from_secs(2), tokio::net::TcpStream::connect(addr)).await.ok()?.ok()?;
    stream.write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes()).await.ok()?;
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut buf)).await.ok()?.ok()?;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let (head, body) = text.split_once("\r\n\r\n")?;
    let code = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((code, body.to_string()))
}

/// The pod's `PodScheduled` condition: (status, reason, message).
pub fn pod_scheduled(p: &Pod) -> Option<(String, Option<String>, Option<String>)> {
    let conds = p.status.as_ref()?.conditions.as_ref()?;
    let c = conds.iter().find(|c| c.type_ == "PodScheduled")?;
    Some((c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// Events about the pod `name`, with `reason`.
pub fn events_about<'a>(events: &'a [Event], name: &str, reason: &str) -> Vec<&'a Event> {
    events
        .iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .collect()
}

/// A running `custom-scheduler extender`.
pub struct OurExtender {
    /// The process.
    pub process: Process,
    /// Its address.
    pub listen: SocketAddr,
}

impl OurExtender {
    /// Starts the extender on a free port, with cluster access when `cluster` is true, and
    /// waits for `/readyz`.
    pub async fn start(plane: &ControlPlane, name: &str, cluster: bool, extra: &[&str]) -> OurExtender {
        let listen = SocketAddr::from(([127, 0, 0, 1], free_port().unwrap()));
        OurExtender::start_on(plane, name, listen, cluster, extra).await
    }

    /// Starts the extender on `listen`.
    pub async fn start_on(
        plane: &ControlPlane,
        name: &str,
        listen: SocketAddr,
        cluster: bool,
        extra: &[&str],
    ) -> OurExtender {
        let mut cmd = Command::new(BIN);
        cmd.arg("extender").arg("--listen").arg(listen.to_string()).args(extra).env("RUST_LOG", "info");
        if cluster {
            cmd.arg("--kubeconfig").arg(plane.kubeconfig());
        }
        let process = Process::spawn(name, cmd, &plane.dir().join(format!("{name}.log"))).unwrap();
        testing::api::wait_for("the extender to be ready", Duration::from_secs(30), || http_get(listen, "/readyz"))
            .await;
        OurExtender { process, listen }
    }

    /// `extender_requests_total` for a verb (all status codes).
    pub async fn requests(&self, verb: &str) -> f64 {
        let body = http_get(self.listen, "/metrics").await.unwrap_or_default();
        metric_value(&body, "extender_requests_total", &[&format!("verb=\"{verb}\"")])
    }

    /// The `urlPrefix` kube-scheduler calls.
    pub fn url(&self) -> String {
        format!("http://{}/scheduler", self.listen)
    }
}

/// Plays the kubelet: pods marked for deletion are removed at once.
pub fn kubelet(client: kube::Client, ns: &'static str) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let api: kube::Api<Pod> = kube::Api::namespaced(client, ns);
        loop {
            if let Ok(list) = api.list(&kube::api::ListParams::default()).await {
                for p in list.items.iter().filter(|p| p.metadata.deletion_timestamp.is_some()) {
                    let name = p.metadata.name.clone().unwrap_or_default();
                    let now = kube::api::DeleteParams { grace_period_seconds: Some(0), ..Default::default() };
                    let _ = api.delete(&name, &now).await;
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
}

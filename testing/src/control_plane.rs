//! etcd and kube-apiserver on loopback, with free ports, a temporary data folder, a
//! static admin token and a kubeconfig; both stopped by pid when the value is dropped.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::certs::Certificates;
use crate::process::Process;
use crate::{Assets, HarnessError};

/// How long kube-apiserver may take to answer `/readyz` with `ok`.
const READY_TIMEOUT: Duration = Duration::from_secs(90);

/// A free TCP port on 127.0.0.1 (bound once and released, so a race is possible but rare).
pub fn free_port() -> Result<u16, HarnessError> {
    let listener =
        TcpListener::bind("127.0.0.1:0").map_err(|e| HarnessError::Io("failed to find a free port".into(), e))?;
    listener.local_addr().map(|a| a.port()).map_err(|e| HarnessError::Io("failed to find a free port".into(), e))
}

/// Options of the control plane.
#[derive(Debug, Clone, Default)]
pub struct ControlPlaneOptions {
    /// Extra kube-apiserver flags (`--name=value`), after the harness's own.
    pub apiserver_args: Vec<String>,
}

/// A running etcd and kube-apiserver.
pub struct ControlPlane {
    assets: Assets,
    /// Removed on drop unless a test is failing; `None` once kept.
    dir: Option<tempfile::TempDir>,
    path: PathBuf,
    etcd: Process,
    apiserver: Option<Process>,
    apiserver_args: Vec<String>,
    port: u16,
    etcd_url: String,
    token: String,
    kubeconfig: PathBuf,
}

impl ControlPlane {
    /// Starts etcd and kube-apiserver with the default options and waits for `/readyz`.
    pub async fn start(assets: &Assets) -> Result<ControlPlane, HarnessError> {
        ControlPlane::start_with(assets, ControlPlaneOptions::default()).await
    }

    /// Starts etcd and kube-apiserver and waits for `/readyz`.
    pub async fn start_with(assets: &Assets, opts: ControlPlaneOptions) -> Result<ControlPlane, HarnessError> {
        let dir = tempfile::Builder::new()
            .prefix("control-plane-")
            .tempdir()
            .map_err(|e| HarnessError::Io("failed to create a temporary folder".into(), e))?;
        let certs = Certificates::write(dir.path())?;
        let token = format!("t{:x}{:x}", std::process::id(), now_nanos());
        write(&dir.path().join("tokens.csv"), &format!("{token},admin,admin-uid,system:masters\n"))?;

        let (client_port, peer_port) = (free_port()?, free_port()?);
        let etcd_url = format!("http://127.0.0.1:{client_port}");
        let mut cmd = Command::new(assets.etcd());
        cmd.args(["-name", "test", "-unsafe-no-fsync", "-log-level", "error"])
            .arg("-data-dir")
            .arg(dir.path().join("etcd"))
            .args(["-listen-client-urls", &etcd_url])
            .args(["-listen-peer-urls", &format!("http://127.0.0.1:{peer_port}")]);
        let mut etcd = Process::spawn("etcd", cmd, &dir.path().join("etcd.log"))?;
        wait_for_port(&mut etcd, client_port, Duration::from_secs(30)).await?;

        let port = free_port()?;
        let kubeconfig = dir.path().join("kubeconfig");
        write(&kubeconfig, &kubeconfig_text(port, &certs.ca, &token))?;
        let mut plane = ControlPlane {
            assets: assets.clone(),
            path: dir.path().to_path_buf(),
            dir: Some(dir),
            etcd,
            apiserver: None,
            apiserver_args: opts.apiserver_args,
            port,
            etcd_url,
            token,
            kubeconfig,
        };
        plane.start_apiserver().await?;
        Ok(plane)
    }

    /// Starts kube-apiserver again (after [`ControlPlane::stop_apiserver`]) on the same
    /// port and etcd, and waits for `/readyz`.
    pub async fn start_apiserver(&mut self) -> Result<(), HarnessError> {
        if self.apiserver.as_mut().is_some_and(|p| p.poll().is_none()) {
            return Ok(());
        }
        let d = self.path.as_path();
        let path = |name: &str| d.join(name).display().to_string();
        let mut cmd = Command::new(self.assets.kube_apiserver());
        cmd.arg(format!("--etcd-servers={}", self.etcd_url))
            .args(["--bind-address=127.0.0.1", "--advertise-address=127.0.0.1"])
            .arg(format!("--secure-port={}", self.port))
            .arg(format!("--tls-cert-file={}", path("serving.crt")))
            .arg(format!("--tls-private-key-file={}", path("serving.key")))
            .arg(format!("--cert-dir={}", path("apiserver-certs")))
            .arg(format!("--service-account-key-file={}", path("sa.pub")))
            .arg(format!("--service-account-signing-key-file={}", path("sa.key")))
            .arg("--service-account-issuer=https://kubernetes.default.svc")
            .arg(format!("--token-auth-file={}", path("tokens.csv")))
            .args(["--authorization-mode=RBAC", "--service-cluster-ip-range=10.0.0.0/24"])
            .arg("--endpoint-reconciler-type=none")
            // No controller-manager: no token controller, and nothing would lift the
            // not-ready taint TaintNodesByCondition puts on every new node.
            .arg("--disable-admission-plugins=ServiceAccount,TaintNodesByCondition")
            .args(["--max-requests-inflight=3000", "--max-mutating-requests-inflight=1500"])
            .args(["--profiling=false", "-v=1"])
            .args(&self.apiserver_args);
        let log = d.join("kube-apiserver.log");
        self.apiserver = Some(Process::spawn("kube-apiserver", cmd, &log)?);
        self.wait_ready(READY_TIMEOUT).await
    }

    /// Stops kube-apiserver (SIGTERM, then SIGKILL after 10 s); etcd keeps running.
    pub async fn stop_apiserver(&mut self) {
        if let Some(p) = self.apiserver.as_mut() {
            p.stop(Duration::from_secs(10)).await;
        }
    }

    /// Kills kube-apiserver at once (SIGKILL).
    pub fn kill_apiserver(&mut self) {
        if let Some(p) = self.apiserver.as_mut() {
            p.kill();
        }
    }

    async fn wait_ready(&mut self, timeout: Duration) -> Result<(), HarnessError> {
        let deadline = Instant::now() + timeout;
        let mut last = String::from("no answer");
        loop {
            if let Some(p) = self.apiserver.as_mut()
                && let Some(status) = p.poll()
            {
                return Err(HarnessError::Exited(p.name().to_string(), status.to_string(), p.log_tail(30)));
            }
            if let Ok(client) = self.client().await {
                let req = http::Request::get("/readyz").body(Vec::new());
                match req {
                    Ok(req) => match client.request_text(req).await {
                        Ok(body) if body.trim() == "ok" => return Ok(()),
                        Ok(body) => last = body,
                        Err(e) => last = e.to_string(),
                    },
                    Err(e) => last = e.to_string(),
                }
            }
            if Instant::now() >= deadline {
                let tail = self.apiserver.as_ref().map(|p| p.log_tail(30)).unwrap_or_default();
                return Err(HarnessError::NotReady(last, tail));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// A client with the admin token.
    pub async fn client(&self) -> Result<Client, HarnessError> {
        let kc = Kubeconfig::read_from(&self.kubeconfig).map_err(|e| HarnessError::Client(e.to_string()))?;
        let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .map_err(|e| HarnessError::Client(e.to_string()))?;
        Client::try_from(config).map_err(|e| HarnessError::Client(e.to_string()))
    }

    /// The kubeconfig file (admin token, the test CA).
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// `https://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// The admin bearer token.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The temporary folder holding data, certificates and logs (kept when a test fails).
    pub fn dir(&self) -> &Path {
        &self.path
    }

    /// The binaries this control plane was started from.
    pub fn assets(&self) -> &Assets {
        &self.assets
    }

    /// The kube-apiserver log.
    pub fn apiserver_log(&self) -> PathBuf {
        self.path.join("kube-apiserver.log")
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        if let Some(p) = self.apiserver.as_mut() {
            p.kill();
        }
        self.etcd.kill();
        if std::thread::panicking()
            && let Some(dir) = self.dir.take()
        {
            eprintln!("control plane logs and data kept in {}", dir.keep().display());
        }
    }
}

fn now_nanos() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)
}

fn write(path: &Path, text: &str) -> Result<(), HarnessError> {
    std::fs::write(path, text).map_err(|e| HarnessError::Io(format!("failed to write {}", path.display()), e))
}

/// A kubeconfig for the admin token; JSON, which is also YAML.
fn kubeconfig_text(port: u16, ca: &Path, token: &str) -> String {
    let doc = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "test", "cluster": {
            "server": format!("https://127.0.0.1:{port}"),
            "certificate-authority": ca.display().to_string(),
        }}],
        "users": [{"name": "admin", "user": {"token": token}}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": "admin"}}],
        "current-context": "test",
    });
    doc.to_string()
}

async fn wait_for_port(process: &mut Process, port: u16, timeout: Duration) -> Result<(), HarnessError> {
    let deadline = Instant::now() + timeout;
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    loop {
        if let Some(status) = process.poll() {
            return Err(HarnessError::Exited(process.name().to_string(), status.to_string(), process.log_tail(30)));
        }
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(HarnessError::NotReady(
                format!("{} is not listening on {port}", process.name()),
                process.log_tail(30),
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

//! kube-scheduler started beside the control plane, with a configuration of the test's,
//! and kube-controller-manager when a test needs its controllers.

use std::process::Command;

use serde_json::{Value, json};

use crate::{ControlPlane, HarnessError, Process, free_port};

/// Starts kube-scheduler with `config`, a `KubeSchedulerConfiguration` as JSON, logging at
/// `-v=2`. The harness points `clientConnection.kubeconfig` at the control plane and turns
/// leader election off unless the configuration says otherwise.
pub fn start_kube_scheduler(plane: &ControlPlane, name: &str, config: Value) -> Result<Process, HarnessError> {
    start_kube_scheduler_with(plane, name, config, &["-v=2"])
}

/// [`start_kube_scheduler`] with extra command-line flags instead of `-v=2`.
pub fn start_kube_scheduler_with(
    plane: &ControlPlane,
    name: &str,
    mut config: Value,
    flags: &[&str],
) -> Result<Process, HarnessError> {
    let kubeconfig = plane.kubeconfig().display().to_string();
    if let Some(obj) = config.as_object_mut() {
        obj.entry("apiVersion").or_insert_with(|| json!("kubescheduler.config.k8s.io/v1"));
        obj.entry("kind").or_insert_with(|| json!("KubeSchedulerConfiguration"));
        let conn = obj.entry("clientConnection").or_insert_with(|| json!({}));
        if let Some(conn) = conn.as_object_mut() {
            conn.insert("kubeconfig".into(), json!(kubeconfig));
        }
        let le = obj.entry("leaderElection").or_insert_with(|| json!({}));
        if let Some(le) = le.as_object_mut() {
            le.entry("leaderElect").or_insert(json!(false));
        }
    }
    let dir = plane.dir();
    let path = dir.join(format!("{name}-config.json"));
    std::fs::write(&path, config.to_string())
        .map_err(|e| HarnessError::Io(format!("failed to write {}", path.display()), e))?;
    let mut cmd = Command::new(plane.assets().kube_scheduler());
    cmd.arg(format!("--config={}", path.display()))
        .arg("--bind-address=127.0.0.1")
        .arg(format!("--secure-port={}", free_port()?))
        .arg(format!("--cert-dir={}", dir.join(format!("{name}-certs")).display()))
        .arg(format!("--authentication-kubeconfig={kubeconfig}"))
        .arg(format!("--authorization-kubeconfig={kubeconfig}"))
        .args(flags);
    Process::spawn(name, cmd, &dir.join(format!("{name}.log")))
}

/// Starts kube-controller-manager with every default controller (the resourceclaim
/// controller, the garbage collector, the PV binder and the rest) against the control
/// plane, one instance without leader election; `flags` are passed on (e.g. a higher
/// `--kube-api-qps` so that a benchmark's setup does not wait on the client's rate limit).
pub fn start_controller_manager(plane: &ControlPlane, name: &str, flags: &[&str]) -> Result<Process, HarnessError> {
    let dir = plane.dir();
    let flex = dir.join(format!("{name}-flexvolume"));
    std::fs::create_dir_all(&flex).map_err(|e| HarnessError::Io(format!("failed to create {}", flex.display()), e))?;
    let mut cmd = Command::new(plane.assets().kube_controller_manager());
    cmd.arg(format!("--kubeconfig={}", plane.kubeconfig().display()))
        .arg("--leader-elect=false")
        .arg("--bind-address=127.0.0.1")
        .arg(format!("--secure-port={}", free_port()?))
        .arg(format!("--flex-volume-plugin-dir={}", flex.display()))
        .args(flags);
    Process::spawn(name, cmd, &dir.join(format!("{name}.log")))
}

//! Kueue run beside the test control plane, out of cluster, as its users run it in one:
//! the `kueue` manager built from its published Go module (`.ci/install-tools` builds
//! v0.17.0 into a cache folder and names the binary with `KUEUE_BIN`), its CRDs of the
//! same version (in `crds/` beside the binary), the `batch/job` integration. Kueue's
//! webhooks are served but not registered with the API server: tests create Jobs
//! suspended and labelled with their queue, as the webhook would leave them.

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, PostParams};
use serde::Deserialize;

use crate::{ControlPlane, HarnessError, Process, free_port, in_ci};

/// The environment variable naming the `kueue` binary.
pub const KUEUE_VAR: &str = "KUEUE_BIN";

/// The `kueue` binary of `KUEUE_BIN`, or `None` after one line saying the test is
/// skipped. Under `CI=true` a missing binary fails the test instead.
#[allow(clippy::panic)] // a test helper: failing the test is the point
pub fn kueue_or_skip(test: &str) -> Option<PathBuf> {
    match std::env::var_os(KUEUE_VAR).filter(|v| !v.is_empty()).map(PathBuf::from) {
        Some(bin) if bin.is_file() && bin.with_file_name("crds").is_dir() => Some(bin),
        Some(bin) => panic!("{test}: {KUEUE_VAR}={} has no kueue binary with crds/ beside it", bin.display()),
        None if in_ci() => panic!("{test}: {KUEUE_VAR} is not set under CI=true; .ci/install-tools builds Kueue"),
        None => {
            println!("skipping {test}: {KUEUE_VAR} is not set (.ci/install-tools builds Kueue v0.17.0 and sets it)");
            None
        }
    }
}

/// The kinds Kueue converts between API versions with its webhook.
const CONVERTED: [&str; 5] = [
    "localqueues.kueue.x-k8s.io",
    "clusterqueues.kueue.x-k8s.io",
    "workloads.kueue.x-k8s.io",
    "cohorts.kueue.x-k8s.io",
    "multikueueclusters.kueue.x-k8s.io",
];

/// Creates Kueue's CRDs (from `crds/` beside `bin`), the kinds it converts pointed at its
/// webhook server on loopback `port` (as its manifests point them at its Service), and
/// waits until they are served.
async fn install_crds(client: &Client, bin: &Path, port: u16) -> Result<(), HarnessError> {
    let dir = bin.with_file_name("crds");
    let read = |p: &Path| {
        std::fs::read_to_string(p).map_err(|e| HarnessError::Io(format!("failed to read {}", p.display()), e))
    };
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut names = Vec::new();
    let entries =
        std::fs::read_dir(&dir).map_err(|e| HarnessError::Io(format!("failed to list {}", dir.display()), e))?;
    for entry in entries.flatten() {
        let text = read(&entry.path())?;
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let Ok(mut crd) = CustomResourceDefinition::deserialize(doc) else { continue };
            if CONVERTED.contains(&crd.metadata.name.as_deref().unwrap_or_default()) {
                crd.spec.conversion = Some(
                    serde_json::from_value(serde_json::json!({
                        "strategy": "Webhook",
                        "webhook": {"conversionReviewVersions": ["v1"],
                                    "clientConfig": {"url": format!("https://127.0.0.1:{port}/convert")}},
                    }))
                    .map_err(|e| HarnessError::Client(e.to_string()))?,
                );
            }
            names.push(crd.metadata.name.clone().unwrap_or_default());
            match crds.create(&PostParams::default(), &crd).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => return Err(HarnessError::Api(format!("failed to create CRD {:?}", crd.metadata.name), e)),
            }
        }
    }
    for name in names {
        crate::api::wait_for(&format!("CRD {name} established"), Duration::from_secs(30), || async {
            let crd = crds.get(&name).await.ok()?;
            let conditions = crd.status?.conditions?;
            conditions.iter().any(|c| c.type_ == "Established" && c.status == "True").then_some(())
        })
        .await;
    }
    Ok(())
}

/// Installs Kueue's CRDs and starts the Kueue manager `bin` against `plane`, with the
/// `batch/job` integration and no leader election. Kueue manages its own certificates, as by default (its webhook
/// server and its metrics need them): its namespace `kueue-system` and the Secret it keeps
/// them in are created first, as its manifests create them.
pub async fn start_kueue(
    plane: &ControlPlane,
    client: &Client,
    name: &str,
    bin: &Path,
) -> Result<Process, HarnessError> {
    use k8s_openapi::api::core::v1::{Namespace, Secret};
    let ignore_conflict = |r: Result<(), kube::Error>, what: &str| match r {
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(HarnessError::Api(format!("failed to create {what}"), e)),
        Ok(()) => Ok(()),
    };
    let namespace = Namespace {
        metadata: kube::api::ObjectMeta { name: Some(NAMESPACE.into()), ..Default::default() },
        ..Default::default()
    };
    let made = Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &namespace).await.map(|_| ());
    ignore_conflict(made, "Kueue's namespace")?;
    let secret = Secret {
        metadata: kube::api::ObjectMeta { name: Some(SECRET.into()), ..Default::default() },
        ..Default::default()
    };
    let made =
        Api::<Secret>::namespaced(client.clone(), NAMESPACE).create(&PostParams::default(), &secret).await.map(|_| ());
    ignore_conflict(made, "Kueue's certificate Secret")?;
    // Its webhook configurations, with no webhooks: Kueue puts its CA into them, and the
    // API server calls none of them (tests create Jobs as the webhooks would leave them).
    use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
    let meta = |name: &str| kube::api::ObjectMeta { name: Some(name.into()), ..Default::default() };
    let validating =
        ValidatingWebhookConfiguration { metadata: meta("kueue-validating-webhook-configuration"), webhooks: None };
    let made = Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .create(&PostParams::default(), &validating)
        .await
        .map(|_| ());
    ignore_conflict(made, "Kueue's validating webhook configuration")?;
    let mutating =
        MutatingWebhookConfiguration { metadata: meta("kueue-mutating-webhook-configuration"), webhooks: None };
    let made = Api::<MutatingWebhookConfiguration>::all(client.clone())
        .create(&PostParams::default(), &mutating)
        .await
        .map(|_| ());
    ignore_conflict(made, "Kueue's mutating webhook configuration")?;
    let webhook_port = free_port()?;
    install_crds(client, bin, webhook_port).await?;
    let dir = plane.dir().join(name);
    std::fs::create_dir_all(&dir).map_err(|e| HarnessError::Io(format!("failed to create {}", dir.display()), e))?;
    let config = serde_json::json!({
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": NAMESPACE,
        "manageJobsWithoutQueueName": false,
        "leaderElection": {"leaderElect": false},
        "health": {"healthProbeBindAddress": format!("127.0.0.1:{}", free_port()?)},
        "metrics": {"bindAddress": format!("127.0.0.1:{}", free_port()?)},
        "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": dir.join("certs").display().to_string()},
        "internalCertManagement": {"enable": true, "webhookServiceName": "kueue-webhook-service", "webhookSecretName": SECRET},
        "integrations": {"frameworks": ["batch/job"]},
    });
    let path = dir.join("config.yaml");
    std::fs::write(&path, config.to_string())
        .map_err(|e| HarnessError::Io(format!("failed to write {}", path.display()), e))?;
    let mut cmd = std::process::Command::new(bin);
    cmd.arg(format!("--config={}", path.display()))
        .arg(format!("--kubeconfig={}", plane.kubeconfig().display()))
        .arg("--feature-gates=VisibilityOnDemand=false")
        .arg(format!("--visibility-server-port={}", free_port()?));
    let process = Process::spawn(name, cmd, &plane.dir().join(format!("{name}.log")))?;
    // There is no kubelet to mount the Secret Kueue writes its certificates to: the
    // harness plays it, copying them into the folder Kueue waits to find them in.
    let certs = dir.join("certs");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NAMESPACE);
    let data = crate::api::wait_for("Kueue's certificates", Duration::from_secs(60), || async {
        let data = secrets.get(SECRET).await.ok()?.data?;
        data.contains_key("tls.crt").then_some(data)
    })
    .await;
    std::fs::create_dir_all(&certs)
        .map_err(|e| HarnessError::Io(format!("failed to create {}", certs.display()), e))?;
    for (file, bytes) in data {
        let path = certs.join(&file);
        std::fs::write(&path, bytes.0)
            .map_err(|e| HarnessError::Io(format!("failed to write {}", path.display()), e))?;
    }
    Ok(process)
}

/// Kueue's namespace.
pub const NAMESPACE: &str = "kueue-system";
/// The Secret Kueue keeps its certificates in.
const SECRET: &str = "kueue-webhook-server-cert";

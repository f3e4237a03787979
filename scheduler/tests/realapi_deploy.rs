//! The deploy manifests, as their kustomizations list them, are accepted by a real
//! kube-apiserver v1.36.2 with a server-side dry run (the namespace is created for real so
//! that namespaced objects can be checked in it).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod realapi;

use kube::api::{Api, DynamicObject, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::pinned_kind;
use realapi::plane;
use serde::Deserialize;
use serde_json::Value;

/// The objects of `deploy/<dir>` as its kustomization lists them, with its namespace set.
fn objects(dir: &str) -> Vec<Value> {
    let base = std::path::Path::new("../deploy").join(dir);
    let k: Value = serde_yaml::from_str(&std::fs::read_to_string(base.join("kustomization.yaml")).unwrap()).unwrap();
    let ns = k["namespace"].as_str().unwrap_or("default").to_string();
    let mut out = Vec::new();
    for r in k["resources"].as_array().unwrap() {
        let listed = base.join(r.as_str().unwrap());
        if listed.is_dir() {
            // Another kustomization (the CRDs): its files, cluster-scoped.
            let inner = listed.strip_prefix("../deploy").unwrap().to_str().unwrap().to_string();
            out.extend(objects(&inner));
            continue;
        }
        let text = std::fs::read_to_string(listed).unwrap();
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let mut doc = Value::deserialize(doc).unwrap();
            if doc.is_null() {
                continue;
            }
            if doc["metadata"].get("namespace").is_some() {
                doc["metadata"]["namespace"] = Value::String(ns.clone());
            }
            out.push(doc);
        }
    }
    out
}

/// Creates each object with a server-side dry run (namespaces are skipped: the test
/// creates the one it needs for real).
async fn dry_run(client: &kube::Client, what: &str, docs: Vec<Value>) {
    let dry = PostParams { dry_run: true, ..Default::default() };
    for doc in docs {
        let kind = doc["kind"].as_str().unwrap().to_string();
        let name = doc["metadata"]["name"].as_str().unwrap().to_string();
        if kind == "Namespace" {
            continue;
        }
        let (group, version) = match doc["apiVersion"].as_str().unwrap().split_once('/') {
            Some((g, v)) => (g.to_string(), v.to_string()),
            None => (String::new(), doc["apiVersion"].as_str().unwrap().to_string()),
        };
        let (resource, caps) = pinned_kind(client, &GroupVersionKind::gvk(&group, &version, &kind))
            .await
            .unwrap_or_else(|e| panic!("{what}: {kind} {name}: {e}"));
        let api: Api<DynamicObject> = match caps.scope {
            kube::discovery::Scope::Namespaced => {
                Api::namespaced_with(client.clone(), doc["metadata"]["namespace"].as_str().unwrap(), &resource)
            }
            kube::discovery::Scope::Cluster => Api::all_with(client.clone(), &resource),
        };
        let obj: DynamicObject = serde_json::from_value(doc.clone()).unwrap();
        api.create(&dry, &obj).await.unwrap_or_else(|e| panic!("{what}: {kind} {name} refused: {e}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deploy_objects_pass_a_server_side_dry_run() {
    let Some(p) = plane("the_deploy_objects_pass_a_server_side_dry_run").await else {
        return;
    };
    let client = &p.client;
    testing::api::create_namespace(client, "custom-scheduler").await.unwrap();
    for dir in ["scheduler", "extender"] {
        let list = objects(dir);
        assert!(list.len() >= 6, "{dir}: {}", list.len());
        dry_run(client, dir, list).await;
    }

    // `kubectl apply -k … --dry-run=server`, as the deploy README says, where kubectl is installed.
    let Some(kubectl) =
        testing::tools::find("kubectl", "KUBECTL", &["version", "--client"], "kubectl apply -k --dry-run=server")
    else {
        return;
    };
    for dir in ["scheduler", "extender"] {
        let out = std::process::Command::new(&kubectl)
            .arg("--kubeconfig")
            .arg(p.plane.kubeconfig())
            .args(["apply", "-k", &format!("../deploy/{dir}"), "--dry-run=server"])
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{dir}: {said}{}", String::from_utf8_lossy(&out.stderr));
        assert!(said.contains("deployment.apps/custom-scheduler"), "{dir}: {said}");
        assert!(said.contains("(server dry run)"), "{dir}: {said}");
    }
}

/// The ServiceMonitor kind, as the Prometheus Operator's CRD would add it (no operator
/// runs here; only the kind needs to exist for the dry run).
fn service_monitor_crd() -> Value {
    serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "servicemonitors.monitoring.coreos.com"},
        "spec": {
            "group": "monitoring.coreos.com",
            "scope": "Namespaced",
            "names": {"plural": "servicemonitors", "singular": "servicemonitor", "kind": "ServiceMonitor", "listKind": "ServiceMonitorList"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
            }]
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_helm_chart_objects_pass_a_server_side_dry_run() {
    let test = "the_helm_chart_objects_pass_a_server_side_dry_run";
    let Some(helm) = testing::tools::find("helm", "HELM", &["version"], test) else {
        return;
    };
    let Some(p) = plane(test).await else {
        return;
    };
    let client = &p.client;
    testing::api::create_namespace(client, "sched").await.unwrap();
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(client.clone());
    crds.create(&PostParams::default(), &serde_json::from_value(service_monitor_crd()).unwrap()).await.unwrap();
    for (what, set) in
        [("scheduler mode", vec![]), ("extender mode", vec!["mode=extender", "serviceMonitor.enabled=true"])]
    {
        let mut cmd = std::process::Command::new(&helm);
        cmd.args(["template", "rel", "../deploy/helm/custom-scheduler", "--namespace", "sched"]);
        for s in set {
            cmd.args(["--set", s]);
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{what}: {}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8(out.stdout).unwrap();
        let docs: Vec<Value> = serde_yaml::Deserializer::from_str(&text)
            .map(|d| Value::deserialize(d).unwrap())
            .filter(|d| !d.is_null())
            .collect();
        assert!(docs.len() >= 6, "{what}: {}", docs.len());
        // The CRD's kind is discovered once it is established.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let gvk = GroupVersionKind::gvk("monitoring.coreos.com", "v1", "ServiceMonitor");
            if pinned_kind(client, &gvk).await.is_ok() {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "the ServiceMonitor kind never appeared");
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        dry_run(client, what, docs).await;
    }
}

/// `to` as a path relative to the directory `from` (both absolute).
fn relative(from: &std::path::Path, to: &std::path::Path) -> String {
    let up = from.components().count() - 1;
    let down = to.strip_prefix("/").unwrap().display().to_string();
    format!("{}{down}", "../".repeat(up))
}

/// `custom-scheduler run` as a replica of deploy/scheduler would run it: its ConfigMap's
/// configuration, its service account's token, `POD_NAMESPACE` from the downward API.
fn replica(
    p: &realapi::Plane,
    name: &str,
    config: &std::path::Path,
    kubeconfig: &std::path::Path,
    ns: &str,
) -> (testing::Process, std::net::SocketAddr) {
    let listen = std::net::SocketAddr::from(([127, 0, 0, 1], testing::free_port().unwrap()));
    let mut cmd = std::process::Command::new(realapi::BIN);
    cmd.args(["run", "--leader-elect", "true", "--identity", name, "--listen", &listen.to_string()])
        .arg("--config")
        .arg(config)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .env("POD_NAMESPACE", ns)
        .env_remove("RUST_LOG");
    let process = testing::Process::spawn(name, cmd, &p.plane.dir().join(format!("{name}.log"))).unwrap();
    (process, listen)
}

/// deploy/scheduler moved to another namespace by a kustomization over it, applied
/// server-side: a replica running as its service account takes the lease in that
/// namespace and schedules. A replica that cannot take part in leader election (its
/// lease namespace is one its Role does not reach) is not ready, says why on `/readyz`,
/// and logs the failure once, not at every retry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moved_to_another_namespace_the_scheduler_takes_its_lease_there_and_schedules() {
    let test = "moved_to_another_namespace_the_scheduler_takes_its_lease_there_and_schedules";
    let Some(p) = plane(test).await else {
        return;
    };
    let Some(kubectl) = testing::tools::find("kubectl", "KUBECTL", &["version", "--client"], test) else {
        return;
    };
    let client = &p.client;
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize("../deploy/scheduler").unwrap();
    std::fs::write(
        dir.path().join("kustomization.yaml"),
        // kustomize takes a base by a relative path only.
        format!("namespace: batch-scheduling\nresources:\n  - {}\n", relative(dir.path(), &base)),
    )
    .unwrap();
    let kube = |args: &[&str]| {
        let out = std::process::Command::new(&kubectl)
            .arg("--kubeconfig")
            .arg(p.plane.kubeconfig())
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "kubectl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let rendered = kube(&["kustomize", dir.path().to_str().unwrap()]);
    let manifest = dir.path().join("rendered.yaml");
    std::fs::write(&manifest, &rendered).unwrap();
    kube(&["apply", "--server-side", "-f", manifest.to_str().unwrap()]);

    // The configuration the Deployment mounts, and a kubeconfig with its service
    // account's token.
    let configmap = serde_yaml::Deserializer::from_str(&rendered)
        .map(|d| Value::deserialize(d).unwrap())
        .find(|d| d["kind"] == "ConfigMap")
        .unwrap();
    assert_eq!(configmap["metadata"]["namespace"], "batch-scheduling");
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, configmap["data"]["config.yaml"].as_str().unwrap()).unwrap();
    let token = kube(&["-n", "batch-scheduling", "create", "token", "custom-scheduler"]);
    let admin = std::fs::read_to_string(p.plane.kubeconfig()).unwrap();
    let kubeconfig = dir.path().join("service-account.kubeconfig");
    std::fs::write(&kubeconfig, admin.replace(p.plane.token(), token.trim())).unwrap();

    let node = algorithms::builders::NodeBuilder::new("n1").capacity("4", "16Gi", "110").build();
    testing::api::create_node(client, &node).await.unwrap();
    testing::api::create_namespace(client, "work").await.unwrap();
    let pod = algorithms::builders::PodBuilder::new("p").namespace("work").scheduler("custom-scheduler").build();
    testing::api::create_pod(client, &pod).await.unwrap();

    let (_leader, at) = replica(&p, "replica-a", &config, &kubeconfig, "batch-scheduling");
    testing::api::wait_bound(client, "work", 1, std::time::Duration::from_secs(60)).await;
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> = Api::namespaced(client.clone(), "batch-scheduling");
    let lease = leases.get("custom-scheduler").await.unwrap();
    assert_eq!(lease.spec.unwrap().holder_identity.as_deref(), Some("replica-a"));
    assert_eq!(realapi::http_status(at, "/readyz").await.map(|r| r.0), Some(200));

    // Its Role does not reach the original namespace's leases.
    let (stray, at) = replica(&p, "replica-b", &config, &kubeconfig, "custom-scheduler");
    let (code, body) =
        testing::api::wait_for("replica-b to answer /readyz", std::time::Duration::from_secs(30), || async {
            realapi::http_status(at, "/readyz").await.filter(|(_, body)| body.contains("leader election"))
        })
        .await;
    assert_eq!(code, 503, "{body}");
    assert!(body.contains("forbidden"), "{body}");
    // Three retry periods later, still one line about it.
    tokio::time::sleep(std::time::Duration::from_secs(6)).await;
    let log = std::fs::read_to_string(stray.log()).unwrap();
    assert_eq!(log.matches("leader election fails").count(), 1, "{log}");
}

/// The container image's whole file system, as `deploy/image-rootfs.sh` lays it out for
/// the Dockerfile's empty base (the binary, the libraries it loads, the CA bundle, a
/// passwd entry): the scheduler runs in it alone, as the unprivileged user 65532, reaches
/// the API server over TLS and binds a pod. `chroot` stands in for the container runtime.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_image_file_system_alone_runs_the_scheduler() {
    let test = "the_image_file_system_alone_runs_the_scheduler";
    let Some(p) = plane(test).await else {
        return;
    };
    let uid = std::process::Command::new("id").arg("-u").output().unwrap();
    if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
        println!("{test}: skipped: chroot needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("rootfs");
    let out = std::process::Command::new("../deploy/image-rootfs.sh").arg(realapi::BIN).arg(&root).output().unwrap();
    assert!(out.status.success(), "image-rootfs.sh: {}", String::from_utf8_lossy(&out.stderr));

    // Nothing beyond the binary, the loader and libraries, and the few files under /etc.
    let mut files = Vec::new();
    let mut stack = vec![root.clone()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                files.push(path.strip_prefix(&root).unwrap().to_string_lossy().into_owned());
            }
        }
    }
    files.sort();
    assert!(files.iter().any(|f| f.contains("libc.so")), "{files:?}");
    assert!(files.iter().any(|f| f.contains("ld-linux")), "{files:?}");
    for f in &files {
        assert!(
            f == "custom-scheduler" || f.starts_with("lib") || f.starts_with("etc/"),
            "unexpected file {f} in the image: {files:?}"
        );
    }

    let etc = root.join("etc/custom-scheduler");
    std::fs::create_dir_all(&etc).unwrap();
    // The kubeconfig names its CA by a path: the copy names the CA's copy in the image.
    let kubeconfig: Value = serde_yaml::from_str(&std::fs::read_to_string(p.plane.kubeconfig()).unwrap()).unwrap();
    let ca = kubeconfig["clusters"][0]["cluster"]["certificate-authority"].as_str().unwrap().to_string();
    std::fs::copy(&ca, etc.join("ca.crt")).unwrap();
    let text = std::fs::read_to_string(p.plane.kubeconfig()).unwrap().replace(&ca, "/etc/custom-scheduler/ca.crt");
    std::fs::write(etc.join("kubeconfig"), text).unwrap();
    for f in ["kubeconfig", "ca.crt"] {
        std::fs::set_permissions(etc.join(f), std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    }
    std::fs::write(
        etc.join("config.yaml"),
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n\
         leaderElection:\n  leaderElect: false\nprofiles:\n  - schedulerName: custom-scheduler\n",
    )
    .unwrap();
    let client = &p.client;
    let node = algorithms::builders::NodeBuilder::new("n1").capacity("4", "16Gi", "110").build();
    testing::api::create_node(client, &node).await.unwrap();
    let pod = algorithms::builders::PodBuilder::new("p").scheduler("custom-scheduler").build();
    testing::api::create_pod(client, &pod).await.unwrap();

    let mut cmd = std::process::Command::new("chroot");
    cmd.arg("--userspec=65532:65532").arg(&root).args([
        "/custom-scheduler",
        "run",
        "--config",
        "/etc/custom-scheduler/config.yaml",
        "--kubeconfig",
        "/etc/custom-scheduler/kubeconfig",
        "--listen",
        &format!("127.0.0.1:{}", testing::free_port().unwrap()),
    ]);
    cmd.env_clear().env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin");
    let _scheduler = testing::Process::spawn("image", cmd, &p.plane.dir().join("image.log")).unwrap();
    testing::api::wait_bound(client, "default", 1, std::time::Duration::from_secs(60)).await;
}

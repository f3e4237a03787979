//! The README's commands, run as written against a real kube-apiserver v1.36.2 (with
//! `custom-scheduler` and `kubectl` on the `PATH`, `KUBECONFIG` and `~/.kube/config`
//! naming the test control plane). Each command run here must appear word for word in
//! the README, so the two cannot drift apart. Not run here: the build, the image build,
//! the demo and the tests (`.ci/run` runs those), and the extender `--in-cluster`, which
//! needs a pod's service account.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod realapi;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use algorithms::builders::{NodeBuilder, PodBuilder};
use realapi::plane;
use testing::api;

/// The command lines of the README's `sh` blocks.
fn readme_commands() -> Vec<String> {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    let mut inside = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.starts_with("```") {
            inside = line == "```sh";
            continue;
        }
        if inside && !line.starts_with('#') && !line.trim().is_empty() {
            out.push(line.to_string());
        }
    }
    out
}

/// Where the commands run: a folder of their own as the working directory and home.
struct Shell {
    dir: tempfile::TempDir,
    path: String,
    kubeconfig: PathBuf,
}

impl Shell {
    /// Runs `command` (as the README writes it, checked to be there) with `bash`.
    fn command(&self, readme: &[String], command: &str) -> Command {
        assert!(readme.iter().any(|l| l.starts_with(command)), "the README does not have {command:?}");
        let mut cmd = Command::new("bash");
        // `exec`: the command replaces the shell, so that stopping it stops the command.
        cmd.arg("-c")
            .arg(format!("exec {command}"))
            .current_dir(self.dir.path())
            .env("PATH", &self.path)
            .env("HOME", self.dir.path())
            .env("KUBECONFIG", &self.kubeconfig)
            .env_remove("RUST_LOG");
        cmd
    }

    /// Runs `command` to its end; its standard output.
    fn run(&self, readme: &[String], command: &str) -> String {
        let out = self.command(readme, command).output().unwrap();
        assert!(out.status.success(), "{command}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

/// Runs `command` in the background until `until` says it did its part (or 60 s pass).
async fn serve<F, Fut>(shell: &Shell, readme: &[String], command: &str, what: &str, until: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<()>>,
{
    let log = shell.file(&format!("{}.log", what.replace(' ', "-")));
    let cmd = shell.command(readme, command);
    let mut process = testing::Process::spawn(what, cmd, &log).unwrap();
    api::wait_for(what, Duration::from_secs(60), until).await;
    process.stop(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readmes_commands_work_as_written() {
    let test = "the_readmes_commands_work_as_written";
    let Some(kubectl) = testing::tools::find("kubectl", "KUBECTL", &["version", "--client"], test) else { return };
    let Some(p) = plane(test).await else { return };
    let client = &p.client;
    let readme = readme_commands();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".kube")).unwrap();
    std::fs::copy(p.plane.kubeconfig(), dir.path().join(".kube/config")).unwrap();
    let bins = [Path::new(realapi::BIN).parent().unwrap(), kubectl.parent().unwrap_or(Path::new("/usr/bin"))];
    let path = format!("{}:{}:/usr/bin:/bin", bins[0].display(), bins[1].display());
    let shell = Shell { kubeconfig: dir.path().join(".kube/config"), dir, path };

    // A cluster with a pending pod that fits and one that does not.
    for i in 0..3 {
        api::create_node(client, &NodeBuilder::new(&format!("node-{i}")).capacity("4", "16Gi", "110").build())
            .await
            .unwrap();
    }
    api::create_namespace(client, "team-a").await.unwrap();
    let web = PodBuilder::new("web-0").namespace("team-a").scheduler("custom-scheduler").req("500m", "1Gi").build();
    api::create_pod(client, &web).await.unwrap();

    shell.run(&readme, "kubectl get nodes,pods,namespaces,poddisruptionbudgets -A -o yaml > cluster.yaml");
    let out = shell.run(&readme, "custom-scheduler simulate --cluster cluster.yaml ");
    assert!(out.contains("Scheduled 1 of 1 pods"), "{out}");
    let json: serde_json::Value =
        serde_json::from_str(&shell.run(&readme, "custom-scheduler simulate --cluster cluster.yaml --output json"))
            .unwrap();
    assert!(json["placements"]["team-a/web-0"].is_string(), "{json}");
    shell.run(&readme, "custom-scheduler simulate --cluster cluster.yaml --write after.yaml");
    assert!(std::fs::read_to_string(shell.file("after.yaml")).unwrap().contains("nodeName"));
    let out = shell.run(&readme, "custom-scheduler explain --cluster cluster.yaml --pod team-a/web-0 ");
    assert!(out.contains("node-0") && out.contains("node-2"), "{out}");
    let what_if = PodBuilder::new("my-pod").namespace("team-a").req("8", "1Gi").build();
    std::fs::write(shell.file("my-pod.yaml"), serde_yaml::to_string(&what_if).unwrap()).unwrap();
    let out = shell.run(&readme, "custom-scheduler explain --cluster cluster.yaml --pod my-pod.yaml");
    assert!(out.contains("Insufficient cpu"), "{out}");
    shell.run(&readme, "custom-scheduler simulate --cluster cluster.yaml --report report.html");
    shell.run(&readme, "custom-scheduler explain --cluster cluster.yaml --pod team-a/web-0 --report web-0.html");
    for page in ["report.html", "web-0.html"] {
        assert!(std::fs::read_to_string(shell.file(page)).unwrap().contains("<html"), "{page}");
    }

    // The scheduler with ~/.kube/config binds the pending pod.
    serve(&shell, &readme, "custom-scheduler run --kubeconfig ~/.kube/config", "run binds", || async {
        let pods = api::pods(client, "team-a").await.ok()?;
        pods.iter().any(|p| api::node_of(p).is_some()).then_some(())
    })
    .await;
    // With leader election from its configuration, it takes the Lease.
    std::fs::write(
        shell.file("config.yaml"),
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n\
         leaderElection: {leaderElect: true, resourceNamespace: default, resourceName: custom-scheduler}\n",
    )
    .unwrap();
    let leases: kube::Api<k8s_openapi::api::coordination::v1::Lease> = kube::Api::namespaced(client.clone(), "default");
    serve(&shell, &readme, "custom-scheduler run --config config.yaml --leader-elect true", "run elects", || async {
        leases.get("custom-scheduler").await.ok()?.spec?.holder_identity.map(|_| ())
    })
    .await;
    // Plain HTTP on loopback.
    let plain = std::net::SocketAddr::from(([127, 0, 0, 1], 10251));
    serve(&shell, &readme, "custom-scheduler run --listen 127.0.0.1:10251", "run serves", || async {
        realapi::http_get(plain, "/readyz").await.filter(|b| b.contains("ok")).map(|_| ())
    })
    .await;
    // The stateless extender with the example it names.
    std::fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/extender/kube-scheduler/kube-scheduler-stateless.yaml"),
        shell.file("kube-scheduler-stateless.yaml"),
    )
    .unwrap();
    let extender = std::net::SocketAddr::from(([127, 0, 0, 1], 8888));
    let command = "custom-scheduler extender --listen 0.0.0.0:8888 --config kube-scheduler-stateless.yaml";
    serve(&shell, &readme, command, "extender serves", || async {
        realapi::http_get(extender, "/healthz").await.filter(|b| b.contains("ok")).map(|_| ())
    })
    .await;
}

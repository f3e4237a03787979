//! Leader election on a coordination.k8s.io Lease, with optimistic concurrency: the
//! lease is only taken or renewed by an update carrying the resourceVersion read,
//! so two replicas can never both succeed. Expiry is judged by when this replica
//! last saw the lease change (as client-go does), not by remote clocks.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
use tokio::sync::watch;
use tracing::{info, warn};

/// Leader election timing.
#[derive(Debug, Clone)]
pub struct LeaderConfig {
    /// Lease namespace.
    pub namespace: String,
    /// Lease name.
    pub name: String,
    /// This replica's identity.
    pub identity: String,
    /// How long a lease is valid without renewal.
    pub lease_duration: Duration,
    /// How long a leader keeps trying to renew before stepping down.
    pub renew_deadline: Duration,
    /// Time between attempts.
    pub retry_period: Duration,
}

struct Observed {
    record: Option<(String, Option<String>)>,
    at: Instant,
}

fn holder(l: &Lease) -> Option<String> {
    l.spec.as_ref().and_then(|s| s.holder_identity.clone()).filter(|h| !h.is_empty())
}

fn renew_marker(l: &Lease) -> (String, Option<String>) {
    let renew = l.spec.as_ref().and_then(|s| s.renew_time.as_ref()).map(|t| t.0.to_string());
    (holder(l).unwrap_or_default(), renew)
}

/// One attempt to acquire or renew; Ok(true) when this replica holds the lease afterwards.
async fn try_acquire(api: &Api<Lease>, cfg: &LeaderConfig, observed: &mut Observed) -> Result<bool, kube::Error> {
    let now_time = MicroTime(k8s_openapi::jiff::Timestamp::now());
    let secs = i32::try_from(cfg.lease_duration.as_secs()).unwrap_or(15);
    let current = match api.get_opt(&cfg.name).await? {
        Some(l) => l,
        None => {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(cfg.name.clone()),
                    namespace: Some(cfg.namespace.clone()),
                    ..Default::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(cfg.identity.clone()),
                    lease_duration_seconds: Some(secs),
                    acquire_time: Some(now_time.clone()),
                    renew_time: Some(now_time),
                    lease_transitions: Some(0),
                    ..Default::default()
                }),
            };
            return match api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
                Err(e) => Err(e),
            };
        }
    };
    let marker = renew_marker(&current);
    if observed.record.as_ref() != Some(&marker) {
        observed.record = Some(marker);
        observed.at = Instant::now();
    }
    let current_holder = holder(&current);
    let mine = current_holder.as_deref() == Some(cfg.identity.as_str());
    let expired = observed.at.elapsed() >= cfg.lease_duration;
    if !mine && current_holder.is_some() && !expired {
        return Ok(false);
    }
    let mut next = current.clone();
    let spec = next.spec.get_or_insert_with(Default::default);
    if !mine {
        spec.acquire_time = Some(now_time.clone());
        spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
    }
    spec.holder_identity = Some(cfg.identity.clone());
    spec.lease_duration_seconds = Some(secs);
    spec.renew_time = Some(now_time);
    match api.replace(&cfg.name, &PostParams::default(), &next).await {
        Ok(l) => {
            observed.record = Some(renew_marker(&l));
            observed.at = Instant::now();
            Ok(true)
        }
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
        Err(e) => Err(e),
    }
}

/// Runs leader election until `stop` fires; publishes leadership on the returned channel,
/// and on `failing` why the last attempt failed (`None` once one succeeds). A failure is
/// logged when it starts or changes, not at every retry.
pub fn spawn(
    api: Api<Lease>,
    cfg: LeaderConfig,
    failing: watch::Sender<Option<String>>,
    mut stop: watch::Receiver<bool>,
) -> watch::Receiver<bool> {
    let (tx, rx) = watch::channel(false);
    tokio::spawn(async move {
        let mut observed = Observed { record: None, at: Instant::now() };
        let mut last_renew: Option<Instant> = None;
        let mut failing_since: Option<Instant> = None;
        let mut said: Option<String> = None;
        loop {
            let leading = *tx.borrow();
            let attempt = try_acquire(&api, &cfg, &mut observed).await;
            match &attempt {
                Ok(_) => {
                    if failing.borrow().is_some() || said.is_some() {
                        info!(lease = %format!("{}/{}", cfg.namespace, cfg.name), "leader election works again");
                    }
                    failing_since = None;
                    said = None;
                    failing.send_replace(None);
                }
                Err(e) => {
                    // A blip does not make the replica unready: only failures that last as
                    // long as a leader may go without renewing.
                    let why = crate::watch::cause::api(e);
                    let since = *failing_since.get_or_insert_with(Instant::now);
                    if said.as_deref() != Some(why.as_str()) {
                        warn!(lease = %format!("{}/{}", cfg.namespace, cfg.name), error = %why,
                            "leader election fails; retrying quietly (not ready if it goes on)");
                        said = Some(why.clone());
                    }
                    if since.elapsed() >= cfg.renew_deadline && failing.borrow().as_deref() != Some(why.as_str()) {
                        failing.send_replace(Some(why));
                    }
                }
            }
            match attempt {
                Ok(true) => {
                    last_renew = Some(Instant::now());
                    if !leading {
                        info!(identity = %cfg.identity, lease = %cfg.name, "became leader");
                        let _ = tx.send(true);
                    }
                }
                Ok(false) => {
                    if leading {
                        warn!(identity = %cfg.identity, "lost the lease to another replica; stepping down");
                        let _ = tx.send(false);
                    }
                }
                Err(_) => {
                    if leading && last_renew.is_none_or(|t| t.elapsed() >= cfg.renew_deadline) {
                        warn!(identity = %cfg.identity, "could not renew the lease in time; stepping down");
                        let _ = tx.send(false);
                    }
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(cfg.retry_period) => {}
                _ = stop.changed() => break,
            }
        }
        if *tx.borrow() {
            // Give the lease up so a standby takes over at once.
            if let Ok(Some(mut l)) = api.get_opt(&cfg.name).await
                && holder(&l).as_deref() == Some(cfg.identity.as_str())
            {
                if let Some(spec) = l.spec.as_mut() {
                    spec.holder_identity = None;
                    spec.lease_duration_seconds = Some(1);
                }
                let _ = api.replace(&cfg.name, &PostParams::default(), &l).await;
            }
            let _ = tx.send(false);
        }
    });
    rx
}

/// Follows who leads: with leader election (`election`), this replica leads while it
/// holds the lease; without, it always leads. The state and the leader metric follow.
pub(super) fn follow(
    shared: &std::sync::Arc<super::Shared>,
    client: &kube::Client,
    election: Option<&algorithms::config::LeaderElection>,
    identity: &str,
    stop: watch::Receiver<bool>,
) {
    use std::sync::atomic::Ordering;
    let Some(le) = election else {
        shared.leader.store(true, Ordering::SeqCst);
        shared.metrics.leader.set(1);
        return;
    };
    let ns = lease_namespace(le.resource_namespace.as_deref(), std::env::var("POD_NAMESPACE").ok());
    let duration = |d: &Option<String>, default: u64| {
        d.as_deref().and_then(super::parse_duration).unwrap_or(Duration::from_secs(default))
    };
    let cfg = LeaderConfig {
        namespace: ns.clone(),
        name: le.resource_name.clone().unwrap_or_else(|| "custom-scheduler".into()),
        identity: identity.to_string(),
        lease_duration: duration(&le.lease_duration, 15),
        renew_deadline: duration(&le.renew_deadline, 10),
        retry_period: duration(&le.retry_period, 2),
    };
    let failing = shared.election_failure.clone();
    let mut leading = spawn(Api::namespaced(client.clone(), &ns), cfg, failing, stop);
    let sh = shared.clone();
    tokio::spawn(async move {
        while leading.changed().await.is_ok() {
            let now = *leading.borrow();
            sh.leader.store(now, Ordering::SeqCst);
            sh.metrics.leader.set(i64::from(now));
            sh.wake();
        }
    });
}

/// Where the lease lives: `resourceNamespace` when the configuration names one, else the
/// replica's own namespace (`POD_NAMESPACE`, or the service account's namespace inside a
/// pod), so that manifests moved to another namespace take their lease with them; else
/// kube-scheduler's default, `kube-system`.
fn lease_namespace(configured: Option<&str>, pod_namespace: Option<String>) -> String {
    const IN_POD: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";
    configured
        .filter(|n| !n.is_empty())
        .map(String::from)
        .or(pod_namespace.filter(|n| !n.is_empty()))
        .or_else(|| std::fs::read_to_string(IN_POD).ok().map(|n| n.trim().to_string()).filter(|n| !n.is_empty()))
        .unwrap_or_else(|| "kube-system".into())
}

#[cfg(test)]
mod tests {
    use super::lease_namespace;

    #[test]
    fn the_lease_follows_the_configuration_then_the_pods_namespace() {
        assert_eq!(lease_namespace(Some("a"), Some("b".into())), "a");
        assert_eq!(lease_namespace(None, Some("b".into())), "b");
        assert_eq!(lease_namespace(Some(""), Some("b".into())), "b");
    }
}

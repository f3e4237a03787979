//! `extender`: serve the extender router, with an informer cache when cluster access is given.

use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use algorithms::config::{DEFAULT_SCHEDULER_NAME, default_profile};
use algorithms::framework::filter_candidates;
use algorithms::{PodInfo, Profile, Snapshot};
use extender::types::ExtenderBindingArgs;
use extender::{ClusterView, Extender};
use futures::future::BoxFuture;
use governor::Quota;
use k8s_openapi::api::core::v1::Pod;
use kube::{Api, Client};
use thiserror::Error;
use tracing::info;

use crate::config_file;
use crate::engine::Engine;
use crate::listener::{LimitedAddr, LimitedListener};
use crate::run::binder::{BindOutcome, bind};
use crate::run::{RunError, Shared, informer, make_client, workloads};

/// Options of `custom-scheduler extender`.
#[derive(Debug, Clone)]
pub struct ExtenderOptions {
    /// Listen address.
    pub listen: SocketAddr,
    /// Kubeconfig for cluster access.
    pub kubeconfig: Option<PathBuf>,
    /// Use in-cluster configuration for cluster access.
    pub in_cluster: bool,
    /// Configuration file.
    pub config: Option<PathBuf>,
    /// Managed resources given on the command line.
    pub managed_resources: Vec<String>,
    /// TLS certificate and key.
    pub tls: Option<(PathBuf, PathBuf)>,
    /// A secure port for `/healthz`, `/livez`, `/readyz` and `/metrics`, with `/metrics`
    /// for tokens the API server allows (then not served beside the verbs); needs
    /// cluster access.
    pub secure: Option<crate::run::secure::SecureServing>,
    /// Request body limit.
    pub max_body_bytes: usize,
    /// A connection must send a request's headers within this time (its first request
    /// included), else it is closed.
    pub header_timeout: std::time::Duration,
    /// A request's body must arrive and be answered within this time, else `408`.
    pub request_timeout: std::time::Duration,
    /// Connections held open at once; further clients wait to be accepted.
    pub max_connections: usize,
    /// Nodes one filter or prioritize request may carry.
    pub max_nodes: usize,
    /// kube-scheduler feature gates.
    pub feature_gates: algorithms::features::FeatureGates,
}

/// Why the extender could not start.
#[derive(Debug, Error)]
pub enum ExtenderError {
    /// Configuration or client problem.
    #[error(transparent)]
    Run(#[from] RunError),
    /// TLS files unusable.
    #[error("failed to load TLS certificate or key: {0}")]
    Tls(String),
    /// The configuration has kube-scheduler ask for what this extender cannot serve.
    #[error("{0}")]
    Unservable(String),
    /// Server failure.
    #[error("extender server failed: {0}")]
    Serve(String),
}

/// The informer cache as the extender's view of the cluster.
pub struct KubeCluster {
    client: Client,
    shared: Arc<Shared>,
    /// The snapshot requests read, refreshed from the cache (locked inside the state lock).
    view: Arc<Mutex<Snapshot>>,
}

/// Brings the view up to date under the state lock and returns a copy.
fn refreshed(st: &mut crate::run::State, view: &Mutex<Snapshot>) -> Snapshot {
    let mut v = view.lock().unwrap_or_else(|e| e.into_inner());
    st.engine.cache.update_snapshot(&mut v);
    v.clone()
}

impl ClusterView for KubeCluster {
    fn snapshot(&self) -> Arc<Snapshot> {
        let mut st = self.shared.lock();
        Arc::new(refreshed(&mut st, &self.view))
    }

    fn ready(&self) -> bool {
        self.shared.ready()
    }

    fn bind(&self, args: ExtenderBindingArgs, profile: Profile) -> BoxFuture<'static, Result<(), String>> {
        let (client, shared, view) = (self.client.clone(), self.shared.clone(), self.view.clone());
        Box::pin(async move {
            let api: Api<Pod> = Api::namespaced(client.clone(), &args.pod_namespace);
            let pod = api
                .get(&args.pod_name)
                .await
                .map_err(|e| format!("failed to read pod: {}", crate::watch::cause::Told(&e)))?;
            let info = PodInfo::from_pod(&pod).map_err(|e| e.to_string())?;
            if !args.pod_uid.is_empty() && info.uid != args.pod_uid {
                return Err(format!("pod {} has UID {}, not {}", info.key(), info.uid, args.pod_uid));
            }
            let key = info.key();
            shared.limiter.until_ready().await;
            let assumed = assume_if_fits(&shared, &view, &profile, &info, &args.node)?;
            match bind(&client, &info, &args.node).await {
                BindOutcome::Bound => {
                    if assumed {
                        shared.lock().engine.cache.finish_binding(&key, Instant::now());
                    }
                    Ok(())
                }
                other => {
                    if assumed {
                        shared.lock().engine.cache.forget(&key);
                    }
                    Err(match other {
                        BindOutcome::Conflict => format!("pod {key} is already bound"),
                        BindOutcome::Gone => format!("pod {key} not found"),
                        BindOutcome::Failed(e) => format!("binding {key} failed: {e}"),
                        BindOutcome::Bound => String::new(),
                    })
                }
            }
        })
    }
}

/// Under the state lock: checks that the pod passes the profile's filters on `node`
/// (bound and assumed pods counted), then assumes it there. `Ok(false)` when the pod was
/// already placed in the cache (a retried bind).
fn assume_if_fits(
    shared: &Shared,
    view: &Mutex<Snapshot>,
    profile: &Profile,
    pod: &PodInfo,
    node: &str,
) -> Result<bool, String> {
    let mut st = shared.lock();
    if st.engine.cache.node_of(&pod.key()).is_some() {
        return Ok(false);
    }
    let snap = refreshed(&mut st, view);
    let snap = &snap;
    let Some(&i) = snap.index.get(node) else {
        return Err(format!("node {node} is not in the extender's cache"));
    };
    let ev = filter_candidates(profile, pod, snap, Some(&[i]));
    if let Some((_, status)) = ev.rejected.iter().next() {
        return Err(format!("pod {} no longer fits on {node}: {}", pod.key(), status.message()));
    }
    if let Some(err) = ev.error {
        return Err(err.message());
    }
    Ok(st.engine.cache.assume(pod, node).is_ok())
}

/// The entries of a configuration's `extenders` that call this extender: those whose
/// `urlPrefix` names its port, or every entry when none does (a Service may map ports).
fn own_entries(
    extenders: &[algorithms::extender_config::ExtenderConfig],
    port: u16,
) -> Vec<algorithms::extender_config::ExtenderConfig> {
    let port_of = |url: &str| {
        let rest = url.split_once("://").map_or(url, |(_, r)| r);
        let host = rest.split('/').next().unwrap_or_default();
        host.rsplit_once(':').and_then(|(_, p)| p.parse::<u16>().ok())
    };
    let ours: Vec<_> =
        extenders.iter().filter(|e| e.url_prefix.as_deref().and_then(port_of) == Some(port)).cloned().collect();
    if ours.is_empty() { extenders.to_vec() } else { ours }
}

/// Why the extenders of a configuration (the one kube-scheduler calls this extender
/// with) would ask for what only cluster access serves: `bindVerb` (binding) or
/// `nodeCacheCapable: true` (node names looked up in a cache).
fn needs_cluster(extenders: &[algorithms::extender_config::ExtenderConfig]) -> Option<String> {
    extenders.iter().enumerate().find_map(|(i, e)| {
        let asks = match (&e.bind_verb, e.node_cache_capable) {
            (Some(verb), true) => format!("bindVerb {verb:?} and nodeCacheCapable: true"),
            (Some(verb), false) => format!("bindVerb {verb:?}"),
            (None, true) => "nodeCacheCapable: true".to_string(),
            (None, false) => return None,
        };
        Some(format!(
            "extenders[{i}] sets {asks}, which this extender serves only with cluster access: \
             start it with --kubeconfig or --in-cluster, or leave that out of the configuration \
             (kube-scheduler then binds, and sends whole nodes)"
        ))
    })
}

/// Serves the extender until `shutdown` completes.
pub async fn serve(
    opts: ExtenderOptions,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), ExtenderError> {
    let (cfg, profiles) = config_file::profiles(opts.config.as_deref(), opts.feature_gates).map_err(RunError::from)?;
    let mut profile = profiles.into_iter().next().unwrap_or_else(|| default_profile(DEFAULT_SCHEDULER_NAME));
    // kube-scheduler, which calls the extender, runs the volume plugins itself with the
    // claims and volumes it watches; the extender does not watch them.
    profile.filters.retain(|f| !algorithms::plugins::registry::reads_objects(f.name()));
    // Reserve, Permit and PreBind are the caller's too: the extender's /bind only binds.
    profile.reserves.clear();
    profile.permits.clear();
    profile.pre_binds.clear();
    let with_cluster = opts.kubeconfig.is_some() || opts.in_cluster;
    if !with_cluster && let Some(why) = needs_cluster(&own_entries(&cfg.extenders, opts.listen.port())) {
        return Err(ExtenderError::Unservable(why));
    }
    if !with_cluster && opts.secure.is_some() {
        return Err(ExtenderError::Unservable(
            "--secure-listen checks /metrics tokens with the API server: start the extender with --kubeconfig or \
             --in-cluster"
                .into(),
        ));
    }
    let mut managed = opts.managed_resources.clone();
    for e in &cfg.extenders {
        for m in &e.managed_resources {
            if !managed.contains(&m.name) {
                managed.push(m.name.clone());
            }
        }
    }
    let mut api_client = None;
    let cluster: Option<Arc<dyn ClusterView>> = if with_cluster {
        let client = make_client(opts.kubeconfig.as_deref()).await?;
        api_client = Some(client.clone());
        let qps = cfg.client_connection.qps.unwrap_or(500.0).max(1.0) as u32;
        let quota = Quota::per_second(NonZeroU32::new(qps).unwrap_or(NonZeroU32::MIN));
        // The engine has no profiles: the extender caches the cluster but queues no pods.
        let shared = Arc::new(Shared::new(Engine::new(Vec::new()), quota));
        // The extender places no gangs and runs no volume plugins: it needs no PodGroups
        // and no storage objects.
        {
            let mut st = shared.lock();
            st.not_waiting_for(crate::run::Feed::PodGroups);
            st.not_waiting_for(crate::run::Feed::Objects);
        }
        tokio::spawn(informer::run(client.clone(), shared.clone()));
        tokio::spawn(workloads::run(client.clone(), shared.clone()));
        tokio::spawn(crate::run::budgets::run(client.clone(), shared.clone()));
        Some(Arc::new(KubeCluster { client, shared, view: Default::default() }))
    } else {
        None
    };
    info!(listen = %opts.listen, cluster_access = cluster.is_some(), managed = ?managed, "serving the extender");
    let mut ext = Extender::new(profile, cluster, managed);
    ext.max_nodes = opts.max_nodes;
    let ext = Arc::new(ext);
    let limits = extender::Limits {
        body_bytes: opts.max_body_bytes,
        request_timeout: opts.request_timeout,
        metrics: opts.secure.is_none(),
    };
    if let (Some(serving), Some(client)) = (&opts.secure, api_client) {
        let auth = Arc::new(crate::run::secure::Delegated::new(client));
        let app = crate::run::secure::router(extender::operations_router(ext.clone()), auth);
        crate::run::secure::serve(serving, app).await.map_err(|e| ExtenderError::Serve(e.to_string()))?;
        info!(listen = %serving.listen, "serving HTTPS: /metrics for tokens allowed to get it, health checks open");
    }
    let app = extender::router_with_limits(ext, limits);
    let handle = axum_server::Handle::new();
    let h = handle.clone();
    tokio::spawn(async move {
        shutdown.await;
        h.graceful_shutdown(Some(std::time::Duration::from_secs(10)));
    });
    let listener = LimitedListener::bind(opts.listen, opts.max_connections)
        .await
        .map_err(|e| ExtenderError::Serve(format!("failed to listen on {}: {e}", opts.listen)))?;
    let mut server = axum_server::Server::<LimitedAddr>::from_listener(listener)
        .first_request_timeout(opts.header_timeout)
        .handle(handle);
    // The header timeout also bounds how long a kept-alive connection may sit idle
    // between requests.
    server.http_builder().http1().header_read_timeout(opts.header_timeout);
    let result = match &opts.tls {
        Some((cert, key)) => {
            let _ = rustls::crypto::ring::default_provider().install_default();
            let tls = axum_server::tls_rustls::RustlsConfig::from_pem_file(cert, key)
                .await
                .map_err(|e| ExtenderError::Tls(e.to_string()))?;
            let acceptor = axum_server::tls_rustls::RustlsAcceptor::new(tls).handshake_timeout(opts.header_timeout);
            server.acceptor(acceptor).serve(app.into_make_service()).await
        }
        None => server.serve(app.into_make_service()).await,
    };
    result.map_err(|e| ExtenderError::Serve(e.to_string()))
}

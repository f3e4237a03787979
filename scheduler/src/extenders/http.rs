//! One extender reached over HTTP(S): a JSON POST to `urlPrefix/verb` per call.

use std::sync::Arc;
use std::time::Duration;

use algorithms::config::ExtenderConfig;
use k8s_openapi::api::core::v1::{Container, Pod};
use serde::Serialize;
use serde::de::DeserializeOwned;
use ureq::Agent;
use ureq::tls::{Certificate, ClientCert, PrivateKey, RootCerts, TlsConfig};

/// The largest answer read from an extender (a filter answer may carry every node).
const MAX_ANSWER: u64 = 512 << 20;

/// An extender as `run` calls it.
pub struct HttpExtender {
    cfg: ExtenderConfig,
    url: String,
    agent: Agent,
}

fn verb(v: &Option<String>) -> Option<&str> {
    v.as_deref().filter(|v| !v.is_empty())
}

impl HttpExtender {
    /// The client for one `extenders` entry (validated beforehand).
    pub fn new(cfg: &ExtenderConfig) -> Result<Self, String> {
        let url = cfg.url_prefix.clone().unwrap_or_default().trim_end_matches('/').to_string();
        let timeout: Duration = cfg.timeout()?;
        let tls = tls_config(cfg)?;
        let agent: Agent = Agent::config_builder()
            .timeout_global(Some(timeout))
            .http_status_as_error(false)
            .tls_config(tls)
            .build()
            .into();
        Ok(HttpExtender { cfg: cfg.clone(), url, agent })
    }

    /// Its name in logs and messages: the URL prefix, as kube-scheduler names it.
    pub fn name(&self) -> &str {
        self.cfg.url_prefix.as_deref().unwrap_or_default()
    }

    /// Whether scheduling goes on without it when a call fails.
    pub fn ignorable(&self) -> bool {
        self.cfg.ignorable
    }

    /// Whether it is sent node names rather than nodes.
    pub fn node_cache_capable(&self) -> bool {
        self.cfg.node_cache_capable
    }

    /// The weight of its scores.
    pub fn weight(&self) -> i64 {
        self.cfg.weight
    }

    /// The filter verb, when set.
    pub fn filter_verb(&self) -> Option<&str> {
        verb(&self.cfg.filter_verb)
    }

    /// The prioritize verb, when set.
    pub fn prioritize_verb(&self) -> Option<&str> {
        verb(&self.cfg.prioritize_verb)
    }

    /// The bind verb, when set.
    pub fn bind_verb(&self) -> Option<&str> {
        verb(&self.cfg.bind_verb)
    }

    /// The preempt verb, when set.
    pub fn preempt_verb(&self) -> Option<&str> {
        verb(&self.cfg.preempt_verb)
    }

    /// Whether the pod asks for one of its managed resources (in the requests or limits of
    /// a container or init container); every pod when it manages none.
    pub fn interested(&self, pod: &Pod) -> bool {
        let Some(spec) = &pod.spec else { return self.cfg.managed_resources.is_empty() };
        let containers = spec.containers.iter().chain(spec.init_containers.iter().flatten());
        let names = containers.flat_map(|c: &Container| {
            let r = c.resources.as_ref();
            let requests = r.and_then(|r| r.requests.as_ref()).into_iter().flat_map(|m| m.keys());
            let limits = r.and_then(|r| r.limits.as_ref()).into_iter().flat_map(|m| m.keys());
            requests.chain(limits).map(String::as_str)
        });
        self.cfg.is_interested(names)
    }

    /// POSTs `args` to the verb and reads the answer, with kube-scheduler's messages.
    pub fn send<A: Serialize, R: DeserializeOwned>(&self, verb: &str, args: &A) -> Result<R, String> {
        let url = format!("{}/{verb}", self.url);
        let body = serde_json::to_vec(args).map_err(|e| format!("encoding the {verb} request: {e}"))?;
        let mut resp = self
            .agent
            .post(&url)
            .header("Content-Type", "application/json")
            .send(&body[..])
            .map_err(|e| format!("Post {url:?}: {e}"))?;
        let code = resp.status().as_u16();
        if code != 200 {
            return Err(format!("failed {verb} with extender at URL {url}, code {code}"));
        }
        resp.body_mut()
            .with_config()
            .limit(MAX_ANSWER)
            .read_json::<R>()
            .map_err(|e| format!("reading the {verb} answer of extender at URL {url}: {e}"))
    }
}

/// kube-scheduler's transport rules: HTTPS without a certificate authority skips
/// verification; data fields take precedence over files.
fn tls_config(cfg: &ExtenderConfig) -> Result<TlsConfig, String> {
    let tls = cfg.tls_config.clone().unwrap_or_default();
    let read = |data: &Option<k8s_openapi::ByteString>,
                file: &Option<String>,
                what: &str|
     -> Result<Option<Vec<u8>>, String> {
        if let Some(d) = data.as_ref().filter(|d| !d.0.is_empty()) {
            return Ok(Some(d.0.clone()));
        }
        match file.as_deref().filter(|f| !f.is_empty()) {
            Some(f) => std::fs::read(f).map(Some).map_err(|e| format!("tlsConfig: reading {what} {f}: {e}")),
            None => Ok(None),
        }
    };
    let ca = read(&tls.ca_data, &tls.ca_file, "caFile")?;
    let cert = read(&tls.cert_data, &tls.cert_file, "certFile")?;
    let key = read(&tls.key_data, &tls.key_file, "keyFile")?;
    let mut b = TlsConfig::builder();
    let insecure = tls.insecure || (cfg.enable_https && ca.is_none());
    b = b.disable_verification(insecure);
    if let Some(ca) = &ca {
        let certs: Vec<Certificate<'static>> = ureq::tls::parse_pem(ca)
            .filter_map(|item| match item {
                Ok(ureq::tls::PemItem::Certificate(c)) => Some(Ok(c)),
                Ok(_) => None,
                Err(e) => Some(Err(e)),
            })
            .collect::<Result<_, _>>()
            .map_err(|e| format!("tlsConfig: certificate authority: {e}"))?;
        if certs.is_empty() {
            return Err("tlsConfig: the certificate authority holds no PEM certificate".into());
        }
        b = b.root_certs(RootCerts::Specific(Arc::new(certs)));
    }
    match (cert, key) {
        (Some(cert), Some(key)) => {
            let chain = Certificate::from_pem(&cert).map_err(|e| format!("tlsConfig: client certificate: {e}"))?;
            let key = PrivateKey::from_pem(&key).map_err(|e| format!("tlsConfig: client key: {e}"))?;
            b = b.client_cert(Some(ClientCert::new_with_certs(&[chain], key)));
        }
        (None, None) => {}
        _ => return Err("tlsConfig: a client certificate needs both a certificate and a key".into()),
    }
    Ok(b.build())
}

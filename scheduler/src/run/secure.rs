//! The secure port, as kube-scheduler serves it: HTTPS (the given certificate, or a
//! self-signed one made at start), `/healthz`, `/readyz` and `/livez` open to all (a token
//! sent with them must still be valid), and `/metrics` only to a bearer token the API server authenticates (TokenReview) for a user
//! it authorizes to `get` the non-resource URL `/metrics` (SubjectAccessReview). A
//! request without a token is `system:anonymous`, as kube-scheduler's anonymous
//! authentication makes it: allowed only where the cluster's RBAC allows that user.
//! Decisions are kept for ten seconds, as kube-scheduler's delegated authenticator and
//! authorizer keep theirs, so a scrape every few seconds costs the API server little.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec, UserInfo};
use k8s_openapi::api::authorization::v1::{NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use kube::Client;
use kube::api::{Api, PostParams};
use thiserror::Error;

/// Paths every authenticated (or anonymous) request may get, as kube-scheduler's
/// `--authorization-always-allow-paths` default; a token sent with them must still be valid.
const ALWAYS_ALLOWED: [&str; 3] = ["/healthz", "/livez", "/readyz"];

/// How long a decision about a token is kept.
const KEEP: Duration = Duration::from_secs(10);
/// Tokens remembered at most; the oldest decisions go first beyond.
const REMEMBERED: usize = 1024;

/// Where and with what certificate the secure port is served.
#[derive(Debug, Clone)]
pub struct SecureServing {
    /// The HTTPS address.
    pub listen: SocketAddr,
    /// Certificate and private key files (PEM); a self-signed pair when absent.
    pub cert_and_key: Option<(PathBuf, PathBuf)>,
}

/// The secure port could not be served.
#[derive(Debug, Error)]
pub enum SecureError {
    /// The certificate or key could not be read or used.
    #[error("secure port: certificate: {0}")]
    Certificate(String),
    /// The address could not be bound.
    #[error("secure port: failed to listen on {addr}: {source}")]
    Listen {
        /// Address.
        addr: SocketAddr,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
}

/// What the API server said of a token.
#[derive(Debug, Clone, PartialEq)]
enum Decision {
    /// Authenticated and allowed to read `/metrics`.
    Allowed,
    /// Not a token the API server knows.
    Unauthenticated,
    /// Authenticated as this user, who may not read `/metrics`.
    Forbidden(String),
}

/// Asks the API server who a token is and whether it may read `/metrics`.
pub struct Delegated {
    client: Client,
    decided: Mutex<HashMap<String, (Instant, Decision)>>,
}

impl Delegated {
    /// Delegating to the API server behind `client`.
    pub fn new(client: Client) -> Self {
        Delegated { client, decided: Mutex::new(HashMap::new()) }
    }

    async fn decide(&self, token: Option<&str>, path: &str) -> Result<Decision, kube::Error> {
        // The health paths are allowed to everyone authenticated, anonymous included.
        let path = if ALWAYS_ALLOWED.contains(&path) { "" } else { path };
        let key = format!("{path} {}", token.unwrap_or(""));
        if let Some((at, d)) = self.decided.lock().unwrap_or_else(|e| e.into_inner()).get(&key)
            && at.elapsed() < KEEP
        {
            return Ok(d.clone());
        }
        let decision = self.ask(token, path).await?;
        let mut decided = self.decided.lock().unwrap_or_else(|e| e.into_inner());
        decided.retain(|_, (at, _)| at.elapsed() < KEEP);
        if decided.len() >= REMEMBERED
            && let Some(oldest) = decided.iter().min_by_key(|(_, (at, _))| *at).map(|(k, _)| k.clone())
        {
            decided.remove(&oldest);
        }
        decided.insert(key, (Instant::now(), decision.clone()));
        Ok(decision)
    }

    async fn ask(&self, token: Option<&str>, path: &str) -> Result<Decision, kube::Error> {
        let Some(token) = token else {
            let anonymous = UserInfo {
                username: Some("system:anonymous".into()),
                groups: Some(vec!["system:unauthenticated".into()]),
                ..Default::default()
            };
            return self.authorize(anonymous, path).await;
        };
        let review = TokenReview {
            spec: TokenReviewSpec { token: token.to_string(), ..Default::default() },
            ..Default::default()
        };
        let reviewed = Api::<TokenReview>::all(self.client.clone()).create(&PostParams::default(), &review).await?;
        let status = reviewed.status.unwrap_or_default();
        let Some(user) = status.user.filter(|_| status.authenticated == Some(true)) else {
            return Ok(Decision::Unauthenticated);
        };
        self.authorize(user, path).await
    }

    async fn authorize(&self, user: UserInfo, path: &str) -> Result<Decision, kube::Error> {
        if path.is_empty() {
            return Ok(Decision::Allowed);
        }
        let access = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: user.username.clone(),
                uid: user.uid.clone(),
                groups: user.groups.clone(),
                extra: user.extra.clone(),
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(path.to_string()),
                    verb: Some("get".into()),
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let reviewed =
            Api::<SubjectAccessReview>::all(self.client.clone()).create(&PostParams::default(), &access).await?;
        if reviewed.status.is_some_and(|s| s.allowed) {
            Ok(Decision::Allowed)
        } else {
            Ok(Decision::Forbidden(user.username.unwrap_or_default()))
        }
    }
}

/// Lets a request through only with a token allowed to read its path.
async fn authorized(State(auth): State<Arc<Delegated>>, request: Request, next: Next) -> Response {
    let path = request.uri().path().to_string();
    let token =
        request.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).map(|v| match v.split_once(' ') {
            // The scheme is case-insensitive; a credential of another scheme is not one this
            // port can check, and is refused rather than taken for an anonymous request.
            Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") => token.trim().to_string(),
            _ => String::new(),
        });
    if token.as_deref() == Some("") {
        return (StatusCode::UNAUTHORIZED, "Unauthorized\n").into_response();
    }
    match auth.decide(token.as_deref(), &path).await {
        Ok(Decision::Allowed) => next.run(request).await,
        Ok(Decision::Unauthenticated) => (StatusCode::UNAUTHORIZED, "Unauthorized\n").into_response(),
        Ok(Decision::Forbidden(user)) => {
            let body = format!("forbidden: User \"{user}\" cannot get path \"{path}\"\n");
            (StatusCode::FORBIDDEN, body).into_response()
        }
        Err(e) => {
            let why = crate::watch::cause::api(&e);
            tracing::warn!(error = %why, "cannot check a /metrics request's token with the API server");
            (StatusCode::INTERNAL_SERVER_ERROR, format!("cannot check the token: {why}\n")).into_response()
        }
    }
}

/// `app` behind delegated authentication (every path) and authorization (all but the
/// health paths), as kube-scheduler's secure port.
pub fn router(app: Router, auth: Arc<Delegated>) -> Router {
    app.layer(axum::middleware::from_fn_with_state(auth, authorized))
}

/// The TLS configuration: the given files, or a certificate for `localhost`, the
/// loopback addresses and this host's name, signed by itself.
async fn tls(serving: &SecureServing) -> Result<axum_server::tls_rustls::RustlsConfig, SecureError> {
    use axum_server::tls_rustls::RustlsConfig;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let bad = |e: &dyn std::fmt::Display| SecureError::Certificate(e.to_string());
    if let Some((cert, key)) = &serving.cert_and_key {
        return RustlsConfig::from_pem_file(cert, key).await.map_err(|e| bad(&e));
    }
    let mut names = vec!["localhost".to_string(), "127.0.0.1".to_string(), "::1".to_string()];
    if let Ok(host) = std::fs::read_to_string("/proc/sys/kernel/hostname") {
        names.push(host.trim().to_string());
    }
    let made = rcgen::generate_simple_self_signed(names).map_err(|e| bad(&e))?;
    let (cert, key) = (made.cert.pem(), made.signing_key.serialize_pem());
    RustlsConfig::from_pem(cert.into_bytes(), key.into_bytes()).await.map_err(|e| bad(&e))
}

/// Binds the secure port and serves `app` on it in the background.
pub async fn serve(serving: &SecureServing, app: Router) -> Result<(), SecureError> {
    let config = tls(serving).await?;
    let listener = std::net::TcpListener::bind(serving.listen)
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .map_err(|source| SecureError::Listen { addr: serving.listen, source })?;
    let server = axum_server::from_tcp_rustls(listener, config)
        .map_err(|source| SecureError::Listen { addr: serving.listen, source })?;
    tokio::spawn(async move {
        if let Err(e) = server.serve(app.into_make_service()).await {
            tracing::error!(error = %e, "secure port stopped");
        }
    });
    Ok(())
}

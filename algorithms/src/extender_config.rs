//! The `extenders` stanza of a `KubeSchedulerConfiguration`: the HTTP extenders
//! kube-scheduler calls, with its validation rules and defaults.

use std::collections::HashSet;
use std::time::Duration;

use k8s_openapi::ByteString;
use serde::Deserialize;

/// kube-scheduler's timeout for an extender call when `httpTimeout` is unset or zero.
pub const DEFAULT_EXTENDER_TIMEOUT: Duration = Duration::from_secs(5);

/// An `extenders` entry.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExtenderConfig {
    /// Where the extender is reached; a verb is appended after a `/`.
    #[serde(default)]
    pub url_prefix: Option<String>,
    /// The filter verb; no filter call without it.
    #[serde(default)]
    pub filter_verb: Option<String>,
    /// The preempt verb; no preempt call without it.
    #[serde(default)]
    pub preempt_verb: Option<String>,
    /// The prioritize verb; no prioritize call without it.
    #[serde(default)]
    pub prioritize_verb: Option<String>,
    /// The bind verb: the extender binds the pods it is interested in.
    #[serde(default)]
    pub bind_verb: Option<String>,
    /// Multiplies the extender's 0-10 scores (must be positive with a prioritize verb).
    #[serde(default)]
    pub weight: i64,
    /// Whether to call it over HTTPS.
    #[serde(default, rename = "enableHTTPS")]
    pub enable_https: bool,
    /// TLS settings.
    #[serde(default)]
    pub tls_config: Option<ExtenderTls>,
    /// Timeout of one call, a duration such as `30s` (default 5s).
    #[serde(default)]
    pub http_timeout: Option<String>,
    /// Whether the extender keeps its own node cache (it is sent node names only).
    #[serde(default)]
    pub node_cache_capable: bool,
    /// Extended resources the extender manages: it is called only for pods asking for
    /// one of them (for every pod when empty).
    #[serde(default)]
    pub managed_resources: Vec<ManagedResource>,
    /// Whether scheduling goes on without the extender when it cannot be reached.
    #[serde(default)]
    pub ignorable: bool,
}

/// A managed extended resource.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManagedResource {
    /// Resource name, e.g. `nvidia.com/gpu`.
    pub name: String,
    /// Whether the scheduler leaves the resource out of its own fit check.
    #[serde(default)]
    pub ignored_by_scheduler: bool,
}

/// `tlsConfig` of an extender (byte fields are base64 in JSON and YAML, as in Go).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExtenderTls {
    /// Skip verifying the server's certificate.
    #[serde(default)]
    pub insecure: bool,
    /// The name to verify the server's certificate against, instead of the URL's host.
    #[serde(default)]
    pub server_name: Option<String>,
    /// Client certificate file (PEM).
    #[serde(default)]
    pub cert_file: Option<String>,
    /// Client key file (PEM).
    #[serde(default)]
    pub key_file: Option<String>,
    /// Certificate authority file (PEM).
    #[serde(default)]
    pub ca_file: Option<String>,
    /// Client certificate (PEM), taking precedence over `certFile`.
    #[serde(default)]
    pub cert_data: Option<ByteString>,
    /// Client key (PEM), taking precedence over `keyFile`.
    #[serde(default)]
    pub key_data: Option<ByteString>,
    /// Certificate authority (PEM), taking precedence over `caFile`.
    #[serde(default)]
    pub ca_data: Option<ByteString>,
}

impl ExtenderConfig {
    /// The call timeout: `httpTimeout`, or 5s when it is unset or zero.
    pub fn timeout(&self) -> Result<Duration, String> {
        match self.http_timeout.as_deref() {
            None => Ok(DEFAULT_EXTENDER_TIMEOUT),
            Some(s) => match parse_go_duration(s) {
                Some(d) if d.is_zero() => Ok(DEFAULT_EXTENDER_TIMEOUT),
                Some(d) => Ok(d),
                None => Err(format!("{s:?} is not a duration (such as 5s, 500ms or 1m30s)")),
            },
        }
    }

    /// Whether the extender is asked about `pod`, given the names of the resources its
    /// containers and init containers request or limit.
    pub fn is_interested<'a>(&self, mut resources: impl Iterator<Item = &'a str>) -> bool {
        self.managed_resources.is_empty() || resources.any(|r| self.managed_resources.iter().any(|m| m.name == r))
    }
}

/// The checks kube-scheduler makes of its `extenders`, with its messages.
pub fn validate_extenders(extenders: &[ExtenderConfig]) -> Result<(), String> {
    let mut errs: Vec<String> = Vec::new();
    let mut managed: HashSet<&str> = HashSet::new();
    for (i, e) in extenders.iter().enumerate() {
        let path = format!("extenders[{i}]");
        if e.prioritize_verb.as_deref().is_some_and(|v| !v.is_empty()) && e.weight <= 0 {
            errs.push(format!("{path}.weight: Invalid value: {}: must have a positive weight applied to it", e.weight));
        }
        for (j, r) in e.managed_resources.iter().enumerate() {
            let at = format!("{path}.managedResources[{j}].name");
            if let Err(why) = extended_resource_name(&r.name) {
                errs.push(format!("{at}: Invalid value: {:?}: {why}", r.name));
            }
            if !managed.insert(r.name.as_str()) {
                errs.push(format!("{at}: Invalid value: {:?}: duplicate extender managed resource name", r.name));
            }
        }
        if let Err(why) = e.timeout() {
            errs.push(format!("{path}.httpTimeout: Invalid value: {why}"));
        }
        if e.url_prefix.as_deref().unwrap_or("").is_empty() {
            errs.push(format!("{path}.urlPrefix: Required value: the extender's address"));
        }
        if let Some(tls) = &e.tls_config
            && tls.server_name.as_deref().is_some_and(|s| !s.is_empty())
        {
            errs.push(format!(
                "{path}.tlsConfig.serverName: Unsupported value: the certificate is verified against the urlPrefix's host; put that name in urlPrefix"
            ));
        }
    }
    let binders = extenders.iter().filter(|e| e.bind_verb.as_deref().is_some_and(|v| !v.is_empty())).count();
    if binders > 1 {
        errs.push(format!(
            "extenders: Invalid value: \"found {binders} extenders implementing bind\": only one extender can implement bind"
        ));
    }
    if errs.is_empty() { Ok(()) } else { Err(errs.join(", ")) }
}

/// An extended resource name: a domain-qualified name outside `kubernetes.io/`, not
/// starting with `requests.`.
fn extended_resource_name(name: &str) -> Result<(), &'static str> {
    let Some((domain, rest)) = name.split_once('/') else {
        return Err("must be a standard resource for containers, or a fully qualified extended resource name");
    };
    let native = domain == "kubernetes.io" || domain.ends_with(".kubernetes.io");
    if native || name.starts_with("requests.") || rest.is_empty() || domain.is_empty() {
        return Err("must be a standard resource for containers, or a fully qualified extended resource name");
    }
    Ok(())
}

/// Parses a Go duration: `300ms`, `1.5s`, `1m30s`, `2h`, `0`.
pub fn parse_go_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    if s == "0" {
        return Some(Duration::ZERO);
    }
    let mut rest = s;
    let mut total = 0f64;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let end = rest.find(|c: char| !c.is_ascii_digit() && c != '.')?;
        let v: f64 = rest[..end].parse().ok()?;
        rest = &rest[end..];
        let unit_end = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let scale = match &rest[..unit_end] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += v * scale;
        rest = &rest[unit_end..];
    }
    Some(Duration::from_secs_f64(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ext(v: serde_json::Value) -> ExtenderConfig {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn go_durations() {
        let cases = [
            ("30s", Some(30_000)),
            ("500ms", Some(500)),
            ("1m30s", Some(90_000)),
            ("1.5s", Some(1_500)),
            ("0", Some(0)),
            ("2h", Some(7_200_000)),
            ("", None),
            ("5", None),
            ("5x", None),
        ];
        for (s, want) in cases {
            assert_eq!(parse_go_duration(s).map(|d| d.as_millis() as u64), want, "{s:?}");
        }
    }

    #[test]
    fn kube_scheduler_validation_rules() {
        let ok = ext(
            serde_json::json!({"urlPrefix": "http://127.0.0.1:8081/extender", "prioritizeVerb": "prioritize", "weight": 2}),
        );
        assert!(validate_extenders(&[ok]).is_ok());
        let cases: Vec<(Vec<ExtenderConfig>, &str)> = vec![
            (
                vec![ext(serde_json::json!({"urlPrefix": "http://e", "prioritizeVerb": "prioritize", "weight": -2}))],
                "extenders[0].weight: Invalid value: -2: must have a positive weight applied to it",
            ),
            (
                vec![ext(serde_json::json!({"urlPrefix": "http://e", "prioritizeVerb": "prioritize"}))],
                "extenders[0].weight: Invalid value: 0",
            ),
            (
                vec![
                    ext(serde_json::json!({"urlPrefix": "http://a", "bindVerb": "bind"})),
                    ext(serde_json::json!({"urlPrefix": "http://b", "bindVerb": "bind"})),
                ],
                "only one extender can implement bind",
            ),
            (
                vec![ext(serde_json::json!({"urlPrefix": "http://a", "managedResources": [
                    {"name": "example.com/foo"}, {"name": "example.com/foo"}]}))],
                "duplicate extender managed resource name",
            ),
            (
                vec![ext(
                    serde_json::json!({"urlPrefix": "http://a", "managedResources": [{"name": "kubernetes.io/foo"}]}),
                )],
                "extenders[0].managedResources[0].name",
            ),
            (vec![ext(serde_json::json!({"urlPrefix": "http://a", "httpTimeout": "soon"}))], "httpTimeout"),
            (vec![ext(serde_json::json!({"filterVerb": "filter"}))], "extenders[0].urlPrefix"),
        ];
        for (exts, want) in cases {
            let err = validate_extenders(&exts).unwrap_err();
            assert!(err.contains(want), "{err} should contain {want}");
        }
        // A filter-only extender needs no weight.
        assert!(validate_extenders(&[ext(serde_json::json!({"urlPrefix": "http://a", "filterVerb": "f"}))]).is_ok());
    }

    #[test]
    fn interest_follows_managed_resources() {
        let all = ext(serde_json::json!({"urlPrefix": "http://a"}));
        assert!(all.is_interested(["cpu"].into_iter()));
        let gpu = ext(serde_json::json!({"urlPrefix": "http://a", "managedResources": [{"name": "example.com/gpu"}]}));
        assert!(!gpu.is_interested(["cpu", "memory"].into_iter()));
        assert!(gpu.is_interested(["cpu", "example.com/gpu"].into_iter()));
    }

    #[test]
    fn timeout_defaults_to_five_seconds() {
        assert_eq!(ext(serde_json::json!({})).timeout(), Ok(DEFAULT_EXTENDER_TIMEOUT));
        assert_eq!(ext(serde_json::json!({"httpTimeout": "0s"})).timeout(), Ok(DEFAULT_EXTENDER_TIMEOUT));
        assert_eq!(ext(serde_json::json!({"httpTimeout": "30s"})).timeout(), Ok(Duration::from_secs(30)));
        let tls = ext(serde_json::json!({"enableHTTPS": true, "tlsConfig": {"caData": "aGVsbG8="}}));
        assert_eq!(tls.tls_config.and_then(|t| t.ca_data).map(|b| b.0), Some(b"hello".to_vec()));
    }
}

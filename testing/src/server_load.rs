//! What the API server served during a run, read from its own `/metrics` before and
//! after: requests by verb and resource, and the server's CPU seconds. A backlog's
//! drain is bounded by the server, so this says where its time went.

use std::collections::BTreeMap;

use kube::Client;

/// The server's request counters and CPU at one moment (or their change over a run).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServerLoad {
    /// Requests served, keyed `VERB resource[/subresource]`.
    pub requests: BTreeMap<String, f64>,
    /// The server process's CPU seconds.
    pub cpu: f64,
}

const WRITES: [&str; 5] = ["POST", "PUT", "PATCH", "DELETE", "APPLY"];

impl ServerLoad {
    /// Reads the counters from the Prometheus text the server serves.
    pub fn parse(text: &str) -> ServerLoad {
        let mut load = ServerLoad::default();
        for line in text.lines() {
            if let Some(v) = line.strip_prefix("process_cpu_seconds_total ") {
                load.cpu = v.trim().parse().unwrap_or(0.0);
                continue;
            }
            let Some(rest) = line.strip_prefix("apiserver_request_total{") else { continue };
            let Some((labels, value)) = rest.rsplit_once("} ") else { continue };
            let label = |name: &str| {
                labels
                    .split(',')
                    .find_map(|kv| kv.strip_prefix(name)?.strip_prefix("=\"")?.strip_suffix('"'))
                    .unwrap_or("")
            };
            let (verb, resource, sub) = (label("verb"), label("resource"), label("subresource"));
            let key = if sub.is_empty() { format!("{verb} {resource}") } else { format!("{verb} {resource}/{sub}") };
            *load.requests.entry(key).or_default() += value.trim().parse::<f64>().unwrap_or(0.0);
        }
        load
    }

    /// Scrapes the server `client` talks to.
    pub async fn scrape(client: &Client) -> Result<ServerLoad, kube::Error> {
        let request = http::Request::get("/metrics").body(Vec::new()).map_err(kube::Error::HttpError)?;
        Ok(ServerLoad::parse(&client.request_text(request).await?))
    }

    /// What changed from `before` to `self`.
    pub fn since(&self, before: &ServerLoad) -> ServerLoad {
        let requests = self
            .requests
            .iter()
            .map(|(k, v)| (k.clone(), v - before.requests.get(k).copied().unwrap_or(0.0)))
            .filter(|(_, v)| *v > 0.0)
            .collect();
        ServerLoad { requests, cpu: self.cpu - before.cpu }
    }

    /// Write requests (creates, updates, patches, deletes).
    pub fn writes(&self) -> f64 {
        self.requests.iter().filter(|(k, _)| WRITES.iter().any(|w| k.starts_with(w))).map(|(_, v)| v).sum()
    }

    /// One line: CPU, writes per pod, and the busiest requests with their counts.
    pub fn summary(&self, pods: usize) -> String {
        let mut busiest: Vec<(&String, &f64)> = self.requests.iter().collect();
        busiest.sort_by(|a, b| b.1.total_cmp(a.1).then_with(|| a.0.cmp(b.0)));
        let top: Vec<String> = busiest.iter().take(8).map(|(k, v)| format!("{k} {v:.0}")).collect();
        format!(
            "API server: {:.1} CPU s, {:.0} writes ({:.2} per pod); {}",
            self.cpu,
            self.writes(),
            self.writes() / pods.max(1) as f64,
            top.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"# HELP apiserver_request_total [STABLE] Counter of apiserver requests
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="binding",verb="POST",version="v1"} 2500
apiserver_request_total{code="409",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="binding",verb="POST",version="v1"} 3
apiserver_request_total{code="200",component="apiserver",dry_run="",group="resource.k8s.io",resource="resourceclaims",scope="resource",subresource="status",verb="PATCH",version="v1"} 2500
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="namespace",subresource="",verb="LIST",version="v1"} 4
process_cpu_seconds_total 31.5
"#;

    #[test]
    fn counts_requests_by_verb_and_resource() {
        let load = ServerLoad::parse(TEXT);
        assert_eq!(load.requests["POST pods/binding"], 2503.0);
        assert_eq!(load.requests["PATCH resourceclaims/status"], 2500.0);
        assert_eq!(load.requests["LIST pods"], 4.0);
        assert_eq!(load.cpu, 31.5);
        assert_eq!(load.writes(), 5003.0);
    }

    #[test]
    fn a_run_is_the_difference_of_two_scrapes() {
        let before = ServerLoad::parse(TEXT);
        let after = ServerLoad::parse(&TEXT.replace("} 2500\n", "} 5000\n").replace("31.5", "40"));
        let run = after.since(&before);
        assert_eq!(run.requests.len(), 2, "unchanged counters are left out: {:?}", run.requests);
        assert_eq!(run.writes(), 5000.0);
        assert_eq!(run.cpu, 8.5);
        assert!(run.summary(2500).contains("(2.00 per pod)"), "{}", run.summary(2500));
    }
}

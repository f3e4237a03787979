//! What became of the pod groups (gangs) of a simulation: placed whole, in part or not
//! at all, and, with a topology constraint, placed within one domain or across several.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use algorithms::PodInfo;
use algorithms::snapshot::Snapshot;
use serde_json::json;

/// A group's measured pods and the topology key its placement is constrained to.
#[derive(Debug, Default)]
pub struct Members {
    /// The pods' keys.
    pub pods: Vec<String>,
    /// The group's topology key, if it has one.
    pub topology_key: Option<String>,
}

/// The measured pods of each group, by group (`namespace/name`), with each group's
/// topology key as `key_of` gives it.
pub fn members(pods: &[PodInfo], key_of: impl Fn(&PodInfo) -> Option<String>) -> BTreeMap<String, Members> {
    let mut out: BTreeMap<String, Members> = BTreeMap::new();
    for pod in pods {
        if let Some(group) = crate::gang::group_of(pod) {
            let m = out.entry(group).or_default();
            m.pods.push(pod.key());
            if m.topology_key.is_none() {
                m.topology_key = key_of(pod);
            }
        }
    }
    out
}

/// The groups' outcome: the figures for the JSON report, and the line of the summary.
pub fn outcome(
    members: &BTreeMap<String, Members>,
    placements: &BTreeMap<String, String>,
    snapshot: &Snapshot,
) -> Option<(serde_json::Value, String)> {
    if members.is_empty() {
        return None;
    }
    let node_of: HashMap<&str, &algorithms::NodeInfo> =
        snapshot.nodes.iter().map(|n| (n.name.as_str(), &**n)).collect();
    let constrained = members.values().filter(|m| m.topology_key.is_some()).count();
    let (mut whole, mut partial, mut none, mut across, mut pods_placed, mut pods) = (0, 0, 0, 0, 0, 0);
    for m in members.values() {
        let keys = &m.pods;
        let nodes: Vec<&str> = keys.iter().filter_map(|k| placements.get(k).map(String::as_str)).collect();
        pods += keys.len();
        pods_placed += nodes.len();
        match nodes.len() {
            0 => none += 1,
            n if n == keys.len() => whole += 1,
            _ => partial += 1,
        }
        if let Some(key) = &m.topology_key {
            let domains: BTreeSet<Option<&String>> =
                nodes.iter().map(|n| node_of.get(n).and_then(|node| node.labels.get(key))).collect();
            if domains.len() > 1 {
                across += 1;
            }
        }
    }
    let mut line = format!(
        "Pod groups: {whole} of {} placed whole, {partial} in part, {none} not placed ({pods_placed} of {pods} member pods placed)",
        members.len()
    );
    if constrained > 0 {
        line.push_str(&format!(
            "; of the {constrained} with a topology constraint, {across} across more than one domain"
        ));
    }
    line.push('.');
    let figures = json!({"groups": members.len(), "placedWhole": whole, "placedInPart": partial, "notPlaced": none,
        "topologyConstrained": constrained, "acrossDomains": across, "memberPods": pods, "memberPodsPlaced": pods_placed});
    Some((figures, line))
}

#[cfg(test)]
mod tests {
    use super::*;
    use algorithms::builders::{NodeBuilder, PodBuilder, snapshot};

    #[test]
    fn groups_are_counted_whole_in_part_or_not_and_across_domains() {
        let pod = |name: &str, group: &str| {
            PodInfo::from_pod(&PodBuilder::new(name).label("scheduling.x-k8s.io/pod-group", group).build()).unwrap()
        };
        let pods = [pod("a0", "a"), pod("a1", "a"), pod("b0", "b"), pod("b1", "b"), pod("c0", "c"), pod("alone", "")];
        let members =
            members(&pods[..5], |p| (p.name.starts_with('a') || p.name.starts_with('b')).then(|| "rack".to_string()));
        assert_eq!(members.len(), 3);
        let rack = |n: &str, r: &str| NodeBuilder::new(n).label("rack", r).build();
        let snap = snapshot(&[rack("n1", "r1"), rack("n2", "r1"), rack("n3", "r2")], &[]);
        let placed: BTreeMap<String, String> = [("default/a0", "n1"), ("default/a1", "n3"), ("default/b0", "n2")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let (figures, line) = outcome(&members, &placed, &snap).unwrap();
        assert_eq!(
            line,
            "Pod groups: 1 of 3 placed whole, 1 in part, 1 not placed (3 of 5 member pods placed); \
             of the 2 with a topology constraint, 1 across more than one domain."
        );
        assert_eq!(figures["acrossDomains"], 1);
        assert!(outcome(&BTreeMap::new(), &placed, &snap).is_none());
    }
}

//! What became of the pod groups (gangs) of a simulation: placed whole, in part or not
//! at all, and, with a topology constraint, placed within one domain or across several.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use algorithms::PodInfo;
use algorithms::snapshot::Snapshot;
use serde_json::json;

/// The measured pods of each group, by group (`namespace/name`).
pub fn members(pods: &[PodInfo]) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for pod in pods {
        if let Some(group) = crate::gang::group_of(pod) {
            out.entry(group).or_default().push(pod.key());
        }
    }
    out
}

/// The groups' outcome: the figures for the JSON report, and the line of the summary.
pub fn outcome(
    members: &BTreeMap<String, Vec<String>>,
    placements: &BTreeMap<String, String>,
    snapshot: &Snapshot,
    topology_key: Option<&str>,
) -> Option<(serde_json::Value, String)> {
    if members.is_empty() {
        return None;
    }
    let domain_of: HashMap<&str, Option<&str>> = snapshot
        .nodes
        .iter()
        .map(|n| (n.name.as_str(), topology_key.and_then(|k| n.labels.get(k)).map(String::as_str)))
        .collect();
    let (mut whole, mut partial, mut none, mut across, mut pods_placed, mut pods) = (0, 0, 0, 0, 0, 0);
    for keys in members.values() {
        let nodes: Vec<&str> = keys.iter().filter_map(|k| placements.get(k).map(String::as_str)).collect();
        pods += keys.len();
        pods_placed += nodes.len();
        match nodes.len() {
            0 => none += 1,
            n if n == keys.len() => whole += 1,
            _ => partial += 1,
        }
        let domains: BTreeSet<Option<&str>> = nodes.iter().map(|n| domain_of.get(n).copied().flatten()).collect();
        if topology_key.is_some() && domains.len() > 1 {
            across += 1;
        }
    }
    let mut line = format!(
        "Pod groups: {whole} of {} placed whole, {partial} in part, {none} not placed ({pods_placed} of {pods} member pods placed)",
        members.len()
    );
    if let Some(key) = topology_key {
        line.push_str(&format!("; {across} placed across more than one {key} domain"));
    }
    line.push('.');
    let figures = json!({"groups": members.len(), "placedWhole": whole, "placedInPart": partial, "notPlaced": none,
        "acrossDomains": topology_key.map(|_| across), "memberPods": pods, "memberPodsPlaced": pods_placed});
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
        let members = members(&pods[..5]);
        assert_eq!(members.len(), 3);
        let rack = |n: &str, r: &str| NodeBuilder::new(n).label("rack", r).build();
        let snap = snapshot(&[rack("n1", "r1"), rack("n2", "r1"), rack("n3", "r2")], &[]);
        let placed: BTreeMap<String, String> = [("default/a0", "n1"), ("default/a1", "n3"), ("default/b0", "n2")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let (figures, line) = outcome(&members, &placed, &snap, Some("rack")).unwrap();
        assert_eq!(
            line,
            "Pod groups: 1 of 3 placed whole, 1 in part, 1 not placed (3 of 5 member pods placed); 1 placed across more than one rack domain."
        );
        assert_eq!(figures["acrossDomains"], 1);
        assert!(outcome(&BTreeMap::new(), &placed, &snap, None).is_none());
    }
}

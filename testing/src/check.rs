//! An independent check of a cluster's placements: every bound pod on an existing node
//! whose taints it tolerates, whose labels its selector and required node affinity
//! accept, with the node's resources not over-committed, host ports unique, required
//! inter-pod (anti-)affinity honoured and hard spread constraints within their skew.
//!
//! Written apart from the scheduler's plugins on purpose, so that it judges them rather
//! than repeating them; only quantity parsing is shared.

use std::collections::{BTreeMap, BTreeSet};

use algorithms::quantity::Quantity;
use k8s_openapi::api::core::v1::{
    Container, Node, NodeSelectorRequirement, NodeSelectorTerm, Pod, PodAffinityTerm, PodSpec, Taint, Toleration,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

type Labels = BTreeMap<String, String>;

/// Every broken rule, one line each (empty when every placement is valid).
pub fn placement_errors(nodes: &[Node], pods: &[Pod]) -> Vec<String> {
    let by_name: BTreeMap<&str, &Node> = nodes.iter().filter_map(|n| Some((n.metadata.name.as_deref()?, n))).collect();
    let bound: Vec<(&Pod, &Node)> = pods
        .iter()
        .filter(|p| !is_terminal(p))
        .filter_map(|p| Some((p, *by_name.get(p.spec.as_ref()?.node_name.as_deref()?)?)))
        .collect();
    let mut errors = Vec::new();
    for p in pods.iter().filter(|p| !is_terminal(p)) {
        if let Some(n) = p.spec.as_ref().and_then(|s| s.node_name.as_deref())
            && !by_name.contains_key(n)
        {
            errors.push(format!("{}: bound to {n}, which does not exist", key(p)));
        }
    }
    for (pod, node) in &bound {
        node_rules(pod, node, &mut errors);
    }
    resources(&bound, &mut errors);
    host_ports(&bound, &mut errors);
    inter_pod(&bound, &mut errors);
    spread(nodes, &bound, &mut errors);
    errors
}

fn key(p: &Pod) -> String {
    format!("{}/{}", p.metadata.namespace.as_deref().unwrap_or(""), p.metadata.name.as_deref().unwrap_or(""))
}

fn is_terminal(p: &Pod) -> bool {
    matches!(p.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Succeeded" | "Failed"))
}

fn labels_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Labels {
    meta.labels.clone().unwrap_or_default()
}

fn spec(p: &Pod) -> PodSpec {
    p.spec.clone().unwrap_or_default()
}

fn node_rules(pod: &Pod, node: &Node, errors: &mut Vec<String>) {
    let s = spec(pod);
    let node_name = node.metadata.name.clone().unwrap_or_default();
    let labels = labels_of(&node.metadata);
    let tolerations = s.tolerations.clone().unwrap_or_default();
    let node_spec = node.spec.clone().unwrap_or_default();
    if node_spec.unschedulable == Some(true) {
        let t =
            Taint { key: "node.kubernetes.io/unschedulable".into(), effect: "NoSchedule".into(), ..Default::default() };
        if !tolerations.iter().any(|tol| tolerates(tol, &t)) {
            errors.push(format!("{}: on cordoned node {node_name}", key(pod)));
        }
    }
    for t in node_spec.taints.unwrap_or_default() {
        if (t.effect == "NoSchedule" || t.effect == "NoExecute") && !tolerations.iter().any(|tol| tolerates(tol, &t)) {
            errors.push(format!("{}: taint {}:{} of {node_name} not tolerated", key(pod), t.key, t.effect));
        }
    }
    for (k, v) in s.node_selector.clone().unwrap_or_default() {
        if labels.get(&k) != Some(&v) {
            errors.push(format!("{}: node selector {k}={v} does not match {node_name}", key(pod)));
        }
    }
    let required = s
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|na| na.required_during_scheduling_ignored_during_execution.as_ref());
    if let Some(req) = required
        && !req.node_selector_terms.iter().any(|t| term_matches(t, &node_name, &labels))
    {
        errors.push(format!("{}: required node affinity does not match {node_name}", key(pod)));
    }
}

fn tolerates(tol: &Toleration, taint: &Taint) -> bool {
    let effect_ok = tol.effect.as_deref().is_none_or(|e| e.is_empty() || e == taint.effect);
    let key_ok = match tol.key.as_deref() {
        None | Some("") => tol.operator.as_deref() == Some("Exists"),
        Some(k) => k == taint.key,
    };
    let value_ok = match tol.operator.as_deref() {
        Some("Exists") => true,
        _ => tol.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or(""),
    };
    effect_ok && key_ok && value_ok
}

/// A node selector term: every requirement holds; a term with none matches nothing.
fn term_matches(term: &NodeSelectorTerm, node_name: &str, labels: &Labels) -> bool {
    let exprs = term.match_expressions.clone().unwrap_or_default();
    let fields = term.match_fields.clone().unwrap_or_default();
    if exprs.is_empty() && fields.is_empty() {
        return false;
    }
    let name_labels: Labels = [("metadata.name".to_string(), node_name.to_string())].into();
    exprs.iter().all(|r| requirement(r, labels)) && fields.iter().all(|r| requirement(r, &name_labels))
}

fn requirement(r: &NodeSelectorRequirement, labels: &Labels) -> bool {
    let values = r.values.clone().unwrap_or_default();
    let actual = labels.get(&r.key);
    let number = |v: Option<&String>| v.and_then(|s| s.parse::<i64>().ok());
    match r.operator.as_str() {
        "In" => actual.is_some_and(|a| values.contains(a)),
        "NotIn" => actual.is_none_or(|a| !values.contains(a)),
        "Exists" => actual.is_some(),
        "DoesNotExist" => actual.is_none(),
        "Gt" => matches!((number(actual), number(values.first())), (Some(a), Some(b)) if a > b),
        "Lt" => matches!((number(actual), number(values.first())), (Some(a), Some(b)) if a < b),
        _ => false,
    }
}

/// The amount of one resource: milli-units for cpu, units otherwise.
fn amount(name: &str, q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity) -> i64 {
    match Quantity::parse(&q.0) {
        Ok(v) if name == "cpu" => v.milli_value(),
        Ok(v) => v.value(),
        Err(_) => 0,
    }
}

fn requests(c: &Container) -> BTreeMap<String, i64> {
    let res = c.resources.clone().unwrap_or_default();
    // Extended resources may be given as limits only; the API server copies them to requests.
    let mut out: BTreeMap<String, i64> = BTreeMap::new();
    for (k, v) in res.limits.unwrap_or_default() {
        out.insert(k.clone(), amount(&k, &v));
    }
    for (k, v) in res.requests.unwrap_or_default() {
        out.insert(k.clone(), amount(&k, &v));
    }
    out
}

fn add(into: &mut BTreeMap<String, i64>, from: &BTreeMap<String, i64>) {
    for (k, v) in from {
        *into.entry(k.clone()).or_default() += v;
    }
}

/// The pod's effective requests: regular containers plus sidecars, or the largest init
/// container with the sidecars started before it, whichever is more; plus overhead.
fn effective(pod: &Pod) -> BTreeMap<String, i64> {
    let s = spec(pod);
    let mut total = BTreeMap::new();
    for c in &s.containers {
        add(&mut total, &requests(c));
    }
    let mut sidecars = BTreeMap::new();
    let mut peak: BTreeMap<String, i64> = BTreeMap::new();
    for c in s.init_containers.clone().unwrap_or_default() {
        let r = requests(&c);
        if c.restart_policy.as_deref() == Some("Always") {
            add(&mut sidecars, &r);
            continue;
        }
        let mut during = sidecars.clone();
        add(&mut during, &r);
        for (k, v) in during {
            let e = peak.entry(k).or_default();
            *e = (*e).max(v);
        }
    }
    add(&mut total, &sidecars);
    for (k, v) in peak {
        let e = total.entry(k).or_default();
        *e = (*e).max(v);
    }
    for (k, v) in s.overhead.clone().unwrap_or_default() {
        *total.entry(k.clone()).or_default() += amount(&k, &v);
    }
    total
}

fn resources(bound: &[(&Pod, &Node)], errors: &mut Vec<String>) {
    let mut used: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
    let mut allocatable: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
    for (pod, node) in bound {
        let name = node.metadata.name.clone().unwrap_or_default();
        let entry = used.entry(name.clone()).or_default();
        add(entry, &effective(pod));
        *entry.entry("pods".into()).or_default() += 1;
        allocatable.entry(name).or_insert_with(|| {
            let alloc = node.status.as_ref().and_then(|s| s.allocatable.clone()).unwrap_or_default();
            alloc.iter().map(|(k, v)| (k.clone(), amount(k, v))).collect()
        });
    }
    for (node, use_) in &used {
        let alloc = allocatable.get(node).cloned().unwrap_or_default();
        for (res, amount) in use_ {
            let have = alloc.get(res).copied().unwrap_or(0);
            if *amount > have {
                errors.push(format!("{node}: {res} over-committed ({amount} requested, {have} allocatable)"));
            }
        }
    }
}

fn host_ports(bound: &[(&Pod, &Node)], errors: &mut Vec<String>) {
    let mut seen: BTreeSet<(String, String, i32)> = BTreeSet::new();
    for (pod, node) in bound {
        let node = node.metadata.name.clone().unwrap_or_default();
        for c in spec(pod).containers {
            for p in c.ports.unwrap_or_default() {
                let Some(hp) = p.host_port.filter(|hp| *hp > 0) else { continue };
                let proto = p.protocol.unwrap_or_else(|| "TCP".into());
                if !seen.insert((node.clone(), proto.clone(), hp)) {
                    errors.push(format!("{}: host port {proto}/{hp} already used on {node}", key(pod)));
                }
            }
        }
    }
}

fn selector_matches(sel: &LabelSelector, labels: &Labels) -> bool {
    let equal = sel.match_labels.clone().unwrap_or_default().iter().all(|(k, v)| labels.get(k) == Some(v));
    let exprs = sel.match_expressions.clone().unwrap_or_default();
    equal
        && exprs.iter().all(|r| {
            let values = r.values.clone().unwrap_or_default();
            let actual = labels.get(&r.key);
            match r.operator.as_str() {
                "In" => actual.is_some_and(|a| values.contains(a)),
                "NotIn" => actual.is_none_or(|a| !values.contains(a)),
                "Exists" => actual.is_some(),
                "DoesNotExist" => actual.is_none(),
                _ => false,
            }
        })
}

fn term_selects(term: &PodAffinityTerm, owner: &Pod, other: &Pod) -> bool {
    let ns = other.metadata.namespace.clone().unwrap_or_default();
    let namespaces = term.namespaces.clone().unwrap_or_default();
    let in_ns = if namespaces.is_empty() && term.namespace_selector.is_none() {
        owner.metadata.namespace.as_deref() == Some(ns.as_str())
    } else {
        namespaces.contains(&ns)
    };
    in_ns && term.label_selector.as_ref().is_some_and(|s| selector_matches(s, &labels_of(&other.metadata)))
}

fn inter_pod(bound: &[(&Pod, &Node)], errors: &mut Vec<String>) {
    let domain = |node: &Node, k: &str| labels_of(&node.metadata).get(k).cloned();
    for (pod, node) in bound {
        let Some(aff) = spec(pod).affinity else { continue };
        let anti = aff.pod_anti_affinity.and_then(|a| a.required_during_scheduling_ignored_during_execution);
        for term in anti.unwrap_or_default() {
            let Some(d) = domain(node, &term.topology_key) else { continue };
            for (other, other_node) in bound {
                if std::ptr::eq(*pod, *other) || domain(other_node, &term.topology_key).as_ref() != Some(&d) {
                    continue;
                }
                if term_selects(&term, pod, other) {
                    errors.push(format!(
                        "{}: anti-affinity broken by {} in {}={d}",
                        key(pod),
                        key(other),
                        term.topology_key
                    ));
                }
            }
        }
        let affinity = aff.pod_affinity.and_then(|a| a.required_during_scheduling_ignored_during_execution);
        for term in affinity.unwrap_or_default() {
            let d = domain(node, &term.topology_key);
            let met = d.is_some()
                && bound.iter().any(|(other, other_node)| {
                    domain(other_node, &term.topology_key) == d && term_selects(&term, pod, other)
                });
            if !met {
                errors.push(format!("{}: required affinity {} not met", key(pod), term.topology_key));
            }
        }
    }
}

/// Hard spread constraints: among the domains of nodes the pod's selector and required
/// node affinity accept, matching pods may differ by at most `maxSkew`.
fn spread(nodes: &[Node], bound: &[(&Pod, &Node)], errors: &mut Vec<String>) {
    let mut checked = BTreeSet::new();
    for (pod, _) in bound {
        let s = spec(pod);
        for c in s.topology_spread_constraints.clone().unwrap_or_default() {
            if c.when_unsatisfiable != "DoNotSchedule" {
                continue;
            }
            let Some(sel) = c.label_selector.clone() else { continue };
            let id = format!("{}|{:?}|{}", pod.metadata.namespace.as_deref().unwrap_or(""), sel, c.topology_key);
            if !checked.insert(id) {
                continue;
            }
            let eligible = |n: &Node| {
                let labels = labels_of(&n.metadata);
                let name = n.metadata.name.clone().unwrap_or_default();
                let selector_ok =
                    s.node_selector.clone().unwrap_or_default().iter().all(|(k, v)| labels.get(k) == Some(v));
                let affinity_ok = s
                    .affinity
                    .as_ref()
                    .and_then(|a| a.node_affinity.as_ref())
                    .and_then(|na| na.required_during_scheduling_ignored_during_execution.as_ref())
                    .is_none_or(|r| r.node_selector_terms.iter().any(|t| term_matches(t, &name, &labels)));
                selector_ok && affinity_ok && labels.contains_key(&c.topology_key)
            };
            let mut counts: BTreeMap<String, i32> = BTreeMap::new();
            for n in nodes.iter().filter(|n| eligible(n)) {
                if let Some(d) = labels_of(&n.metadata).get(&c.topology_key) {
                    counts.entry(d.clone()).or_default();
                }
            }
            for (other, node) in bound {
                let ns_match = other.metadata.namespace == pod.metadata.namespace;
                if ns_match
                    && selector_matches(&sel, &labels_of(&other.metadata))
                    && let Some(d) = labels_of(&node.metadata).get(&c.topology_key)
                    && let Some(n) = counts.get_mut(d)
                {
                    *n += 1;
                }
            }
            let (min, max) = (counts.values().min().copied(), counts.values().max().copied());
            if let (Some(min), Some(max)) = (min, max)
                && max - min > c.max_skew
            {
                errors.push(format!(
                    "{}: spread over {} has skew {} > {} ({counts:?})",
                    key(pod),
                    c.topology_key,
                    max - min,
                    c.max_skew
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use algorithms::builders::{NodeBuilder, PodBuilder, affinity_term, node_term};

    const ZONE: &str = "topology.kubernetes.io/zone";

    fn on(pod: PodBuilder, node: &str) -> Pod {
        pod.node_name(node).build()
    }

    #[test]
    fn valid_placements_have_no_errors() {
        let nodes = [NodeBuilder::new("a").capacity("2", "4Gi", "110").label(ZONE, "z1").build()];
        let pods = [on(PodBuilder::new("p").req("1", "1Gi"), "a"), on(PodBuilder::new("q").req("1", "1Gi"), "a")];
        assert_eq!(placement_errors(&nodes, &pods), Vec::<String>::new());
    }

    #[test]
    fn each_broken_rule_is_reported() {
        let nodes = [
            NodeBuilder::new("a").capacity("2", "4Gi", "110").label(ZONE, "z1").taint("k", "v", "NoSchedule").build(),
            NodeBuilder::new("b").capacity("1", "4Gi", "110").label(ZONE, "z2").build(),
            NodeBuilder::new("c").capacity("1", "4Gi", "110").label(ZONE, "z3").build(),
        ];
        let cases: Vec<(Vec<Pod>, &str)> = vec![
            (vec![on(PodBuilder::new("p"), "a")], "taint k:NoSchedule"),
            (vec![on(PodBuilder::new("p"), "missing")], "does not exist"),
            (vec![on(PodBuilder::new("p").req("1500m", "1Gi"), "b")], "cpu over-committed"),
            (vec![on(PodBuilder::new("p").node_selector("disk", "ssd"), "b")], "node selector disk=ssd"),
            (
                vec![on(PodBuilder::new("p").required_node_affinity(vec![node_term(ZONE, "In", &["z1"])]), "b")],
                "node affinity",
            ),
            (
                vec![
                    on(PodBuilder::new("p").host_port("", "TCP", 80), "b"),
                    on(PodBuilder::new("q").host_port("", "TCP", 80), "b"),
                ],
                "host port TCP/80",
            ),
            (
                vec![
                    on(
                        PodBuilder::new("p").label("app", "x").pod_anti_affinity(affinity_term(&[("app", "x")], ZONE)),
                        "b",
                    ),
                    on(PodBuilder::new("q").label("app", "x"), "b"),
                ],
                "anti-affinity broken",
            ),
            (
                vec![
                    on(PodBuilder::new("p").label("app", "s").spread(1, ZONE, "DoNotSchedule", &[("app", "s")]), "b"),
                    on(PodBuilder::new("q").label("app", "s"), "b"),
                ],
                "skew 2 > 1",
            ),
        ];
        for (pods, want) in cases {
            let errors = placement_errors(&nodes, &pods);
            assert!(errors.iter().any(|e| e.contains(want)), "want {want:?} in {errors:?}");
        }
    }

    #[test]
    fn tolerated_taints_and_init_containers_are_judged_as_the_api_defines_them() {
        let nodes = [NodeBuilder::new("a").capacity("2", "4Gi", "110").taint("k", "v", "NoSchedule").build()];
        let tolerating = on(PodBuilder::new("p").toleration("k", "Equal", "v", "NoSchedule"), "a");
        assert!(placement_errors(&nodes, &[tolerating]).is_empty());
        // An init container runs before the containers: 1.5 + 0.2 never run together.
        let init = on(
            PodBuilder::new("p")
                .req("200m", "1Gi")
                .init_container("1500m", "1Gi", false)
                .toleration("", "Exists", "", ""),
            "a",
        );
        assert!(placement_errors(&nodes, &[init]).is_empty());
        // A sidecar keeps running beside the containers.
        let sidecar = on(
            PodBuilder::new("p").req("1", "1Gi").init_container("1500m", "1Gi", true).toleration("", "Exists", "", ""),
            "a",
        );
        assert!(placement_errors(&nodes, &[sidecar]).iter().any(|e| e.contains("cpu over-committed")));
    }
}

//! The allocation results the allocator writes: devices (with shares), the
//! configuration copied from classes and claims, and where the allocation can be used.

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::resource::v1 as api;

use super::objects::{Amount, Claim, NodeScope};
use super::pools::Reachable;
use super::state::DraState;

/// One device chosen for one request.
#[derive(Debug, Clone)]
pub(super) struct Pick {
    /// The request's index in its claim.
    pub(super) r: usize,
    /// The alternative's index in its request.
    pub(super) a: usize,
    /// The device's index in the node's devices.
    pub(super) k: usize,
    /// Its counters were charged (a shared device's only with its first share).
    pub(super) counted: bool,
    /// A share of a device allowing multiple allocations: what it consumes of each
    /// capacity.
    pub(super) share: Option<Vec<Amount>>,
}

/// The allocation result of one claim from its picks.
pub(super) fn result(
    state: &DraState,
    claim: &Claim,
    picks: &[Pick],
    devices: &[Reachable],
    chosen: &[usize],
    node: &str,
) -> Result<api::AllocationResult, String> {
    let results = picks
        .iter()
        .map(|p| {
            let alt = &claim.requests[p.r].alternatives[p.a];
            let d = &devices[p.k].device;
            api::DeviceRequestAllocationResult {
                request: alt.name.clone(),
                driver: d.id.driver.to_string(),
                pool: d.id.pool.to_string(),
                device: d.name.clone(),
                admin_access: alt.admin_access.then_some(true),
                tolerations: (!alt.tolerations.is_empty())
                    .then(|| alt.tolerations.iter().map(|t| t.0.clone()).collect()),
                binding_conditions: (!d.binding_conditions.is_empty()).then(|| d.binding_conditions.clone()),
                binding_failure_conditions: (!d.binding_conditions.is_empty())
                    .then(|| d.binding_failure_conditions.clone()),
                share_id: p.share.is_some().then(share_id),
                consumed_capacity: p.share.as_ref().filter(|a| !a.is_empty()).map(|amounts| {
                    d.capacities
                        .iter()
                        .zip(amounts)
                        .map(|(c, a)| {
                            (c.name.clone(), k8s_openapi::apimachinery::pkg::api::resource::Quantity(a.text.clone()))
                        })
                        .collect()
                }),
            }
        })
        .collect();
    let reached: Vec<&Reachable> = picks.iter().map(|p| &devices[p.k]).collect();
    let node_selector =
        node_selector(&reached, node).map_err(|e| format!("create NodeSelector for claim {}: {e}", claim.name))?;
    Ok(api::AllocationResult {
        devices: Some(api::DeviceAllocationResult { results: Some(results), config: config(state, claim, chosen) }),
        node_selector,
        allocation_timestamp: None,
    })
}

/// A share's identifier: a random (version 4) UUID.
fn share_id() -> String {
    let bits: u128 = rand::random();
    let bits = (bits & !(0xf << 76) | (0x4 << 76)) & !(0x3 << 62) | (0x2 << 62);
    let hex = format!("{bits:032x}");
    format!("{}-{}-{}-{}-{}", &hex[0..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..32])
}

/// The request names a claim's allocation answers: `request`, or `request/subrequest`
/// for the alternative chosen.
fn answered(claim: &Claim, chosen: &[usize]) -> Vec<(String, String)> {
    claim
        .requests
        .iter()
        .zip(chosen)
        .map(|(r, a)| (r.name.clone(), r.alternatives.get(*a).map(|x| x.name.clone()).unwrap_or_default()))
        .collect()
}

/// The configuration of an allocation, as kube-scheduler writes it: the classes' (each
/// class's once, naming every request that used the class), then the claim's: one with no
/// requests once, and one naming requests once for each request of the claim it names
/// (by the request's name or the chosen sub-request's), its list as written.
fn config(state: &DraState, claim: &Claim, chosen: &[usize]) -> Option<Vec<api::DeviceAllocationConfiguration>> {
    let names = answered(claim, chosen);
    let mut out: Vec<api::DeviceAllocationConfiguration> = Vec::new();
    let mut class_at: Vec<(String, Vec<usize>)> = Vec::new();
    for (r, a) in claim.requests.iter().zip(chosen) {
        let Some(alt) = r.alternatives.get(*a) else { continue };
        if let Some((_, at)) = class_at.iter().find(|(c, _)| *c == alt.class) {
            for i in at {
                out[*i].requests.get_or_insert_with(Vec::new).push(alt.name.clone());
            }
            continue;
        }
        let Some(class) = state.class(&alt.class) else { continue };
        let mut at = Vec::new();
        for cfg in &class.config {
            at.push(out.len());
            out.push(api::DeviceAllocationConfiguration {
                opaque: cfg.opaque.clone(),
                requests: Some(vec![alt.name.clone()]),
                source: "FromClass".into(),
            });
        }
        class_at.push((alt.class.clone(), at));
    }
    for cfg in claim.api.spec.devices.iter().flat_map(|d| d.config.iter().flatten()) {
        let requests = cfg.requests.clone().unwrap_or_default();
        let copy = || api::DeviceAllocationConfiguration {
            opaque: cfg.opaque.clone(),
            requests: (!requests.is_empty()).then(|| requests.clone()),
            source: "FromClaim".into(),
        };
        if requests.is_empty() {
            out.push(copy());
            continue;
        }
        for (r, alt) in &names {
            if requests.contains(r) || (alt != r && requests.contains(alt)) {
                out.push(copy());
            }
        }
    }
    (!out.is_empty()).then_some(out)
}

/// Where the allocation can be used: the node itself when a device is local to it or
/// binds to the node it is allocated for,
/// otherwise the slices' (or devices') single-term selectors merged; `None` everywhere.
fn node_selector(picks: &[&Reachable], node: &str) -> Result<Option<core::NodeSelector>, String> {
    let mut term = core::NodeSelectorTerm::default();
    for p in picks {
        if p.device.binds_to_node {
            return Ok(Some(local(node)));
        }
        let scope = p.device.scope.as_ref().unwrap_or(&p.slice.scope);
        match scope {
            NodeScope::Node(_) => return Ok(Some(local(node))),
            NodeScope::Selector(_, sel) => match sel.node_selector_terms.as_slice() {
                [] => {}
                [one] => {
                    merge(&mut term.match_expressions, one.match_expressions.as_deref());
                    merge(&mut term.match_fields, one.match_fields.as_deref());
                }
                many => return Err(format!("unsupported ResourceSlice.NodeSelector with {} terms", many.len())),
            },
            NodeScope::All | NodeScope::PerDevice => {}
        }
    }
    if term.match_expressions.as_ref().is_none_or(|e| e.is_empty())
        && term.match_fields.as_ref().is_none_or(|f| f.is_empty())
    {
        return Ok(None);
    }
    Ok(Some(core::NodeSelector { node_selector_terms: vec![term] }))
}

fn merge(into: &mut Option<Vec<core::NodeSelectorRequirement>>, from: Option<&[core::NodeSelectorRequirement]>) {
    for req in from.unwrap_or_default() {
        let list = into.get_or_insert_with(Vec::new);
        let same = |a: &core::NodeSelectorRequirement| {
            let mut x = a.values.clone().unwrap_or_default();
            let mut y = req.values.clone().unwrap_or_default();
            x.sort();
            x.dedup();
            y.sort();
            y.dedup();
            a.key == req.key && a.operator == req.operator && x == y
        };
        if !list.iter().any(same) {
            list.push(req.clone());
        }
    }
}

/// The node selector naming one node by its name.
pub fn local(node: &str) -> core::NodeSelector {
    core::NodeSelector {
        node_selector_terms: vec![core::NodeSelectorTerm {
            match_expressions: None,
            match_fields: Some(vec![core::NodeSelectorRequirement {
                key: "metadata.name".into(),
                operator: "In".into(),
                values: Some(vec![node.into()]),
            }]),
        }],
    }
}

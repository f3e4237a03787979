//! Why a node cannot give a pod's claims their devices, request by request, for
//! `explain` (kube-scheduler only says `cannot allocate all claims`): how many of the
//! node's devices each request's class and selectors select, how many of those carry a
//! taint the request does not tolerate, how many other claims hold, and how many are
//! free against how many it wants.

use std::fmt::Write as _;
use std::sync::Arc;

use super::allocator::Plan;
use super::objects::{Claim, Mode};
use super::pools::node_devices;
use super::selectors::matches;
use super::state::DraState;
use crate::labels::Labels;

/// What one request alternative finds among the node's devices.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Tally {
    selected: usize,
    tainted: usize,
    held: usize,
    free: usize,
}

/// One line per request of each claim (per alternative of a `firstAvailable` one), then
/// what remains when every request alone has devices enough.
pub fn diagnose(state: &DraState, node: &str, labels: &Labels, claims: &[Arc<Claim>], plan: &Plan) -> String {
    let (taints, partitionable) = plan.gates();
    let reach = node_devices(state, node, labels, partitionable);
    if reach.devices.is_empty() {
        return "the node reaches no devices".into();
    }
    let mut out = String::new();
    let mut each_enough = true;
    for (c, claim) in claims.iter().enumerate() {
        let who = if claim.name == super::extended::IN_MEMORY_NAME {
            "the pod's extended resources".to_string()
        } else {
            format!("claim {}", claim.key())
        };
        for (r, request) in claim.requests.iter().enumerate() {
            let mut any_enough = false;
            for (a, alt) in request.alternatives.iter().enumerate() {
                let Some(prepared) = plan.prepared(c, r, a) else { continue };
                let mut t = Tally::default();
                for d in &reach.devices {
                    let pool = &reach.pools[d.pool];
                    if pool.incomplete || pool.invalid.is_some() || !matches(prepared, d).unwrap_or(false) {
                        continue;
                    }
                    t.selected += 1;
                    if taints && !d.device.taints.is_empty() && !alt.tolerates_all(&d.device) {
                        t.tainted += 1;
                    } else if !alt.admin_access
                        && !d.device.multi
                        && (state.holders(&d.device.id) > 0 || state.shares(&d.device.id).is_some())
                    {
                        t.held += 1;
                    } else {
                        t.free += 1;
                    }
                }
                let (wanted, enough) = match alt.mode {
                    Mode::Count(n) => (n.to_string(), t.free >= n as usize),
                    Mode::All => ("all".to_string(), t.selected > 0 && t.free == t.selected),
                };
                any_enough |= enough;
                if !out.is_empty() {
                    out.push_str("; ");
                }
                let _ = write!(
                    out,
                    "{who} request {}: {} wanted, {} of the node's devices selected (class {}), {} with a taint \
                     not tolerated, {} held by other claims, {} free",
                    alt.name, wanted, t.selected, alt.class, t.tainted, t.held, t.free
                );
            }
            each_enough &= any_enough;
        }
    }
    if each_enough {
        out.push_str("; every request has devices enough alone, but not all together (matchAttribute constraints, shared counters or capacity, or devices wanted twice)");
    }
    out
}

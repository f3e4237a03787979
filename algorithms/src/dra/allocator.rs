//! The structured allocator: devices for every unallocated claim of a pod on one node.
//!
//! A depth-first search over the claims in order, their requests in order, each
//! request's alternatives (`firstAvailable` sub-requests) in order of preference and the
//! node's devices (pools by driver and name, slices by name, devices as published),
//! trying each set of devices once and backing up across requests and claims when a
//! later one cannot be met. The first complete solution wins, as in kube-scheduler.
//!
//! One file though long: every step of the search (picking, counting a device's counters
//! and capacity, checking constraints, backing up) reads and undoes the same `Search`
//! state, and split apart each would take that state whole.

use std::sync::Arc;

use k8s_openapi::api::resource::v1 as api;

use super::objects::{Amount, Attribute, Claim, Mode};
use super::pools::{NodeDevices, Pool, Reachable, node_devices};
use super::results::{self, Pick};
use super::selectors::{Prepared, matches, prepare};
use super::state::DraState;
use crate::labels::Labels;

/// The most devices one claim's allocation may hold.
pub const MAX_RESULTS: usize = 32;

/// Reports "nothing on this node" that is not a plain lack of devices (kube-scheduler
/// returns it as the node's reason, not as an error).
pub const INVALID_POOLS: &str = "invalid resource pools were encountered";

/// The features of the allocator that feature gates switch.
#[derive(Debug, Clone, Copy)]
pub struct Features {
    /// `DRAAdminAccess`.
    pub admin_access: bool,
    /// `DRAPrioritizedList`.
    pub prioritized_list: bool,
    /// `DRADeviceTaints`: a tainted device goes only to requests tolerating its taints
    /// (without the gate taints are not looked at).
    pub device_taints: bool,
    /// `DRADeviceBindingConditions` with `DRAResourceClaimDeviceStatus`: devices that
    /// declare binding conditions are allocated (else they are left alone).
    pub binding_conditions: bool,
    /// `DRAPartitionableDevices`: devices consuming shared counters are allocated while
    /// the counters last, and slices may select nodes per device (else both are left
    /// alone).
    pub partitionable: bool,
    /// `DRAConsumableCapacity`: devices allowing multiple allocations are shared while
    /// their capacity lasts, and requests may ask for capacity (else such devices are
    /// allocated whole, once, and capacity requests are an error).
    pub consumable_capacity: bool,
    /// `DRAExtendedResource`: extended-resource requests a node does not advertise are
    /// met by devices of the DeviceClass serving that resource.
    pub extended_resource: bool,
}

impl Default for Features {
    fn default() -> Self {
        Features {
            admin_access: true,
            prioritized_list: true,
            device_taints: true,
            binding_conditions: true,
            partitionable: true,
            consumable_capacity: true,
            extended_resource: true,
        }
    }
}

/// What the allocator found.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// One allocation per claim, in the claims' order.
    Allocated(Vec<api::AllocationResult>),
    /// The claims cannot all be met on this node; the reason when it is not simply a
    /// lack of devices ([`INVALID_POOLS`]).
    Unschedulable(Option<String>),
    /// The search ran out of its time ([`Plan::with_timeout`]).
    TimedOut,
}

/// A `matchAttribute` constraint while the search runs.
#[derive(Debug, Clone, Default)]
struct Match {
    value: Option<Attribute>,
    count: usize,
    /// `distinctAttribute`: the value each request (by its name before any `/`) took last.
    seen: Vec<(String, Attribute)>,
}

/// The claims' checks done and their selectors compiled, once per pod: a plan to run
/// on each node.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Compiled selectors by claim, request and alternative.
    prepared: Vec<Vec<Vec<Prepared>>>,
    /// How long one node's search may take (`DynamicResourcesArgs.filterTimeout`).
    timeout: Option<std::time::Duration>,
    /// Whether device taints are checked.
    device_taints: bool,
    /// Whether devices with binding conditions may be allocated.
    binding_conditions: bool,
    /// Whether partitionable devices are allocated.
    partitionable: bool,
    /// Whether capacity is consumed and devices shared.
    consumable: bool,
    /// The number of the claims' shape (see [`super::memo`]): what a search on given
    /// devices held by given claims depends on.
    shape: u64,
    /// What limits (a quota's) leave the claims, when any do.
    budget: Option<Budget>,
}

/// How many devices limits leave the claims: one slot per limited resource that their
/// devices count as (see [`super::charge`]).
#[derive(Debug, Clone, Default)]
struct Budget {
    /// How many more devices each slot allows.
    left: Vec<i64>,
    /// The slots one device counts against, by claim, request and alternative.
    slots: Vec<Vec<Vec<Vec<usize>>>>,
    /// What sets the limits.
    by: String,
}

impl Plan {
    /// The compiled selectors of claim `c`'s request `r`, alternative `a`.
    pub(crate) fn prepared(&self, c: usize, r: usize, a: usize) -> Option<&Prepared> {
        self.prepared.get(c)?.get(r)?.get(a)
    }

    /// Whether device taints are checked, and partitionable devices allocated.
    pub(crate) fn gates(&self) -> (bool, bool) {
        (self.device_taints, self.partitionable)
    }

    /// The plan with a time limit for each node's search (none when zero).
    pub fn with_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.timeout = (!timeout.is_zero()).then_some(timeout);
        self
    }

    /// What limits the devices the claims may be given, if anything does.
    pub fn limited_by(&self) -> Option<&str> {
        self.budget.as_ref().map(|b| b.by.as_str())
    }

    /// The same plan without limits.
    pub fn unlimited(&self) -> Plan {
        Plan { budget: None, ..self.clone() }
    }

    /// Keeps the devices `claims` (those the plan was made for) are given within
    /// `limits`: an alternative whose devices would take more than a limit leaves is
    /// passed over for the next, and devices taken with admin access count for nothing.
    pub fn limit(&mut self, state: &DraState, claims: &[Arc<Claim>], limits: &crate::framework::Limits) {
        let mut keys: Vec<(String, Option<usize>)> = Vec::new();
        let mut left = Vec::new();
        let mut slot = |key: String| -> Option<usize> {
            if let Some((_, at)) = keys.iter().find(|(k, _)| *k == key) {
                return *at;
            }
            let at = limits.of(&key).map(|n| {
                left.push(n);
                left.len() - 1
            });
            keys.push((key, at));
            at
        };
        let slots: Vec<Vec<Vec<Vec<usize>>>> = claims
            .iter()
            .map(|c| {
                c.requests
                    .iter()
                    .map(|r| {
                        r.alternatives
                            .iter()
                            .map(|a| {
                                if a.admin_access {
                                    return Vec::new();
                                }
                                let keys = super::charge::alternative_keys(state, c, a);
                                keys.into_iter().filter_map(&mut slot).collect()
                            })
                            .collect()
                    })
                    .collect()
            })
            .collect();
        self.budget = (!left.is_empty()).then(|| Budget { left, slots, by: limits.by().to_string() });
    }
}

/// Checks `claims` as kube-scheduler does before searching and compiles their selectors.
pub fn plan(state: &DraState, claims: &[Arc<Claim>], features: Features) -> Result<Plan, String> {
    validate(state, claims, features)?;
    let prepared = claims
        .iter()
        .map(|c| c.requests.iter().map(|r| r.alternatives.iter().map(|a| prepare(state, c, a)).collect()).collect())
        .collect();
    let mut plan = Plan {
        prepared,
        timeout: None,
        device_taints: features.device_taints,
        binding_conditions: features.binding_conditions,
        partitionable: features.partitionable,
        consumable: features.consumable_capacity,
        shape: 0,
        budget: None,
    };
    plan.shape = shape(claims, &plan);
    Ok(plan)
}

/// The shape of `claims` under `plan`: their requests and constraints (not their names),
/// the sets of selectors compiled for them and the gates the search looks at.
fn shape(claims: &[Arc<Claim>], plan: &Plan) -> u64 {
    use std::fmt::Write;
    let mut text =
        format!("{} {} {} {}", plan.device_taints, plan.binding_conditions, plan.partitionable, plan.consumable);
    for (claim, prepared) in claims.iter().zip(&plan.prepared) {
        let ids: Vec<Vec<u64>> = prepared.iter().map(|r| r.iter().map(Prepared::id).collect()).collect();
        let _ = write!(text, "\u{0}{:?}\u{0}{:?}\u{0}{ids:?}", claim.requests, claim.constraints);
    }
    super::memo::shape_id(text)
}

/// Allocates `claims` (none of them allocated) on `node`.
pub fn allocate(
    state: &DraState,
    node: &str,
    labels: &Labels,
    claims: &[Arc<Claim>],
    features: Features,
) -> Result<Outcome, String> {
    let plan = plan(state, claims, features)?;
    allocate_planned(state, node, labels, claims, &plan)
}

/// Allocates `claims` on `node` following a [`plan`] made for them.
pub fn allocate_planned(
    state: &DraState,
    node: &str,
    labels: &Labels,
    claims: &[Arc<Claim>],
    plan: &Plan,
) -> Result<Outcome, String> {
    search(state, node, labels, claims, plan, true)
}

/// Whether `claims` can be allocated on `node` ([`Outcome::Allocated`] then holds no
/// results): Filter's question, answered without building the allocations.
pub fn fits_planned(
    state: &DraState,
    node: &str,
    labels: &Labels,
    claims: &[Arc<Claim>],
    plan: &Plan,
) -> Result<Outcome, String> {
    search(state, node, labels, claims, plan, false)
}

/// The devices `node` reaches under a plan, shared by every node that reaches the same
/// ones (see [`fits_reached`]).
pub fn reach(state: &DraState, node: &str, labels: &Labels, plan: &Plan) -> Arc<NodeDevices> {
    node_devices(state, node, labels, plan.partitionable)
}

/// [`fits_planned`] on the devices [`reach`] gave for a node: the answer is the same for
/// every node that reaches the same devices.
pub fn fits_reached(
    state: &DraState,
    reach: &NodeDevices,
    claims: &[Arc<Claim>],
    plan: &Plan,
) -> Result<Outcome, String> {
    run_search(state, "", reach, claims, plan, false)
}

fn search(
    state: &DraState,
    node: &str,
    labels: &Labels,
    claims: &[Arc<Claim>],
    plan: &Plan,
    build: bool,
) -> Result<Outcome, String> {
    let reach = node_devices(state, node, labels, plan.partitionable);
    run_search(state, node, &reach, claims, plan, build)
}

/// The search over the devices a node reaches (`node` names it in the results built).
/// Filter's answers (nothing built) are remembered on the devices (see [`super::memo`]).
fn run_search(
    state: &DraState,
    node: &str,
    reach: &NodeDevices,
    claims: &[Arc<Claim>],
    plan: &Plan,
    build: bool,
) -> Result<Outcome, String> {
    if claims.is_empty() {
        return Ok(Outcome::Allocated(Vec::new()));
    }
    let search = || -> Result<Outcome, String> {
        let mut search = Search {
            state,
            claims,
            pools: &reach.pools,
            devices: &reach.devices,
            plan,
            deadline: plan.timeout.map(|t| std::time::Instant::now() + t),
            steps: 0,
            timed_out: false,
            over_limit: false,
            taking: Vec::new(),
            counters: Vec::new(),
            sharing: Default::default(),
            picks: vec![Vec::new(); claims.len()],
            constraints: claims.iter().map(|c| vec![Match::default(); c.constraints.len()]).collect(),
            chosen: claims.iter().map(|c| vec![0; c.requests.len()]).collect(),
            spent: vec![0; plan.budget.as_ref().map_or(0, |b| b.left.len())],
        };
        search.prepare_all()?;
        if too_few_free(state, &reach.pools, claims) {
            // The search cannot succeed; the selectors of the free devices are still
            // evaluated, as kube-scheduler's search would, so that their errors are the same.
            search.evaluate_free()?;
            let invalid = reach.pools.iter().any(|p| p.invalid.is_some());
            return Ok(Outcome::Unschedulable(invalid.then(|| INVALID_POOLS.into())));
        }
        let found = search.claim(0)?;
        if search.timed_out {
            return Ok(Outcome::TimedOut);
        }
        if !found {
            if reach.pools.iter().any(|p| p.invalid.is_some()) {
                return Ok(Outcome::Unschedulable(Some(INVALID_POOLS.into())));
            }
            return Ok(Outcome::Unschedulable(None));
        }
        if !build {
            return Ok(Outcome::Allocated(Vec::new()));
        }
        let mut out = Vec::with_capacity(claims.len());
        for (i, claim) in claims.iter().enumerate() {
            out.push(results::result(state, claim, &search.picks[i], search.devices, &search.chosen[i], node)?);
        }
        Ok(Outcome::Allocated(out))
    };
    // Answers within limits are not remembered: the limits are not part of the shape.
    if build || plan.budget.is_some() {
        return search();
    }
    let stamps = || reach.pools.iter().map(|p| state.pool_stamp(p.key));
    if let Some(answer) = reach.memo.get(plan.shape, stamps()) {
        return Ok(match answer {
            Ok(()) => Outcome::Allocated(Vec::new()),
            Err(reason) => Outcome::Unschedulable(reason),
        });
    }
    let outcome = search()?;
    match &outcome {
        Outcome::Allocated(_) => reach.memo.put(plan.shape, stamps().collect(), Ok(())),
        Outcome::Unschedulable(reason) => reach.memo.put(plan.shape, stamps().collect(), Err(reason.clone())),
        Outcome::TimedOut => {}
    }
    Ok(outcome)
}

/// Whether the node certainly has fewer free devices than the claims need at least: a
/// shortcut taken only when every request consumes a counted number of devices (no
/// admin access, no `All`, which report pools being updated) and every pool the node
/// reaches is its own (so that the pool's held devices are the node's).
fn too_few_free(state: &DraState, pools: &[Pool], claims: &[Arc<Claim>]) -> bool {
    let mut need = 0usize;
    for r in claims.iter().flat_map(|c| c.requests.iter()) {
        if r.alternatives.iter().any(|a| a.admin_access || a.mode == Mode::All) {
            return false;
        }
        need += r
            .alternatives
            .iter()
            .map(|a| match a.mode {
                Mode::Count(n) => n as usize,
                Mode::All => 1,
            })
            .min()
            .unwrap_or(0);
    }
    if pools.iter().any(|p| (!p.exclusive && p.invalid.is_none() && !p.incomplete) || p.shareable) {
        return false;
    }
    let free: usize = pools.iter().map(|p| p.size.saturating_sub(state.held_in_pool(p.key) as usize)).sum();
    if free >= need {
        return false;
    }
    // A pool's held devices may include ones its slices no longer publish (a claim still
    // holding a device that went away): count the free ones themselves before concluding.
    let free = pools
        .iter()
        .flat_map(|p| p.slices.iter())
        .flat_map(|s| s.devices.iter())
        .filter(|d| state.holders(&d.id) == 0)
        .count();
    free < need
}

/// The checks kube-scheduler makes before searching.
fn validate(state: &DraState, claims: &[Arc<Claim>], features: Features) -> Result<(), String> {
    for claim in claims {
        let key = claim.key();
        let mut minimum = 0usize;
        for r in &claim.requests {
            if r.prioritized && !features.prioritized_list {
                return Err(format!(
                    "claim {key}, request {}: has subrequests, but the DRAPrioritizedList feature is disabled",
                    r.name
                ));
            }
            let mut least = usize::MAX;
            for alt in &r.alternatives {
                let name = alt.name.rsplit('/').next().unwrap_or(&alt.name);
                if !alt.capacity.is_empty() && !features.consumable_capacity {
                    let kind = if r.prioritized { "subrequest" } else { "request" };
                    return Err(format!(
                        "claim {key}, {kind} {name}: has capacity requests, but the DRAConsumableCapacity feature is disabled"
                    ));
                }
                if alt.admin_access && !features.admin_access {
                    return Err(format!(
                        "claim {key}, request {name}: admin access is requested, but the feature is disabled"
                    ));
                }
                if alt.class.is_empty() {
                    return Err(format!(
                        "claim {key}, request {name}: missing device class name (unsupported request type?)"
                    ));
                }
                if state.class(&alt.class).is_none() {
                    return Err(format!(
                        "claim {key}, request {name}: could not retrieve device class {}: deviceclass.resource.k8s.io \"{}\" not found",
                        alt.class, alt.class
                    ));
                }
                least = least.min(match alt.mode {
                    Mode::Count(n) => n as usize,
                    Mode::All => 1,
                });
            }
            minimum = minimum.saturating_add(least);
        }
        if minimum > MAX_RESULTS {
            return Err(format!(
                "claim {key}: number of requested devices {minimum} exceeds the claim limit of {MAX_RESULTS}"
            ));
        }
    }
    Ok(())
}

struct Search<'a> {
    deadline: Option<std::time::Instant>,
    steps: u32,
    timed_out: bool,
    state: &'a DraState,
    claims: &'a [Arc<Claim>],
    pools: &'a [Pool],
    devices: &'a [Reachable],
    plan: &'a Plan,
    /// Devices taken in this search (by number), with the claim (index) taking each.
    taking: Vec<(u32, usize)>,
    /// What each pool's counters still allow, computed when a device of the pool is
    /// first tried (by pool index).
    counters: Vec<Option<Left>>,
    /// Capacity this search's shares consume, by device number (in the device's
    /// capacity order).
    sharing: rustc_hash::FxHashMap<u32, Vec<i128>>,
    picks: Vec<Vec<Pick>>,
    constraints: Vec<Vec<Match>>,
    /// The alternative chosen for each request.
    chosen: Vec<Vec<usize>>,
    /// Devices taken against each slot of the plan's budget.
    spent: Vec<i64>,
    /// The last failure was the claim's limit of [`MAX_RESULTS`] devices: the number of
    /// devices taken before it, not which ones, is at fault, so no other device for the
    /// same alternative can help (kube-scheduler backs up to another sub-request then).
    over_limit: bool,
}

impl Search<'_> {
    /// What kube-scheduler does for `allocationMode: All` requests before it searches:
    /// in the claims' order, each such request's pools must be complete and valid, and
    /// its selectors are evaluated on every device, so that their errors come first.
    fn prepare_all(&mut self) -> Result<(), String> {
        let claims = self.claims;
        for (c, claim) in claims.iter().enumerate() {
            for (r, request) in claim.requests.iter().enumerate() {
                let [alt] = request.alternatives.as_slice() else { continue };
                if request.prioritized || alt.mode != Mode::All {
                    continue;
                }
                self.pools_complete(c, r, 0)?;
                for k in 0..self.devices.len() {
                    self.selectable(c, r, 0, k)?;
                }
            }
        }
        Ok(())
    }

    /// Evaluates every request's selectors on the devices free for it, in the claims',
    /// requests' and devices' order: the errors a search would meet.
    fn evaluate_free(&mut self) -> Result<(), String> {
        let claims = self.claims;
        for (c, claim) in claims.iter().enumerate() {
            for (r, request) in claim.requests.iter().enumerate() {
                for a in 0..request.alternatives.len() {
                    for k in 0..self.devices.len() {
                        self.usable(c, r, a, k)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// An error when a pool the node reaches is being updated or invalid: an `All`
    /// request cannot know every device then.
    fn pools_complete(&self, c: usize, r: usize, a: usize) -> Result<(), String> {
        let claim = &self.claims[c];
        let alt = &claim.requests[r].alternatives[a];
        let name = alt.name.rsplit('/').next().unwrap_or(&alt.name);
        for pool in self.pools {
            if pool.incomplete {
                return Err(format!(
                    "claim {}, request {name}: asks for all devices, but resource pool {} is currently being updated",
                    claim.key(),
                    pool.id
                ));
            }
            if pool.invalid.is_some() {
                return Err(format!(
                    "claim {}, request {name}: asks for all devices, but resource pool {} is currently invalid",
                    claim.key(),
                    pool.id
                ));
            }
        }
        Ok(())
    }

    /// Claims `c..` (all requests of each).
    fn claim(&mut self, c: usize) -> Result<bool, String> {
        if c >= self.claims.len() {
            return Ok(true);
        }
        self.request(c, 0)
    }

    /// Requests `r..` of claim `c`, then the claims after it.
    fn request(&mut self, c: usize, r: usize) -> Result<bool, String> {
        let claims = self.claims;
        let claim = &claims[c];
        let Some(request) = claim.requests.get(r) else {
            // Another claim's limit is not this claim's: other devices here may still help.
            let done = self.claim(c + 1)?;
            self.over_limit = false;
            return Ok(done);
        };
        // Whether every alternative failed on the claim's limit alone.
        let mut all_over = !request.alternatives.is_empty();
        for (a, alt) in request.alternatives.iter().enumerate() {
            self.chosen[c][r] = a;
            self.over_limit = false;
            let done = match alt.mode {
                Mode::Count(n) => {
                    if self.picks[c].len() + n as usize > MAX_RESULTS {
                        continue;
                    }
                    if !self.spend(c, r, a, n as i64) {
                        all_over = false;
                        continue;
                    }
                    let done = self.pick(c, r, a, n as usize, 0)?;
                    if !done {
                        self.spend(c, r, a, -(n as i64));
                    }
                    done
                }
                Mode::All => self.all(c, r, a)?,
            };
            if done {
                return Ok(true);
            }
            all_over &= self.over_limit;
        }
        self.over_limit = all_over;
        Ok(false)
    }

    /// Picks `left` more devices for alternative `a` of request `r` of claim `c`, from
    /// device index `from` on.
    fn pick(&mut self, c: usize, r: usize, a: usize, left: usize, from: usize) -> Result<bool, String> {
        if left == 0 {
            return self.request(c, r + 1);
        }
        for k in from..self.devices.len() {
            if self.out_of_time() {
                return Ok(false);
            }
            // Constraints first: they are the cheapest to rule a device out.
            let name = &self.claims[c].requests[r].alternatives[a].name;
            if !self.constraints_allow(c, name, k) || !self.usable(c, r, a, k)? {
                continue;
            }
            let Some(share) = self.capacity(c, r, a, k, true) else { continue };
            if !self.take(c, r, a, k, false, share)? {
                continue;
            }
            if self.pick(c, r, a, left - 1, k + 1)? {
                return Ok(true);
            }
            self.untake(c);
            if self.over_limit {
                return Ok(false);
            }
        }
        self.over_limit = false;
        Ok(false)
    }

    /// Takes every matching device for an `All` alternative.
    fn all(&mut self, c: usize, r: usize, a: usize) -> Result<bool, String> {
        let claims = self.claims;
        let claim = &claims[c];
        let alt = &claim.requests[r].alternatives[a];
        self.pools_complete(c, r, a)?;
        let mut wanted = Vec::new();
        for k in 0..self.devices.len() {
            // Devices without the capacity asked for (beside what allocated claims hold)
            // are not wanted; what this search already took is looked at below.
            if self.selectable(c, r, a, k)? && self.capacity(c, r, a, k, false).is_some() {
                wanted.push(k);
            }
        }
        self.over_limit = !wanted.is_empty() && self.picks[c].len() + wanted.len() > MAX_RESULTS;
        if wanted.is_empty() || self.over_limit {
            return Ok(false);
        }
        let counted = if alt.admin_access { 0 } else { wanted.len() as i64 };
        if !self.spend(c, r, a, counted) {
            return Ok(false);
        }
        let mut taken = 0;
        let mut ok = true;
        for &k in &wanted {
            let share = if self.free(c, alt.admin_access, k) { self.capacity(c, r, a, k, true) } else { None };
            let Some(share) = share else {
                ok = false;
                break;
            };
            if !self.take(c, r, a, k, true, share)? {
                ok = false;
                break;
            }
            taken += 1;
        }
        if ok && self.request(c, r + 1)? {
            return Ok(true);
        }
        if !ok {
            self.over_limit = false;
        }
        for _ in 0..taken {
            self.untake(c);
        }
        self.spend(c, r, a, -counted);
        Ok(false)
    }

    /// Counts `n` devices for alternative `a` of request `r` of claim `c` against the
    /// budget if every slot they count against allows it (a negative `n` gives them
    /// back); returns whether it did.
    fn spend(&mut self, c: usize, r: usize, a: usize, n: i64) -> bool {
        let Some(budget) = &self.plan.budget else { return true };
        let slots = &budget.slots[c][r][a];
        if n > 0 && slots.iter().any(|&s| self.spent[s] + n > budget.left[s]) {
            return false;
        }
        for &s in slots {
            self.spent[s] += n;
        }
        true
    }

    /// Whether the search passed its deadline (looked at every 64 steps).
    fn out_of_time(&mut self) -> bool {
        self.steps = self.steps.wrapping_add(1);
        if !self.timed_out && self.steps.is_multiple_of(64) {
            self.timed_out = self.deadline.is_some_and(|d| std::time::Instant::now() > d);
        }
        self.timed_out
    }

    /// Whether device `k` is not held (or, with admin access, not taken by this claim).
    fn free(&self, c: usize, admin: bool, k: usize) -> bool {
        let id = &self.devices[k].device.id;
        let key = id.key();
        if self.shared(k) {
            // Shares never take a device whole: only an allocation of the whole device
            // (from before it allowed sharing) keeps it.
            return admin || self.state.holders(id) == 0;
        }
        if admin {
            return !self.taking.contains(&(key, c));
        }
        !self.taking.iter().any(|(d, _)| *d == key) && self.state.holders(id) == 0
    }

    /// Whether device `k` is shared (it allows multiple allocations, with the gate on).
    fn shared(&self, k: usize) -> bool {
        self.plan.consumable && self.devices[k].device.multi
    }

    /// What alternative `a` consumes of device `k`'s capacities if it has them beside
    /// what allocated claims (and, `in_flight`, this search's shares) consume: `None`
    /// when it does not fit, `Some(None)` when nothing is recorded (the gate is off, or
    /// the device is not shared).
    #[allow(clippy::option_option)]
    fn capacity(&self, c: usize, r: usize, a: usize, k: usize, in_flight: bool) -> Option<Option<Vec<Amount>>> {
        if !self.plan.consumable {
            return Some(None);
        }
        let alt = &self.claims[c].requests[r].alternatives[a];
        let device = &self.devices[k].device;
        let shares = self.state.shares(&device.id);
        let flight = in_flight.then(|| self.sharing.get(&device.id.key())).flatten();
        let used = |i: usize, name: &str| {
            shares.and_then(|s| s.consumed.get(name)).copied().unwrap_or(0)
                + flight.and_then(|f| f.get(i)).copied().unwrap_or(0)
        };
        let amounts = super::capacity::fits(alt, device, used)?;
        Some(self.shared(k).then_some(amounts))
    }

    /// Whether device `k` can serve alternative `a` at all (not counting who holds it).
    fn selectable(&mut self, c: usize, r: usize, a: usize, k: usize) -> Result<bool, String> {
        let d = &self.devices[k].device;
        if (!d.binding_conditions.is_empty() && !self.plan.binding_conditions)
            || (!d.consumes.is_empty() && !self.plan.partitionable)
        {
            return Ok(false);
        }
        if self.plan.device_taints
            && !d.taints.is_empty()
            && !self.claims[c].requests[r].alternatives[a].tolerates_all(d)
        {
            return Ok(false);
        }
        matches(&self.plan.prepared[c][r][a], &self.devices[k])
    }

    fn usable(&mut self, c: usize, r: usize, a: usize, k: usize) -> Result<bool, String> {
        let admin = self.claims[c].requests[r].alternatives[a].admin_access;
        Ok(self.free(c, admin, k) && self.selectable(c, r, a, k)?)
    }

    /// Records device `k` for claim `c` if the claim's constraints allow it. With `must`
    /// (an `All` request) a constraint that does not allow it is an error.
    fn take(
        &mut self,
        c: usize,
        r: usize,
        a: usize,
        k: usize,
        must: bool,
        share: Option<Vec<Amount>>,
    ) -> Result<bool, String> {
        let claims = self.claims;
        let claim = &claims[c];
        let request = &claim.requests[r];
        let alt = &request.alternatives[a];
        let device = &self.devices[k];
        // kube-scheduler charges counters before it looks at constraints: a device whose
        // counters do not last is skipped, even where a constraint failing is an error.
        // The constraints are looked at first here (they are cheaper), to the same end.
        let fits = self.constraints_allow(c, &alt.name, k);
        // A shared device's counters are charged with its first share only.
        let key = device.device.id.key();
        let count =
            !self.shared(k) || (self.state.shares(&device.device.id).is_none() && !self.sharing.contains_key(&key));
        if !fits {
            if !must || (count && !self.consume(k)) {
                return Ok(false);
            }
            if count {
                self.release(k);
            }
            let name = alt.name.rsplit('/').next().unwrap_or(&alt.name);
            return Err(format!(
                "claim {}, request {name}: cannot add device {} because a claim constraint would not be satisfied",
                claim.key(),
                device.device.id
            ));
        }
        if count && !self.consume(k) {
            return Ok(false);
        }
        let base = alt.name.split('/').next().unwrap_or(&alt.name);
        for (i, constraint) in claim.constraints.iter().enumerate() {
            if constraint.covers(&alt.name) {
                let m = &mut self.constraints[c][i];
                let value = device.device.attributes.get(&constraint.attribute).cloned();
                if constraint.distinct {
                    m.seen.retain(|(r, _)| r != base);
                    if let Some(v) = value {
                        m.seen.push((base.to_string(), v));
                    }
                } else if m.count == 0 {
                    m.value = value;
                }
                m.count += 1;
            }
        }
        if let Some(amounts) = &share {
            let sharing = self.sharing.entry(key).or_insert_with(|| vec![0; amounts.len()]);
            for (total, amount) in sharing.iter_mut().zip(amounts) {
                *total += amount.nanos;
            }
        } else if !self.shared(k) {
            self.taking.push((key, c));
        }
        self.picks[c].push(Pick { r, a, k, counted: count, share });
        Ok(true)
    }

    /// Whether device `k` keeps claim `c`'s constraints covering the alternative `name`.
    fn constraints_allow(&self, c: usize, name: &str, k: usize) -> bool {
        let device = &self.devices[k].device;
        self.claims[c].constraints.iter().zip(&self.constraints[c]).all(|(constraint, m)| {
            if !constraint.covers(name) {
                return true;
            }
            let value = device.attributes.get(&constraint.attribute);
            if constraint.distinct {
                return value.is_some_and(|v| !m.seen.iter().any(|(_, seen)| seen == v));
            }
            match (value, &m.value) {
                (None, _) => false,
                (Some(_), _) if m.count == 0 => true,
                (Some(v), Some(reference)) => v == reference,
                (Some(_), None) => false,
            }
        })
    }

    /// Gives back the last device claim `c` took.
    fn untake(&mut self, c: usize) {
        let Some(pick) = self.picks[c].pop() else { return };
        let claims = self.claims;
        let claim = &claims[c];
        let name = &claim.requests[pick.r].alternatives[pick.a].name;
        let base = name.split('/').next().unwrap_or(name);
        for (i, constraint) in claim.constraints.iter().enumerate() {
            if constraint.covers(name) {
                let m = &mut self.constraints[c][i];
                m.count = m.count.saturating_sub(1);
                if constraint.distinct {
                    // As kube-scheduler, the request's value goes, whichever device set it.
                    m.seen.retain(|(r, _)| r != base);
                }
            }
        }
        let key = self.devices[pick.k].device.id.key();
        if let Some(amounts) = &pick.share {
            if let Some(sharing) = self.sharing.get_mut(&key) {
                for (total, amount) in sharing.iter_mut().zip(amounts) {
                    *total -= amount.nanos;
                }
                if !self.picks.iter().flatten().any(|p| p.share.is_some() && self.devices[p.k].device.id.key() == key) {
                    self.sharing.remove(&key);
                }
            }
        } else if let Some(at) = self.taking.iter().rposition(|x| *x == (key, c)) {
            self.taking.remove(at);
        }
        if pick.counted {
            self.release(pick.k);
        }
    }

    /// Charges device `k`'s counters to its pool if every counter of the pool stays
    /// within what is left (as kube-scheduler, a counter already overdrawn by allocated
    /// devices blocks every device of its pool).
    fn consume(&mut self, k: usize) -> bool {
        let reach = &self.devices[k];
        if reach.device.consumes.is_empty() {
            return true;
        }
        let Some(counters) = &self.pools[reach.pool].counters else { return false };
        if self.counters.len() < self.pools.len() {
            self.counters.resize_with(self.pools.len(), || None);
        }
        let uses = counters.uses(&reach.device);
        let left = self.counters[reach.pool].get_or_insert_with(|| Left::of(self.state, counters));
        left.charge(uses, -1);
        if left.0.iter().all(|v| *v >= 0) {
            return true;
        }
        left.charge(uses, 1);
        false
    }

    /// Gives back what [`Search::consume`] charged for device `k`.
    fn release(&mut self, k: usize) {
        let reach = &self.devices[k];
        let Some(counters) = &self.pools[reach.pool].counters else { return };
        if let Some(Some(left)) = self.counters.get_mut(reach.pool) {
            left.charge(counters.uses(&reach.device), 1);
        }
    }
}

/// A pool's counters (by index) less what allocated devices and this search's picks
/// consume.
#[derive(Debug, Clone)]
struct Left(Vec<i128>);

impl Left {
    /// The counter sets less what the pool's allocated devices consume.
    fn of(state: &DraState, counters: &super::pools::PoolCounters) -> Self {
        let mut left = Left(counters.values.clone());
        for (device, uses) in &counters.consumers {
            // A device held whole or shared (its counters charged once) counts.
            if state.holders(&device.id) > 0 || state.shares(&device.id).is_some() {
                left.charge(uses, -1);
            }
        }
        left
    }

    /// Adds `sign` times the consumption.
    fn charge(&mut self, uses: &[(usize, i128)], sign: i128) {
        for &(i, amount) in uses {
            self.0[i] += sign * amount;
        }
    }
}

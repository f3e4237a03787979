//! Dynamic Resource Allocation (`resource.k8s.io/v1`): the objects drivers and users
//! publish, the state the scheduler keeps of them, the CEL selectors and the structured
//! allocator that picks devices for a pod's claims on one node.

mod allocator;
mod capacity;
mod cel_env;
pub mod charge;
mod diagnose;
pub mod extended;
pub mod kinds;
mod memo;
mod objects;
mod part;
mod pools;
mod results;
mod selectors;
mod state;
mod template;
mod writes;

pub use allocator::{
    Features, INVALID_POOLS, MAX_RESULTS, Outcome, Plan, allocate, allocate_planned, fits_planned, fits_reached, plan,
    reach,
};
pub use diagnose::diagnose;
pub use objects::{
    Alternative, Amount, Attribute, Capacity, CapacityPolicy, Claim, ClaimWrite, Constraint, Consumer, CounterSet,
    CounterUse, Counters, Device, DeviceClass, DeviceTaint, DeviceToleration, FINALIZER, MAX_CONSUMERS, Mode,
    NodeScope, Request, Slice, qualify,
};
pub use pools::{NodeDevices, Pool, PoolCounters, Reachable, gather, node_devices};
pub use results::local;
pub use selectors::{MAX_EXPRESSION_LENGTH, Prepared, matches, prepare, prepare_class};
pub use state::{DeviceId, DraState, Shares, held_devices};
#[cfg(test)]
mod tests;
pub use part::{DEVICES_PREFIX, DraObjects};
pub use template::{POD_CLAIM_NAME, claim_object, create_from_templates, pod_uid};
pub use writes::DraWrite;

//! The API writes DynamicResources asks for: PreBind's claim allocations and its
//! extended resource claims, Unreserve's releases, PostFilter's deallocations.

use super::ClaimWrite;
use super::extended::Mapping;

/// One of DynamicResources' writes, made by the binding cycle as an
/// `ApiWrite`.
#[derive(Debug, Clone, PartialEq)]
pub enum DraWrite {
    /// Write a ResourceClaim's allocation and `reservedFor` (adding the delete-protection
    /// finalizer first when it is missing), with its resource version as precondition.
    Claim(ClaimWrite),
    /// Create a pod's extended resource claim (with the delete-protection finalizer),
    /// then write its allocation and `reservedFor` over the version the creation made.
    CreateClaim(ClaimWrite),
    /// Delete a ResourceClaim the scheduler created (its finalizer dropped first); one
    /// already gone is no error.
    DeleteClaim {
        /// The claim's namespace.
        namespace: String,
        /// The claim's name.
        name: String,
    },
    /// Set a pod's `status.extendedResourceClaimStatus`: its extended resource claim and
    /// which request serves each container's resource.
    PodExtendedClaim {
        /// The pod's namespace.
        namespace: String,
        /// The pod's name.
        pod: String,
        /// The claim's name.
        claim: String,
        /// The containers' mappings to the claim's requests.
        mappings: Vec<Mapping>,
    },
    /// Take a pod out of a ResourceClaim's `reservedFor` (DynamicResources' Unreserve,
    /// after a binding cycle that wrote the reservation failed), without precondition.
    ReleaseClaim {
        /// The claim's namespace.
        namespace: String,
        /// The claim's name.
        name: String,
        /// The claim's UID (the patch applies only to that claim).
        claim_uid: String,
        /// The pod's UID.
        pod_uid: String,
    },
}

impl ClaimWrite {
    /// What the write does, for its error message.
    pub fn verb(&self) -> &'static str {
        match (self.allocated, self.claim.allocation().is_some()) {
            (true, _) => "add allocation and reservation to",
            (false, true) => "add reservation to",
            (false, false) => "deallocate",
        }
    }
}

//! The API writes VolumeBinding's PreBind asks for.

use std::sync::Arc;

use super::{Volume, VolumeClaim};

/// One of VolumeBinding's writes, made by the binding cycle as an
/// `ApiWrite`.
#[derive(Debug, Clone, PartialEq)]
pub enum VolumeWrite {
    /// Set a PersistentVolume's `claimRef` (and its bound-by-controller annotation, if
    /// the assumed volume carries it): the PV controller then binds the claim.
    BindVolume {
        /// The volume as assumed (claimRef set).
        volume: Arc<Volume>,
        /// The claim it is bound to.
        claim: Arc<VolumeClaim>,
    },
    /// Set `volume.kubernetes.io/selected-node` on a claim: its provisioner creates a
    /// volume the node can reach.
    SelectNode {
        /// The claim as assumed.
        claim: Arc<VolumeClaim>,
        /// The node.
        node: String,
    },
}

//! What a simulation's report says of the DRA objects, read back from its JSON fields.

use std::collections::BTreeMap;

use scheduler::simulate::SimulationReport;
use serde::Deserialize;

/// An allocated ResourceClaim as `simulate` reports it.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AllocatedClaim {
    /// Devices as `driver/pool/device`.
    pub devices: Vec<String>,
    /// Names of the pods it is reserved for.
    pub reserved_for: Vec<String>,
}

/// The report's `resourceClaims`, by `namespace/name` (empty when it has none).
pub fn resource_claims(report: &SimulationReport) -> BTreeMap<String, AllocatedClaim> {
    report.owned.get("resourceClaims").map(|v| serde_json::from_value(v.clone()).unwrap()).unwrap_or_default()
}

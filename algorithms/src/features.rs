//! Feature gates (`--feature-gates Name=true,...`), for kube-scheduler features that are
//! off by default in v1.36. They are parsed once and handed to the plugins that read
//! them when the profiles are built.

/// `StorageCapacityScoring` (alpha, off): VolumeBinding scores nodes by how much of the
/// storage its claims would use there.
pub const STORAGE_CAPACITY_SCORING: &str = "StorageCapacityScoring";

/// The gates a scheduler runs with.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FeatureGates {
    /// Whether VolumeBinding scores nodes.
    pub storage_capacity_scoring: bool,
}

impl FeatureGates {
    /// Gates from kube-scheduler's `--feature-gates` syntax (`A=true,B=false`), the rest
    /// at their defaults. Unknown gates and values other than true/false are errors.
    pub fn parse(spec: &str) -> Result<Self, String> {
        let mut gates = FeatureGates::default();
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (name, value) = item.split_once('=').ok_or_else(|| format!("missing bool value for {item}"))?;
            let on = match value.trim() {
                "true" => true,
                "false" => false,
                other => return Err(format!("invalid value of {name}={other}, err: expected true or false")),
            };
            match name.trim() {
                STORAGE_CAPACITY_SCORING => gates.storage_capacity_scoring = on,
                other => return Err(format!("unrecognized feature gate: {other}")),
            }
        }
        Ok(gates)
    }
}

#[cfg(test)]
mod tests {
    use super::FeatureGates;

    #[test]
    fn gates_parse_like_kube_schedulers_flag() {
        assert_eq!(FeatureGates::parse("StorageCapacityScoring=false"), Ok(FeatureGates::default()));
        assert!(FeatureGates::parse("StorageCapacityScoring=true").unwrap().storage_capacity_scoring);
        assert_eq!(FeatureGates::parse("Nope=true").unwrap_err(), "unrecognized feature gate: Nope");
        assert!(FeatureGates::parse("StorageCapacityScoring=yes").is_err());
        assert!(FeatureGates::parse("StorageCapacityScoring").is_err());
    }
}

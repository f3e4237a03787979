//! Feature gates (`--feature-gates Name=true,...`), for kube-scheduler features that are
//! off by default in v1.36.

use std::sync::atomic::{AtomicBool, Ordering};

/// `StorageCapacityScoring` (alpha, off): VolumeBinding scores nodes by how much of the
/// storage its claims would use there.
pub const STORAGE_CAPACITY_SCORING: &str = "StorageCapacityScoring";

static CAPACITY_SCORING: AtomicBool = AtomicBool::new(false);

/// Whether VolumeBinding scores nodes.
pub fn storage_capacity_scoring() -> bool {
    CAPACITY_SCORING.load(Ordering::Relaxed)
}

/// Sets gates from kube-scheduler's `--feature-gates` syntax (`A=true,B=false`).
/// Unknown gates and values other than true/false are errors.
pub fn set(spec: &str) -> Result<(), String> {
    for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (name, value) = item.split_once('=').ok_or_else(|| format!("missing bool value for {item}"))?;
        let on = match value.trim() {
            "true" => true,
            "false" => false,
            other => return Err(format!("invalid value of {name}={other}, err: expected true or false")),
        };
        match name.trim() {
            STORAGE_CAPACITY_SCORING => CAPACITY_SCORING.store(on, Ordering::Relaxed),
            other => return Err(format!("unrecognized feature gate: {other}")),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn gates_parse_like_kube_schedulers_flag() {
        assert!(super::set("StorageCapacityScoring=false").is_ok());
        assert!(!super::storage_capacity_scoring());
        assert_eq!(super::set("Nope=true").unwrap_err(), "unrecognized feature gate: Nope");
        assert!(super::set("StorageCapacityScoring=yes").is_err());
        assert!(super::set("StorageCapacityScoring").is_err());
    }
}

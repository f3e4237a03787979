//! Binding conditions (`DRADeviceBindingConditions` with `DRAResourceClaimDeviceStatus`):
//! a device that declares them is allocated, and the pod is bound only once its driver
//! reports every binding condition true in the claim's device status; a binding failure
//! condition, or the binding timeout since the allocation, sends the pod back, and its
//! next attempt finds the claim unavailable so that PostFilter deallocates it.

use std::time::Duration;

use k8s_openapi::api::resource::v1 as api;

/// The current time as the API's timestamps count it.
pub fn now() -> k8s_openapi::jiff::Timestamp {
    let ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
    k8s_openapi::jiff::Timestamp::from_millisecond(ms).unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)
}

/// Where a claim's devices stand with their binding conditions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    /// Every binding condition is true (or there are none).
    Ready,
    /// Some binding condition is not true yet.
    Waiting,
    /// A binding failure condition is true: kube-scheduler's message.
    Failed(String),
}

/// kube-scheduler's `isClaimReadyForBinding`.
pub fn readiness(claim: &api::ResourceClaim) -> Readiness {
    let Some(status) = &claim.status else { return Readiness::Waiting };
    let Some(allocation) = &status.allocation else { return Readiness::Waiting };
    let name = claim.metadata.name.as_deref().unwrap_or_default();
    let results = allocation.devices.as_ref().and_then(|d| d.results.as_ref());
    for r in results.into_iter().flatten() {
        let wanted = r.binding_conditions.as_deref().unwrap_or_default();
        if wanted.is_empty() {
            continue;
        }
        let device =
            status.devices.iter().flatten().find(|d| d.device == r.device && d.driver == r.driver && d.pool == r.pool);
        let Some(device) = device else { return Readiness::Waiting };
        let conditions = device.conditions.as_deref().unwrap_or_default();
        let find = |t: &str| conditions.iter().find(|c| c.type_ == t);
        for failure in r.binding_failure_conditions.iter().flatten() {
            if let Some(c) = find(failure).filter(|c| c.status == "True") {
                return Readiness::Failed(format!(
                    "claim {name} binding failed: reason={}, message={:?}",
                    c.reason, c.message
                ));
            }
        }
        if !wanted.iter().all(|t| find(t).is_some_and(|c| c.status == "True")) {
            return Readiness::Waiting;
        }
    }
    Readiness::Ready
}

/// Whether some device of the claim declares binding conditions.
pub fn has_binding_conditions(claim: &api::ResourceClaim) -> bool {
    let allocation = claim.status.as_ref().and_then(|s| s.allocation.as_ref());
    let results = allocation.and_then(|a| a.devices.as_ref()).and_then(|d| d.results.as_ref());
    results.into_iter().flatten().any(|r| r.binding_conditions.as_ref().is_some_and(|c| !c.is_empty()))
}

/// kube-scheduler's `isClaimTimeout`: the binding timeout has passed since the allocation
/// of a claim whose devices declare binding conditions.
pub fn timed_out(claim: &api::ResourceClaim, timeout: Duration, now: k8s_openapi::jiff::Timestamp) -> bool {
    let allocation = claim.status.as_ref().and_then(|s| s.allocation.as_ref());
    let Some(at) = allocation.and_then(|a| a.allocation_timestamp.as_ref()) else { return false };
    let Ok(span) = k8s_openapi::jiff::SignedDuration::try_from(timeout) else { return false };
    has_binding_conditions(claim) && at.0.checked_add(span).is_ok_and(|end| end < now)
}

/// An allocated claim the pod cannot use as it is: its binding failed, or timed out.
pub fn stuck(claim: &api::ResourceClaim, timeout: Duration, now: k8s_openapi::jiff::Timestamp) -> bool {
    match readiness(claim) {
        Readiness::Failed(_) => true,
        Readiness::Waiting => timed_out(claim, timeout, now),
        Readiness::Ready => false,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn claim(conditions: serde_json::Value, allocated_secs_ago: i64) -> api::ResourceClaim {
        let at = now() - k8s_openapi::jiff::SignedDuration::from_secs(allocated_secs_ago);
        serde_json::from_value(json!({
            "metadata": {"name": "c", "namespace": "default"},
            "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu"}}]}},
            "status": {
                "allocation": {"allocationTimestamp": at.to_string(), "devices": {"results": [{
                    "request": "r", "driver": "d", "pool": "p", "device": "gpu-0",
                    "bindingConditions": ["Attached"], "bindingFailureConditions": ["AttachFailed"]}]}},
                "devices": [{"driver": "d", "pool": "p", "device": "gpu-0", "conditions": conditions}]
            }
        }))
        .unwrap()
    }

    fn cond(t: &str, status: &str) -> serde_json::Value {
        json!({"type": t, "status": status, "reason": "Driver", "message": "said so",
            "lastTransitionTime": "2026-01-01T00:00:00Z"})
    }

    #[test]
    fn binding_conditions_as_kube_scheduler_reads_them() {
        let minute = Duration::from_secs(60);
        let now = now();
        let cases = [
            ("no condition reported yet", json!([]), 0, Readiness::Waiting, false),
            ("the condition is false", json!([cond("Attached", "False")]), 0, Readiness::Waiting, false),
            ("the condition is true", json!([cond("Attached", "True")]), 0, Readiness::Ready, false),
            (
                "a failure condition is true",
                json!([cond("AttachFailed", "True")]),
                0,
                Readiness::Failed("claim c binding failed: reason=Driver, message=\"said so\"".into()),
                true,
            ),
            ("still waiting after the timeout", json!([]), 120, Readiness::Waiting, true),
            ("ready after the timeout is fine", json!([cond("Attached", "True")]), 120, Readiness::Ready, false),
        ];
        for (name, conditions, ago, want, is_stuck) in cases {
            let c = claim(conditions, ago);
            assert_eq!(readiness(&c), want, "{name}");
            assert_eq!(stuck(&c, minute, now), is_stuck, "{name}");
        }
    }
}

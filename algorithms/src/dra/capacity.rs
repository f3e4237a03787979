//! Consumable capacity (`DRAConsumableCapacity`): what a request consumes of each capacity
//! of a device, rounded and bounded by the capacity's request policy, and whether the
//! device still has it.

use super::objects::{Alternative, Amount, Capacity, CapacityPolicy, Device};

/// What `request` (the amount a claim asks for, if it names the capacity) consumes of a
/// capacity: the policy's default or the whole value when not asked for; otherwise the
/// request rounded up to the range's next step (at least its minimum) or to the first
/// valid value not below it.
pub fn consumed(request: Option<&Amount>, capacity: &Capacity) -> Amount {
    let Some(request) = request else {
        return capacity.policy.as_ref().and_then(|p| p.default.clone()).unwrap_or_else(|| capacity.value.clone());
    };
    let Some(policy) = &capacity.policy else { return request.clone() };
    if let (true, Some(min)) = (policy.range, &policy.min) {
        if request.nanos < min.nanos {
            return min.clone();
        }
        let Some(step) = policy.step.as_ref().filter(|s| s.value > 0) else { return request.clone() };
        let steps = (request.value.saturating_sub(min.value) + step.value - 1) / step.value;
        return Amount::whole(min.value.saturating_add(step.value.saturating_mul(steps)));
    }
    policy.valid_values.iter().find(|v| v.nanos >= request.nanos).cloned().unwrap_or_else(|| request.clone())
}

/// Whether an amount breaks the policy: above the range's maximum or off its steps, or
/// not one of the valid values. The default always passes.
pub fn violates(amount: &Amount, policy: Option<&CapacityPolicy>) -> bool {
    let Some(policy) = policy else { return false };
    if policy.default.as_ref().is_some_and(|d| d.nanos == amount.nanos) {
        return false;
    }
    if policy.range {
        if policy.max.as_ref().is_some_and(|m| amount.nanos > m.nanos) {
            return true;
        }
        if let (Some(step), Some(min)) = (policy.step.as_ref().filter(|s| s.value > 0), &policy.min) {
            return (amount.value - min.value) % step.value != 0;
        }
        return false;
    }
    !policy.valid_values.is_empty() && !policy.valid_values.iter().any(|v| v.nanos == amount.nanos)
}

/// What `alt` would consume of each of the device's capacities (in their order), if the
/// device has every capacity asked for, no policy is broken, and each capacity holds it
/// beside what `used` says is already consumed (by name, nano units).
pub fn fits(alt: &Alternative, device: &Device, used: impl Fn(usize, &str) -> i128) -> Option<Vec<Amount>> {
    if alt.capacity.iter().any(|(name, _)| !device.capacities.iter().any(|c| &c.name == name)) {
        return None;
    }
    let mut out = Vec::with_capacity(device.capacities.len());
    for (i, capacity) in device.capacities.iter().enumerate() {
        let asked = alt.capacity.iter().find(|(n, _)| *n == capacity.name).map(|(_, a)| a);
        let amount = consumed(asked, capacity);
        if violates(&amount, capacity.policy.as_ref()) || used(i, &capacity.name) + amount.nanos > capacity.value.nanos
        {
            return None;
        }
        out.push(amount);
    }
    Some(out)
}

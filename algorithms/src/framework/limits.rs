//! Limits a PreFilter puts on what a pod may be given beyond its own requests: how many
//! more of a named resource (a DeviceClass's devices, an extended resource that devices
//! serve) the plugins that choose amounts for the pod (the DRA allocator) may give it.
//! A quota plugin gives them; the framework hands them to every plugin's state and to
//! Reserve, so that a `firstAvailable` request takes the alternative the quota leaves
//! room for, rather than the pod being refused for its largest one.

use std::fmt;
use std::sync::Arc;

/// How many more of each named resource a pod may be given (`None` for no limit), and
/// what sets the limits, for messages (`ElasticQuota team-a/team-a`).
#[derive(Clone)]
pub struct Limits {
    of: Arc<dyn Fn(&str) -> Option<i64> + Send + Sync>,
    by: String,
}

impl Limits {
    /// Limits set by `by`, read from `f`: how many more of a resource, by name (never
    /// below 0).
    pub fn new(by: impl Into<String>, f: impl Fn(&str) -> Option<i64> + Send + Sync + 'static) -> Self {
        Limits { of: Arc::new(f), by: by.into() }
    }

    /// How many more of `name` the pod may be given; `None` for no limit.
    pub fn of(&self, name: &str) -> Option<i64> {
        (self.of)(name).map(|n| n.max(0))
    }

    /// What sets the limits.
    pub fn by(&self) -> &str {
        &self.by
    }

    /// Both limits at once: the lower of the two for each resource.
    pub fn and(self, other: Limits) -> Limits {
        let by = format!("{} and {}", self.by, other.by);
        Limits::new(by, move |name| match (self.of(name), other.of(name)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        })
    }
}

impl fmt::Debug for Limits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Limits(by {})", self.by)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_limits_keep_the_lower_and_nothing_goes_below_zero() {
        let a = Limits::new("a", |n| (n == "x").then_some(3));
        let b = Limits::new("b", |n| match n {
            "x" => Some(5),
            "y" => Some(-2),
            _ => None,
        });
        let both = a.and(b);
        assert_eq!(both.by(), "a and b");
        assert_eq!((both.of("x"), both.of("y"), both.of("z")), (Some(3), Some(0), None));
    }
}

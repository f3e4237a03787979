//! Taints and tolerations, parsed once.

use k8s_openapi::api::core::v1 as core;

/// The effect of a taint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Effect {
    /// New pods that do not tolerate it are not scheduled.
    NoSchedule,
    /// The scheduler avoids the node when it can.
    PreferNoSchedule,
    /// New pods are not scheduled and running ones are evicted.
    NoExecute,
    /// An effect this scheduler does not know; never filters.
    Other,
}

impl Effect {
    /// Parses an API effect string.
    pub fn parse(s: &str) -> Self {
        match s {
            "NoSchedule" => Effect::NoSchedule,
            "PreferNoSchedule" => Effect::PreferNoSchedule,
            "NoExecute" => Effect::NoExecute,
            _ => Effect::Other,
        }
    }

    /// The API spelling.
    pub fn as_str(&self) -> &'static str {
        match self {
            Effect::NoSchedule => "NoSchedule",
            Effect::PreferNoSchedule => "PreferNoSchedule",
            Effect::NoExecute => "NoExecute",
            Effect::Other => "Other",
        }
    }
}

/// A node taint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taint {
    /// Taint key.
    pub key: String,
    /// Taint value (empty when unset).
    pub value: String,
    /// Taint effect.
    pub effect: Effect,
}

impl Taint {
    /// Parses an API taint.
    pub fn from_api(t: &core::Taint) -> Self {
        Taint { key: t.key.clone(), value: t.value.clone().unwrap_or_default(), effect: Effect::parse(&t.effect) }
    }
}

impl std::fmt::Display for Taint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.value.is_empty() {
            write!(f, "{}:{}", self.key, self.effect.as_str())
        } else {
            write!(f, "{}={}:{}", self.key, self.value, self.effect.as_str())
        }
    }
}

/// A pod toleration.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Toleration {
    /// Key; empty with `Exists` tolerates every taint.
    pub key: String,
    /// True for `Exists`, false for `Equal` (the default).
    pub exists: bool,
    /// Value compared under `Equal`.
    pub value: String,
    /// Effect; `None` tolerates every effect.
    pub effect: Option<Effect>,
}

impl Toleration {
    /// Parses an API toleration. Unknown operators yield a toleration that tolerates nothing.
    pub fn from_api(t: &core::Toleration) -> Option<Self> {
        let exists = match t.operator.as_deref() {
            None | Some("") | Some("Equal") => false,
            Some("Exists") => true,
            Some(_) => return None,
        };
        Some(Toleration {
            key: t.key.clone().unwrap_or_default(),
            exists,
            value: t.value.clone().unwrap_or_default(),
            effect: t.effect.as_deref().filter(|e| !e.is_empty()).map(Effect::parse),
        })
    }

    /// Whether this toleration tolerates the taint.
    pub fn tolerates(&self, taint: &Taint) -> bool {
        if self.effect.is_some_and(|e| e != taint.effect) {
            return false;
        }
        if !self.key.is_empty() && self.key != taint.key {
            return false;
        }
        self.exists || self.value == taint.value
    }
}

/// The first taint with one of the given effects that no toleration tolerates.
pub fn find_untolerated<'a>(
    taints: &'a [Taint],
    tolerations: &[Toleration],
    filter: impl Fn(&Taint) -> bool,
) -> Option<&'a Taint> {
    taints.iter().filter(|t| filter(t)).find(|t| !tolerations.iter().any(|tol| tol.tolerates(t)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taint(k: &str, v: &str, e: Effect) -> Taint {
        Taint { key: k.into(), value: v.into(), effect: e }
    }

    fn tol(k: &str, op: &str, v: &str, e: &str) -> Toleration {
        Toleration::from_api(&core::Toleration {
            key: Some(k.into()),
            operator: Some(op.into()),
            value: Some(v.into()),
            effect: Some(e.into()),
            toleration_seconds: None,
        })
        .unwrap()
    }

    #[test]
    fn toleration_matching_table() {
        let t = taint("dedicated", "gpu", Effect::NoSchedule);
        let cases = [
            (tol("dedicated", "Equal", "gpu", "NoSchedule"), true),
            (tol("dedicated", "Equal", "gpu", ""), true),
            (tol("dedicated", "Equal", "cpu", "NoSchedule"), false),
            (tol("dedicated", "Exists", "", "NoSchedule"), true),
            (tol("dedicated", "Exists", "", "NoExecute"), false),
            (tol("", "Exists", "", ""), true),
            (tol("other", "Exists", "", ""), false),
            (tol("dedicated", "", "gpu", "NoSchedule"), true),
        ];
        for (toleration, expected) in cases {
            assert_eq!(toleration.tolerates(&t), expected, "{toleration:?}");
        }
    }

    #[test]
    fn find_untolerated_skips_filtered_effects() {
        let taints = vec![taint("a", "", Effect::PreferNoSchedule), taint("b", "", Effect::NoSchedule)];
        let hard = |t: &Taint| matches!(t.effect, Effect::NoSchedule | Effect::NoExecute);
        assert_eq!(find_untolerated(&taints, &[], hard).map(|t| t.key.as_str()), Some("b"));
        let tols = vec![tol("b", "Exists", "", "")];
        assert!(find_untolerated(&taints, &tols, hard).is_none());
    }
}

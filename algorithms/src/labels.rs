//! Label selectors (pods, namespaces) and node selectors (node affinity), parsed once.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use thiserror::Error;

/// Labels of an object.
pub type Labels = BTreeMap<String, String>;

/// A selector or node-selector requirement that cannot be evaluated.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Error)]
#[error("invalid selector requirement on key {key:?}: {reason}")]
pub struct SelectorError {
    /// The label key of the requirement.
    pub key: String,
    /// What is wrong with it.
    pub reason: String,
}

/// An operator of a label or node selector requirement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operator {
    /// The label's value is one of the values.
    In,
    /// The label is absent or its value is none of the values.
    NotIn,
    /// The label is present.
    Exists,
    /// The label is absent.
    DoesNotExist,
    /// The label's value, as an integer, is greater (node selectors only).
    Gt,
    /// The label's value, as an integer, is less (node selectors only).
    Lt,
}

/// One parsed requirement.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Requirement {
    /// Label key (or field name for node field selectors).
    pub key: String,
    /// The operator.
    pub op: Operator,
    /// Values, sorted for `In`/`NotIn`.
    pub values: Vec<String>,
    /// The single integer operand of `Gt`/`Lt`.
    pub bound: i64,
}

impl Requirement {
    pub(crate) fn new(key: &str, op: &str, values: &[String], node: bool) -> Result<Self, SelectorError> {
        let err = |reason: &str| SelectorError { key: key.to_string(), reason: reason.to_string() };
        let op = match op {
            "In" => Operator::In,
            "NotIn" => Operator::NotIn,
            "Exists" => Operator::Exists,
            "DoesNotExist" => Operator::DoesNotExist,
            "Gt" if node => Operator::Gt,
            "Lt" if node => Operator::Lt,
            other => return Err(err(&format!("{other:?} is not a valid operator"))),
        };
        let mut values = values.to_vec();
        let mut bound = 0;
        match op {
            Operator::In | Operator::NotIn if values.is_empty() => {
                return Err(err("values must be non-empty for In and NotIn"));
            }
            Operator::Exists | Operator::DoesNotExist if !values.is_empty() => {
                return Err(err("values must be empty for Exists and DoesNotExist"));
            }
            Operator::Gt | Operator::Lt => {
                let [v] = values.as_slice() else {
                    return Err(err("Gt and Lt take exactly one value"));
                };
                bound = v.parse().map_err(|_| err("Gt and Lt take an integer value"))?;
            }
            _ => {}
        }
        values.sort();
        values.dedup();
        Ok(Requirement { key: key.to_string(), op, values, bound })
    }

    /// Evaluates the requirement against a label value (`None` when absent).
    pub fn matches_value(&self, value: Option<&str>) -> bool {
        match (self.op, value) {
            (Operator::In, Some(v)) => self.has_value(v),
            (Operator::In, None) => false,
            (Operator::NotIn, Some(v)) => !self.has_value(v),
            (Operator::NotIn, None) => true,
            (Operator::Exists, v) => v.is_some(),
            (Operator::DoesNotExist, v) => v.is_none(),
            (Operator::Gt, Some(v)) => v.parse::<i64>().is_ok_and(|n| n > self.bound),
            (Operator::Lt, Some(v)) => v.parse::<i64>().is_ok_and(|n| n < self.bound),
            (Operator::Gt | Operator::Lt, None) => false,
        }
    }

    fn has_value(&self, v: &str) -> bool {
        self.values.binary_search_by(|x| x.as_str().cmp(v)).is_ok()
    }

    /// Evaluates the requirement against a label set.
    pub fn matches(&self, labels: &Labels) -> bool {
        self.matches_value(labels.get(&self.key).map(String::as_str))
    }
}

/// A parsed `metav1.LabelSelector`. An empty selector matches everything; a
/// missing selector is represented by `Option::None` at the use site and matches nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct LabelSelector {
    /// All requirements, ANDed (matchLabels become `In` requirements).
    pub requirements: Vec<Requirement>,
}

/// Whether `s` is 1 to 63 alphanumerics, `-`, `_` or `.`, starting and ending alphanumeric.
fn is_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// Whether `s` is a DNS-1123 subdomain (lowercase, at most 253 characters).
fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253
        && s.split('.').all(|part| {
            let b = part.as_bytes();
            !b.is_empty()
                && b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        })
}

/// The API server's rules for a label key (an optional DNS-subdomain prefix and `/`,
/// then a name part) and for label values (empty, or a name part).
fn check_label(key: &str, values: &[String]) -> Result<(), SelectorError> {
    let err = |reason: String| SelectorError { key: key.to_string(), reason };
    let name = match key.split_once('/') {
        Some((prefix, name)) => {
            if !is_dns_subdomain(prefix) {
                return Err(err(format!("prefix {prefix:?} is not a DNS-1123 subdomain")));
            }
            name
        }
        None => key,
    };
    if !is_name_part(name) {
        return Err(err(
            "name part must be 1-63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric".into()
        ));
    }
    if let Some(v) = values.iter().find(|v| !v.is_empty() && !is_name_part(v)) {
        return Err(err(format!(
            "value {v:?} must be at most 63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric"
        )));
    }
    Ok(())
}

impl LabelSelector {
    /// Parses an API selector. Keys and values must follow the API server's label rules.
    pub fn parse(sel: &meta::LabelSelector) -> Result<Self, SelectorError> {
        let mut requirements = Vec::new();
        for (k, v) in sel.match_labels.iter().flatten() {
            let values = std::slice::from_ref(v);
            check_label(k, values)?;
            requirements.push(Requirement::new(k, "In", values, false)?);
        }
        for e in sel.match_expressions.iter().flatten() {
            let values = e.values.as_deref().unwrap_or(&[]);
            check_label(&e.key, values)?;
            requirements.push(Requirement::new(&e.key, &e.operator, values, false)?);
        }
        Ok(LabelSelector { requirements })
    }

    /// A selector matching exactly these labels (`matchLabels` only).
    pub fn from_labels(labels: &Labels) -> Self {
        let requirements = labels
            .iter()
            .map(|(k, v)| Requirement { key: k.clone(), op: Operator::In, values: vec![v.clone()], bound: 0 })
            .collect();
        LabelSelector { requirements }
    }

    /// Adds a requirement `key op [value]` (used for matchLabelKeys merging).
    pub fn push(&mut self, key: &str, op: Operator, value: &str) {
        self.requirements.push(Requirement { key: key.to_string(), op, values: vec![value.to_string()], bound: 0 });
    }

    /// Whether the selector has no requirement (matches everything).
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Whether the labels satisfy every requirement.
    pub fn matches(&self, labels: &Labels) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }
}

/// One node selector term: label expressions and field expressions, ANDed.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NodeSelectorTerm {
    /// Requirements on node labels.
    pub expressions: Vec<Requirement>,
    /// Requirements on node fields (only `metadata.name`).
    pub fields: Vec<Requirement>,
}

impl NodeSelectorTerm {
    /// Whether the node satisfies the term. An empty term matches nothing.
    pub fn matches(&self, name: &str, labels: &Labels) -> bool {
        if self.expressions.is_empty() && self.fields.is_empty() {
            return false;
        }
        self.expressions.iter().all(|r| r.matches(labels)) && self.fields.iter().all(|r| r.matches_value(Some(name)))
    }
}

/// A parsed `v1.NodeSelector`: terms ORed. Terms that fail to parse match nothing,
/// as kube-scheduler's lazy-error selector treats them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct NodeSelector {
    /// The usable terms.
    pub terms: Vec<NodeSelectorTerm>,
    /// Errors of terms that could not be parsed.
    pub errors: Vec<SelectorError>,
}

impl NodeSelector {
    /// Parses an API node selector.
    pub fn parse(sel: &core::NodeSelector) -> Self {
        let mut out = NodeSelector::default();
        for term in &sel.node_selector_terms {
            match parse_term(term) {
                Ok(t) => out.terms.push(t),
                Err(e) => out.errors.push(e),
            }
        }
        out
    }

    /// Whether any term matches the node.
    pub fn matches(&self, name: &str, labels: &Labels) -> bool {
        self.terms.iter().any(|t| t.matches(name, labels))
    }
}

/// Parses one node selector term.
pub fn parse_term(term: &core::NodeSelectorTerm) -> Result<NodeSelectorTerm, SelectorError> {
    let mut expressions = Vec::new();
    for e in term.match_expressions.iter().flatten() {
        let values = e.values.as_deref().unwrap_or(&[]);
        check_label(&e.key, values)?;
        expressions.push(Requirement::new(&e.key, &e.operator, values, true)?);
    }
    let mut fields = Vec::new();
    for e in term.match_fields.iter().flatten() {
        if e.key != "metadata.name" {
            return Err(SelectorError { key: e.key.clone(), reason: "only metadata.name is a supported field".into() });
        }
        let r = Requirement::new(&e.key, &e.operator, e.values.as_deref().unwrap_or(&[]), true)?;
        if !matches!(r.op, Operator::In | Operator::NotIn) || r.values.len() != 1 {
            return Err(SelectorError {
                key: e.key.clone(),
                reason: "field selectors take In or NotIn with exactly one value".into(),
            });
        }
        fields.push(r);
    }
    Ok(NodeSelectorTerm { expressions, fields })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn req(key: &str, op: &str, values: &[&str]) -> Requirement {
        let values: Vec<String> = values.iter().map(|s| s.to_string()).collect();
        Requirement::new(key, op, &values, true).unwrap()
    }

    #[test]
    fn requirement_operators_follow_kubernetes_semantics() {
        let l = labels(&[("zone", "a"), ("cores", "8")]);
        let cases = [
            (req("zone", "In", &["a", "b"]), true),
            (req("zone", "In", &["b"]), false),
            (req("missing", "In", &["a"]), false),
            (req("zone", "NotIn", &["b"]), true),
            (req("zone", "NotIn", &["a"]), false),
            (req("missing", "NotIn", &["a"]), true),
            (req("zone", "Exists", &[]), true),
            (req("missing", "Exists", &[]), false),
            (req("missing", "DoesNotExist", &[]), true),
            (req("zone", "DoesNotExist", &[]), false),
            (req("cores", "Gt", &["4"]), true),
            (req("cores", "Gt", &["8"]), false),
            (req("cores", "Lt", &["9"]), true),
            (req("zone", "Gt", &["1"]), false),
            (req("missing", "Lt", &["1"]), false),
        ];
        for (r, expected) in cases {
            assert_eq!(r.matches(&l), expected, "{r:?}");
        }
    }

    #[test]
    fn malformed_requirements_are_rejected() {
        assert!(Requirement::new("k", "In", &[], true).is_err());
        assert!(Requirement::new("k", "Exists", &["x".into()], true).is_err());
        assert!(Requirement::new("k", "Gt", &["x".into()], true).is_err());
        assert!(Requirement::new("k", "Gt", &["1".into()], false).is_err());
        assert!(Requirement::new("k", "Foo", &[], true).is_err());
    }

    #[test]
    fn empty_label_selector_matches_everything() {
        assert!(LabelSelector::default().matches(&labels(&[("a", "b")])));
        assert!(LabelSelector::default().matches(&Labels::new()));
    }

    #[test]
    fn empty_node_selector_term_matches_nothing() {
        let sel = NodeSelector::parse(&core::NodeSelector { node_selector_terms: vec![Default::default()] });
        assert!(!sel.matches("n1", &labels(&[("a", "b")])));
        let none = NodeSelector::parse(&core::NodeSelector { node_selector_terms: vec![] });
        assert!(!none.matches("n1", &Labels::new()));
    }

    #[test]
    fn node_selector_terms_are_ored_and_field_terms_match_names() {
        let term = |key: &str, op: &str, v: &str| core::NodeSelectorTerm {
            match_expressions: Some(vec![core::NodeSelectorRequirement {
                key: key.into(),
                operator: op.into(),
                values: Some(vec![v.into()]),
            }]),
            match_fields: None,
        };
        let by_name = core::NodeSelectorTerm {
            match_fields: Some(vec![core::NodeSelectorRequirement {
                key: "metadata.name".into(),
                operator: "In".into(),
                values: Some(vec!["n2".into()]),
            }]),
            match_expressions: None,
        };
        let sel =
            NodeSelector::parse(&core::NodeSelector { node_selector_terms: vec![term("zone", "In", "a"), by_name] });
        assert!(sel.matches("n1", &labels(&[("zone", "a")])));
        assert!(sel.matches("n2", &labels(&[("zone", "b")])));
        assert!(!sel.matches("n3", &labels(&[("zone", "b")])));
    }

    #[test]
    fn a_bad_term_matches_nothing_but_others_still_count() {
        let bad = core::NodeSelectorTerm {
            match_expressions: Some(vec![core::NodeSelectorRequirement {
                key: "cores".into(),
                operator: "Gt".into(),
                values: Some(vec!["many".into()]),
            }]),
            match_fields: None,
        };
        let good = core::NodeSelectorTerm {
            match_expressions: Some(vec![core::NodeSelectorRequirement {
                key: "zone".into(),
                operator: "Exists".into(),
                values: None,
            }]),
            match_fields: None,
        };
        let sel = NodeSelector::parse(&core::NodeSelector { node_selector_terms: vec![bad, good] });
        assert_eq!(sel.errors.len(), 1);
        assert!(sel.matches("n", &labels(&[("zone", "x")])));
    }

    #[test]
    fn invalid_label_keys_and_values_are_refused_and_such_node_terms_match_nothing() {
        let bad_keys = ["", "-a", "a-", "a b", "Example.com/x", "a/b/c", &"k".repeat(64), "/x"];
        for key in bad_keys {
            let sel = meta::LabelSelector {
                match_labels: Some([(key.to_string(), "v".to_string())].into_iter().collect()),
                ..Default::default()
            };
            assert!(LabelSelector::parse(&sel).is_err(), "{key:?}");
        }
        for value in ["-v", "v v", &"v".repeat(64)] {
            let sel = meta::LabelSelector {
                match_labels: Some([("app".to_string(), value.to_string())].into_iter().collect()),
                ..Default::default()
            };
            assert!(LabelSelector::parse(&sel).is_err(), "{value:?}");
        }
        for key in ["app", "example.com/app", "kubernetes.io/hostname", "a.b_c-d"] {
            let sel = meta::LabelSelector {
                match_labels: Some([(key.to_string(), String::new())].into_iter().collect()),
                ..Default::default()
            };
            assert!(LabelSelector::parse(&sel).is_ok(), "{key:?}");
        }
        // A node-affinity term with an invalid key matches nothing; the valid term still works.
        let term = |key: &str| core::NodeSelectorTerm {
            match_expressions: Some(vec![core::NodeSelectorRequirement {
                key: key.into(),
                operator: "Exists".into(),
                values: None,
            }]),
            match_fields: None,
        };
        let sel = NodeSelector::parse(&core::NodeSelector { node_selector_terms: vec![term("bad key"), term("zone")] });
        assert_eq!((sel.terms.len(), sel.errors.len()), (1, 1));
        assert!(!sel.matches("n", &labels(&[("bad key", "x")])));
        assert!(sel.matches("n", &labels(&[("zone", "a")])));
    }
}

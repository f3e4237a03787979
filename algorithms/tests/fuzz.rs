//! Property-based fuzzing of everything that reads API objects: quantities, label and
//! node selectors, pods and nodes built from arbitrary JSON. The properties: no panic,
//! and what is accepted behaves (quantities never negative where refused, parsing twice
//! agrees). CI runs the default number of cases; `FUZZ_CASES=1000000 cargo test -p
//! custom-scheduler-algorithms --release --test fuzz` runs a long run.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use algorithms::labels::{LabelSelector, NodeSelector};
use algorithms::quantity::Quantity;
use algorithms::{NodeInfo, PodInfo};
use proptest::prelude::*;
use serde_json::{Value, json};

fn cases() -> u32 {
    std::env::var("FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(512)
}

/// JSON values biased towards the shapes the parsers look at.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        "[-+]?[0-9]{0,20}(\\.[0-9]{0,6})?(e[-+]?[0-9]{1,3}|[kMGTPE]i?|m|u|n)?".prop_map(Value::String),
        "[a-zA-Z0-9./_-]{0,70}".prop_map(Value::String),
        prop_oneof![
            Just("In"),
            Just("NotIn"),
            Just("Exists"),
            Just("DoesNotExist"),
            Just("Gt"),
            Just("Lt"),
            Just("cpu"),
            Just("memory"),
            Just("NoSchedule"),
            Just("Never"),
        ]
        .prop_map(|s| Value::String(s.to_string())),
    ];
    leaf.prop_recursive(5, 96, 8, |inner| {
        let keys = prop_oneof![
            Just("metadata"),
            Just("name"),
            Just("namespace"),
            Just("labels"),
            Just("spec"),
            Just("status"),
            Just("containers"),
            Just("initContainers"),
            Just("resources"),
            Just("requests"),
            Just("limits"),
            Just("affinity"),
            Just("nodeAffinity"),
            Just("podAffinity"),
            Just("podAntiAffinity"),
            Just("requiredDuringSchedulingIgnoredDuringExecution"),
            Just("preferredDuringSchedulingIgnoredDuringExecution"),
            Just("nodeSelectorTerms"),
            Just("matchExpressions"),
            Just("matchFields"),
            Just("key"),
            Just("operator"),
            Just("values"),
            Just("labelSelector"),
            Just("matchLabels"),
            Just("topologyKey"),
            Just("weight"),
            Just("topologySpreadConstraints"),
            Just("maxSkew"),
            Just("whenUnsatisfiable"),
            Just("tolerations"),
            Just("taints"),
            Just("effect"),
            Just("allocatable"),
            Just("images"),
            Just("names"),
            Just("sizeBytes"),
            Just("priority"),
            Just("nodeName"),
            Just("ports"),
            Just("hostPort"),
            Just("overhead"),
            Just("cpu"),
            Just("memory"),
            Just("restartPolicy"),
            Just("nodeSelector"),
        ];
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::btree_map(keys.prop_map(str::to_string), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn quantities_never_panic_and_refuse_negatives(s in "\\PC{0,40}|[-+]?[0-9]{0,30}(\\.[0-9]{0,30})?([eE][-+]?[0-9]{1,4}|[kMGTPE]i?|m|u|n)?") {
        if let Ok(q) = Quantity::parse_non_negative(&s) {
            prop_assert!(q.milli_value() >= 0 && q.value() >= 0, "{s:?}");
        }
        let _ = Quantity::parse(&s);
    }

    #[test]
    fn pods_and_nodes_from_arbitrary_json_never_panic(spec in any_json(), status in any_json(), meta in any_json()) {
        let obj = json!({"apiVersion": "v1", "metadata": meta, "spec": spec, "status": status});
        if let Ok(pod) = serde_json::from_value::<k8s_openapi::api::core::v1::Pod>(obj.clone())
            && let Ok(info) = PodInfo::from_pod(&pod)
        {
            prop_assert!(info.requests.requests.milli_cpu >= 0 && info.requests.requests.memory >= 0);
            prop_assert_eq!(PodInfo::from_pod(&pod).unwrap(), info);
        }
        if let Ok(node) = serde_json::from_value::<k8s_openapi::api::core::v1::Node>(obj)
            && let Ok(info) = NodeInfo::from_node(&node)
        {
            prop_assert!(info.allocatable.milli_cpu >= 0 && info.allocatable.memory >= 0);
        }
    }

    #[test]
    fn selectors_from_arbitrary_json_never_panic(sel in any_json(), labels in proptest::collection::btree_map("[a-z./]{1,12}", "[a-z0-9]{0,8}", 0..6)) {
        if let Ok(s) = serde_json::from_value::<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>(sel.clone())
            && let Ok(parsed) = LabelSelector::parse(&s)
        {
            let _ = parsed.matches(&labels);
        }
        if let Ok(s) = serde_json::from_value::<k8s_openapi::api::core::v1::NodeSelector>(sel) {
            let parsed = NodeSelector::parse(&s);
            let _ = parsed.matches("n", &labels);
        }
    }
}

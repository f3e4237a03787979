//! Property: whatever nodes and pod kube-scheduler sends, `/filter` answers with a
//! partition of the sent node names (each exactly once: passed, failed or unresolvable),
//! and `/prioritize` scores each sent node once.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;

use algorithms::builders::{NodeBuilder, PodBuilder};
use algorithms::config::default_profile;
use extender::Extender;
use extender::handlers::{filter, prioritize};
use extender::types::{ExtenderArgs, NodeList};
use k8s_openapi::api::core::v1 as core;
use proptest::prelude::*;

fn node(i: usize, cpu: u8, zone: u8, tainted: bool, cordoned: bool) -> core::Node {
    let mut b = NodeBuilder::new(&format!("n{i}"))
        .capacity(&format!("{}", cpu % 8 + 1), "8Gi", "10")
        .label("zone", &format!("z{}", zone % 3));
    if tainted {
        b = b.taint("dedicated", "x", "NoSchedule");
    }
    b.unschedulable(cordoned).build()
}

fn pod(cpu: u16, zone: Option<u8>, tolerate: bool) -> core::Pod {
    let mut b = PodBuilder::new("p").req(&format!("{}m", cpu % 9000), "100Mi");
    if let Some(z) = zone {
        b = b.node_selector("zone", &format!("z{}", z % 4));
    }
    if tolerate {
        b = b.toleration("dedicated", "Exists", "", "NoSchedule");
    }
    b.build()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn filter_answers_a_partition_of_the_sent_names(
        nodes in proptest::collection::vec((any::<u8>(), any::<u8>(), any::<bool>(), any::<bool>()), 0..40),
        cpu in any::<u16>(),
        zone in proptest::option::of(any::<u8>()),
        tolerate in any::<bool>(),
    ) {
        let ext = Extender::new(default_profile("custom-scheduler"), None, vec![]);
        let items: Vec<core::Node> =
            nodes.iter().enumerate().map(|(i, (c, z, t, u))| node(i, *c, *z, *t, *u)).collect();
        let sent: BTreeSet<String> = items.iter().map(|n| n.metadata.name.clone().unwrap()).collect();
        let args = ExtenderArgs { pod: Some(pod(cpu, zone, tolerate)), nodes: Some(NodeList { items, ..Default::default() }), node_names: None };
        let r = filter(&ext, args.clone()).unwrap();
        prop_assert_eq!(&r.error, "");
        let passed: Vec<String> =
            r.nodes.unwrap().items.iter().map(|n| n.metadata.name.clone().unwrap()).collect();
        let mut all: Vec<String> = passed.clone();
        all.extend(r.failed_nodes.keys().cloned());
        all.extend(r.failed_and_unresolvable_nodes.keys().cloned());
        prop_assert_eq!(all.len(), sent.len(), "a node answered twice or not at all");
        prop_assert_eq!(all.into_iter().collect::<BTreeSet<_>>(), sent.clone());
        let scores = prioritize(&ext, args).unwrap();
        let scored: BTreeSet<String> = scores.iter().map(|h| h.host.clone()).collect();
        prop_assert_eq!(scores.len(), sent.len());
        prop_assert_eq!(scored, sent);
    }
}

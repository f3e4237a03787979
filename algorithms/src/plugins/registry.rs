//! The plugin registry: one line per plugin, in the default profile's order, and the
//! owners of cluster objects; the default profile and where each plugin may run are
//! derived from the roles each builds.

use std::sync::Arc;

use super::ArgsError;
use super::balanced_allocation::{self, BalancedAllocation};
use super::capacity_scheduling;
use super::device_packing::{self, DevicePacking};
use super::dynamic_resources;
use super::elastic_quota;
use super::image_locality::{self, ImageLocality};
use super::inter_pod_affinity::{self, InterPodAffinity};
use super::node_affinity::{self, NodeAffinity};
use super::node_declared_features::{self, NodeDeclaredFeatures};
use super::node_name::{self, NodeName};
use super::node_ports::{self, NodePorts};
use super::node_resources_fit::{self, NodeResourcesFit};
use super::node_unschedulable::{self, NodeUnschedulable};
use super::node_volume_limits::{self, NodeVolumeLimits};
use super::pod_topology_spread::{self, PodTopologySpread};
use super::roles::{Built, both, parse};
use super::taint_toleration::{self, TaintToleration};
use super::volume_binding;
use super::volume_restrictions::{self, VolumeRestrictions};
use super::volume_zone::{self, VolumeZone};
use crate::features::FeatureGates;
use crate::owners::Owner;
use crate::preemption::{self, DefaultPreemption, PreemptionArgs};

/// The owners of cluster objects beyond nodes and pods, one line each: what the plugins
/// that read them need from dumps, from `simulate`'s controllers and in reports.
pub const OWNERS: &[&dyn Owner] = &[&volume_binding::Volumes, &dynamic_resources::Dra, &capacity_scheduling::Quotas];

/// Every plugin, one line each, in kube-scheduler's default profile order: each plugin
/// of that profile runs at every extension point its built roles implement, in this
/// order, scores with the weight given here.
pub const PLUGINS: &[Plugin] = &[
    Plugin::default(node_unschedulable::NAME, |_, _, _| Ok(Built::filter(NodeUnschedulable))),
    Plugin::default(node_name::NAME, |_, _, _| Ok(Built::filter(NodeName))),
    Plugin::default(taint_toleration::NAME, |_, _, _| Ok(both(TaintToleration))).weight(3),
    Plugin::default(node_affinity::NAME, |n, a, _| Ok(both(NodeAffinity::new(&parse(n, a)?)))).weight(2),
    Plugin::default(node_ports::NAME, |_, _, _| Ok(Built::filter(NodePorts))),
    Plugin::default(node_resources_fit::NAME, |n, a, g| {
        Ok(both(NodeResourcesFit::new(&parse(n, a)?)?.with_dra_extended(g.dra_extended_resource)))
    }),
    Plugin::default(volume_restrictions::NAME, |_, _, _| Ok(Built::filter(VolumeRestrictions))).reads_objects(),
    Plugin::default(node_volume_limits::NAME, |_, _, _| Ok(Built::filter(NodeVolumeLimits))).reads_objects(),
    Plugin::default(volume_binding::NAME, volume_binding::build).reads_objects(),
    Plugin::default(volume_zone::NAME, |_, _, _| Ok(Built::filter(VolumeZone))).reads_objects(),
    Plugin::default(pod_topology_spread::NAME, |n, a, _| Ok(both(PodTopologySpread::new(&parse(n, a)?)?))).weight(2),
    Plugin::default(inter_pod_affinity::NAME, |n, a, _| Ok(both(InterPodAffinity::new(&parse(n, a)?)?))).weight(2),
    Plugin::default(dynamic_resources::NAME, dynamic_resources::build).reads_objects().weight(2),
    Plugin::default(preemption::NAME, |n, a, _| {
        let args = PreemptionArgs::from_args(a).map_err(|e| ArgsError::new(n, e))?;
        Ok(Built { post_filter: Some(Arc::new(DefaultPreemption { args })), ..Default::default() })
    }),
    Plugin::default(balanced_allocation::NAME, |n, a, _| Ok(Built::score(BalancedAllocation::new(&parse(n, a)?)?))),
    Plugin::default(image_locality::NAME, |_, _, _| Ok(Built::score(ImageLocality))),
    Plugin::default(node_declared_features::NAME, |_, _, g| {
        Ok(Built::filter(NodeDeclaredFeatures { enabled: g.node_declared_features }))
    }),
    Plugin::optional(device_packing::NAME, |n, a, _| Ok(Built::score(DevicePacking::new(&parse(n, a)?)?))),
    Plugin::optional(capacity_scheduling::NAME, capacity_scheduling::build).reads_objects(),
    Plugin::optional(elastic_quota::NAME, elastic_quota::build).reads_objects(),
];

/// Builds a plugin from its name, its args (JSON, `None` for the defaults) and the gates.
pub type Build = fn(&str, Option<&serde_json::Value>, FeatureGates) -> Result<Built, ArgsError>;

/// One plugin of the registry.
pub struct Plugin {
    /// kube-scheduler's name.
    pub name: &'static str,
    /// In kube-scheduler's default profile (else only where a profile enables it).
    pub in_default: bool,
    /// Its weight as a default score.
    pub weight: i64,
    /// It reads the cluster objects plugins own: only a scheduler that watches them
    /// (not the extender, whose caller runs its own) runs it.
    pub reads_objects: bool,
    /// How it is built.
    pub build: Build,
}

impl Plugin {
    const fn default(name: &'static str, build: Build) -> Self {
        Plugin { name, in_default: true, weight: 1, reads_objects: false, build }
    }

    const fn optional(name: &'static str, build: Build) -> Self {
        Plugin { in_default: false, ..Plugin::default(name, build) }
    }

    const fn weight(self, weight: i64) -> Self {
        Plugin { weight, ..self }
    }

    const fn reads_objects(self) -> Self {
        Plugin { reads_objects: true, ..self }
    }
}

/// The extension points a built plugin implements.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Points {
    /// Filter.
    pub filter: bool,
    /// Score.
    pub score: bool,
    /// PostFilter.
    pub post_filter: bool,
    /// Reserve.
    pub reserve: bool,
    /// Permit.
    pub permit: bool,
    /// PreBind.
    pub pre_bind: bool,
}

impl Built {
    /// The extension points these roles implement.
    pub fn points(&self) -> Points {
        Points {
            filter: self.filter.is_some(),
            score: self.score.is_some(),
            post_filter: self.post_filter.is_some(),
            reserve: self.reserve.is_some(),
            permit: self.permit.is_some(),
            pre_bind: self.pre_bind.is_some(),
        }
    }
}

/// The registry's plugin of this name.
pub fn plugin(name: &str) -> Option<&'static Plugin> {
    PLUGINS.iter().find(|p| p.name == name)
}

/// The points the plugin implements with its default args under `gates`.
pub fn points(name: &str, gates: FeatureGates) -> Points {
    plugin(name).and_then(|p| (p.build)(p.name, None, gates).ok()).map(|b| b.points()).unwrap_or_default()
}

/// The points the plugin can implement at all (under every gate on): where a profile may
/// enable it.
fn capable(name: &str) -> Points {
    points(name, FeatureGates::all_on())
}

/// kube-scheduler's default profile under `gates`: each extension point's plugins in
/// order, scores with their weights.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Defaults {
    /// Filters.
    pub filters: Vec<&'static str>,
    /// Scores and their weights.
    pub scores: Vec<(&'static str, i64)>,
    /// PostFilters.
    pub post_filters: Vec<&'static str>,
    /// Reserves.
    pub reserves: Vec<&'static str>,
    /// Permits.
    pub permits: Vec<&'static str>,
    /// PreBinds.
    pub pre_binds: Vec<&'static str>,
}

/// The default profile's plugins under `gates`, derived from the points each implements.
pub fn defaults(gates: FeatureGates) -> Defaults {
    let mut d = Defaults::default();
    for p in PLUGINS.iter().filter(|p| p.in_default) {
        let at = points(p.name, gates);
        let lists = [
            (at.filter, &mut d.filters),
            (at.post_filter, &mut d.post_filters),
            (at.reserve, &mut d.reserves),
            (at.permit, &mut d.permits),
            (at.pre_bind, &mut d.pre_binds),
        ];
        for (implemented, list) in lists {
            if implemented {
                list.push(p.name);
            }
        }
        if at.score {
            d.scores.push((p.name, p.weight));
        }
    }
    d
}

/// Every plugin name, filters first, then the other scores, then the other PostFilters,
/// for messages.
pub fn names() -> Vec<&'static str> {
    let all: Vec<(&'static str, Points)> = PLUGINS.iter().map(|p| (p.name, capable(p.name))).collect();
    let mut out: Vec<&'static str> = all.iter().filter(|(_, at)| at.filter).map(|(n, _)| *n).collect();
    out.extend(all.iter().filter(|(_, at)| at.score && !at.filter).map(|(n, _)| *n));
    out.extend(all.iter().filter(|(_, at)| at.post_filter && !at.filter && !at.score).map(|(n, _)| *n));
    out
}

/// Whether the plugin reads the cluster objects plugins own (see [`Plugin::reads_objects`]).
pub fn reads_objects(name: &str) -> bool {
    plugin(name).is_some_and(|p| p.reads_objects)
}

/// kube-scheduler plugins that are accepted in configuration without being plugins of
/// this registry: queue sort, binding and gates, which the scheduling loop itself provides.
pub const ACCEPTED_WITHOUT_EFFECT: &[&str] = &["PrioritySort", "SchedulingGates", "DefaultBinder"];

/// Whether a name is a plugin this scheduler implements.
pub fn is_known(name: &str) -> bool {
    plugin(name).is_some()
}

/// Whether the plugin has a PostFilter extension point.
pub fn has_post_filter(name: &str) -> bool {
    capable(name).post_filter
}

/// Whether the plugin has a Filter extension point.
pub fn has_filter(name: &str) -> bool {
    capable(name).filter
}

/// Whether the plugin has a Reserve extension point.
pub fn has_reserve(name: &str) -> bool {
    capable(name).reserve
}

/// Whether the plugin has a Permit extension point.
pub fn has_permit(name: &str) -> bool {
    capable(name).permit
}

/// Whether the plugin has a PreBind extension point.
pub fn has_pre_bind(name: &str) -> bool {
    capable(name).pre_bind
}

/// Whether the plugin has a Score extension point.
pub fn has_score(name: &str) -> bool {
    capable(name).score
}

/// Builds a plugin by name with optional args (JSON), under the given feature gates.
pub fn build(name: &str, args: Option<&serde_json::Value>, gates: FeatureGates) -> Result<Built, ArgsError> {
    match plugin(name) {
        Some(p) => (p.build)(name, args, gates),
        None => Err(ArgsError::new(name, "unknown plugin")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_profile_follows_from_each_plugins_roles_in_registry_order() {
        // Filters and scores are checked as config builds them (default_profile_matches_kube_scheduler).
        let d = defaults(FeatureGates::default());
        assert_eq!((d.filters.len(), d.scores.len()), (14, 8));
        assert_eq!(d.post_filters, ["DynamicResources", "DefaultPreemption"]);
        assert_eq!(d.reserves, ["VolumeBinding", "DynamicResources"]);
        assert_eq!(d.pre_binds, ["VolumeBinding", "DynamicResources"]);
        assert!(d.permits.is_empty());
    }

    #[test]
    fn a_gate_that_gives_a_plugin_a_role_puts_it_at_that_point_in_its_place() {
        let gates = FeatureGates { storage_capacity_scoring: true, ..FeatureGates::default() };
        let scores: Vec<&str> = defaults(gates).scores.iter().map(|(n, _)| *n).collect();
        assert_eq!(&scores[2..5], ["NodeResourcesFit", "VolumeBinding", "PodTopologySpread"]);
        // A profile may enable VolumeBinding's score without the gate; it then builds none.
        assert!(has_score(volume_binding::NAME));
        assert!(!points(volume_binding::NAME, FeatureGates::default()).score);
    }

    #[test]
    fn names_points_and_readers_of_owned_objects_come_from_the_one_list() {
        assert!(is_known("DevicePacking") && !defaults(FeatureGates::all_on()).filters.contains(&"DevicePacking"));
        assert!(has_score("DevicePacking") && !has_filter("DevicePacking"));
        assert!(has_post_filter("DefaultPreemption") && !has_score("DefaultPreemption"));
        assert!(!is_known("NoSuchPlugin") && build("NoSuchPlugin", None, FeatureGates::default()).is_err());
        let names = names();
        assert_eq!(names.len(), PLUGINS.len());
        assert_eq!(
            &names[14..],
            [
                "CapacityScheduling",
                "ElasticQuota",
                "NodeResourcesBalancedAllocation",
                "ImageLocality",
                "DevicePacking",
                "DefaultPreemption"
            ]
        );
        let readers: Vec<&str> = PLUGINS.iter().filter(|p| reads_objects(p.name)).map(|p| p.name).collect();
        assert_eq!(
            readers,
            [
                "VolumeRestrictions",
                "NodeVolumeLimits",
                "VolumeBinding",
                "VolumeZone",
                "DynamicResources",
                "CapacityScheduling",
                "ElasticQuota"
            ]
        );
    }
}

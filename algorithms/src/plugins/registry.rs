//! The plugin registry: names to constructors, and the default profile.

use std::sync::Arc;

use serde::de::DeserializeOwned;

use super::ArgsError;
use super::balanced_allocation::{self, BalancedAllocation};
use super::device_packing::{self, DevicePacking};
use super::dynamic_resources::{self, DynamicResources};
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
use super::taint_toleration::{self, TaintToleration};
use super::volume_binding::{self, VolumeBinding};
use super::volume_restrictions::{self, VolumeRestrictions};
use super::volume_zone::{self, VolumeZone};
use crate::features::FeatureGates;
use crate::framework::{FilterPlugin, PermitPlugin, PostFilterPlugin, PreBindPlugin, ReservePlugin, ScorePlugin};
use crate::owners::Owner;
use crate::preemption::{self, DefaultPreemption, PreemptionArgs};

/// The owners of cluster objects beyond nodes and pods, one line each: what the plugins
/// that read them need from dumps, from `simulate`'s controllers and in reports.
pub const OWNERS: &[&dyn Owner] = &[&volume_binding::Volumes, &dynamic_resources::Dra];

/// Filters of kube-scheduler's default profile that this scheduler runs, in order.
pub const DEFAULT_FILTERS: &[&str] = &[
    node_unschedulable::NAME,
    node_name::NAME,
    taint_toleration::NAME,
    node_affinity::NAME,
    node_ports::NAME,
    node_resources_fit::NAME,
    volume_restrictions::NAME,
    node_volume_limits::NAME,
    volume_binding::NAME,
    volume_zone::NAME,
    pod_topology_spread::NAME,
    inter_pod_affinity::NAME,
    dynamic_resources::NAME,
    node_declared_features::NAME,
];

/// The filters that read claims, volumes and CSI objects: only a scheduler that watches
/// those (not the extender, whose caller runs its own) can run them.
pub const VOLUME_FILTERS: &[&str] = &[
    volume_restrictions::NAME,
    node_volume_limits::NAME,
    volume_binding::NAME,
    volume_zone::NAME,
    dynamic_resources::NAME,
];

/// Scores of kube-scheduler's default profile with their default weights, in order.
pub const DEFAULT_SCORES: &[(&str, i64)] = &[
    (taint_toleration::NAME, 3),
    (node_affinity::NAME, 2),
    (node_resources_fit::NAME, 1),
    (pod_topology_spread::NAME, 2),
    (inter_pod_affinity::NAME, 2),
    (dynamic_resources::NAME, 1),
    (balanced_allocation::NAME, 1),
    (image_locality::NAME, 1),
];

/// PostFilter plugins of kube-scheduler's default profile, in order.
pub const DEFAULT_POST_FILTERS: &[&str] = &[dynamic_resources::NAME, preemption::NAME];

/// Reserve plugins of kube-scheduler's default profile that this scheduler runs, in order.
pub const DEFAULT_RESERVES: &[&str] = &[volume_binding::NAME, dynamic_resources::NAME];

/// PreBind plugins of kube-scheduler's default profile that this scheduler runs, in order.
pub const DEFAULT_PRE_BINDS: &[&str] = &[volume_binding::NAME, dynamic_resources::NAME];

/// Score plugins of our own, off unless a profile enables them.
pub const OPTIONAL_SCORES: &[&str] = &[device_packing::NAME];

/// kube-scheduler plugins that are accepted in configuration without being plugins of
/// this registry: queue sort, binding and gates, which the scheduling loop itself provides.
pub const ACCEPTED_WITHOUT_EFFECT: &[&str] = &["PrioritySort", "SchedulingGates", "DefaultBinder"];

/// Whether a name is a plugin this scheduler implements.
pub fn is_known(name: &str) -> bool {
    DEFAULT_FILTERS.contains(&name) || has_score(name) || has_post_filter(name)
}

/// Whether the plugin has a PostFilter extension point.
pub fn has_post_filter(name: &str) -> bool {
    DEFAULT_POST_FILTERS.contains(&name)
}

/// Whether the plugin has a Filter extension point.
pub fn has_filter(name: &str) -> bool {
    DEFAULT_FILTERS.contains(&name)
}

/// Whether the plugin has a Reserve extension point.
pub fn has_reserve(name: &str) -> bool {
    DEFAULT_RESERVES.contains(&name)
}

/// Whether the plugin has a Permit extension point.
pub fn has_permit(_name: &str) -> bool {
    false
}

/// Whether the plugin has a PreBind extension point.
pub fn has_pre_bind(name: &str) -> bool {
    DEFAULT_PRE_BINDS.contains(&name)
}

/// Whether the plugin has a Score extension point.
pub fn has_score(name: &str) -> bool {
    DEFAULT_SCORES.iter().any(|(n, _)| *n == name) || OPTIONAL_SCORES.contains(&name) || name == volume_binding::NAME
}

/// A plugin built from its args, one object shared by all its roles.
#[derive(Clone, Default)]
pub struct Built {
    /// The filter role, if any.
    pub filter: Option<Arc<dyn FilterPlugin>>,
    /// The score role, if any.
    pub score: Option<Arc<dyn ScorePlugin>>,
    /// The PostFilter role, if any.
    pub post_filter: Option<Arc<dyn PostFilterPlugin>>,
    /// The Reserve role, if any.
    pub reserve: Option<Arc<dyn ReservePlugin>>,
    /// The Permit role, if any.
    pub permit: Option<Arc<dyn PermitPlugin>>,
    /// The PreBind role, if any.
    pub pre_bind: Option<Arc<dyn PreBindPlugin>>,
}

impl Built {
    fn filter(p: impl FilterPlugin + 'static) -> Self {
        Built { filter: Some(Arc::new(p)), ..Default::default() }
    }

    fn score(p: impl ScorePlugin + 'static) -> Self {
        Built { score: Some(Arc::new(p)), ..Default::default() }
    }
}

/// Reads a plugin's args (`apiVersion` and `kind` ignored); none gives the defaults.
pub(crate) fn parse<T: DeserializeOwned + Default>(
    name: &str,
    args: Option<&serde_json::Value>,
) -> Result<T, ArgsError> {
    let Some(v) = args else { return Ok(T::default()) };
    let mut v = v.clone();
    if let Some(obj) = v.as_object_mut() {
        obj.remove("apiVersion");
        obj.remove("kind");
    }
    if v.is_null() {
        return Ok(T::default());
    }
    serde_json::from_value(v).map_err(|e| ArgsError::new(name, e.to_string()))
}

fn both<T: FilterPlugin + ScorePlugin + 'static>(p: T) -> Built {
    let p = Arc::new(p);
    Built { filter: Some(p.clone()), score: Some(p), ..Default::default() }
}

/// Builds a plugin by name with optional args (JSON), under the given feature gates.
pub fn build(name: &str, args: Option<&serde_json::Value>, gates: FeatureGates) -> Result<Built, ArgsError> {
    Ok(match name {
        node_unschedulable::NAME => Built::filter(NodeUnschedulable),
        node_name::NAME => Built::filter(NodeName),
        node_declared_features::NAME => Built::filter(NodeDeclaredFeatures { enabled: gates.node_declared_features }),
        node_ports::NAME => Built::filter(NodePorts),
        taint_toleration::NAME => both(TaintToleration),
        node_affinity::NAME => both(NodeAffinity::new(&parse(name, args)?)),
        node_resources_fit::NAME => {
            both(NodeResourcesFit::new(&parse(name, args)?)?.with_dra_extended(gates.dra_extended_resource))
        }
        pod_topology_spread::NAME => both(PodTopologySpread::new(&parse(name, args)?)?),
        inter_pod_affinity::NAME => both(InterPodAffinity::new(&parse(name, args)?)?),
        balanced_allocation::NAME => Built::score(BalancedAllocation::new(&parse(name, args)?)?),
        volume_restrictions::NAME => Built::filter(VolumeRestrictions),
        node_volume_limits::NAME => Built::filter(NodeVolumeLimits),
        volume_zone::NAME => Built::filter(VolumeZone),
        volume_binding::NAME => {
            let vb = VolumeBinding::new(parse(name, args)?, gates.storage_capacity_scoring);
            let p = Arc::new(vb.map_err(|e| ArgsError::new(name, e))?);
            let score: Option<Arc<dyn ScorePlugin>> = p.shape.is_some().then(|| p.clone() as Arc<dyn ScorePlugin>);
            Built { filter: Some(p.clone()), score, reserve: Some(p.clone()), pre_bind: Some(p), ..Default::default() }
        }
        image_locality::NAME => Built::score(ImageLocality),
        dynamic_resources::NAME => {
            let p = Arc::new(DynamicResources { args: parse(name, args)?, features: gates.dra_features() });
            Built {
                filter: Some(p.clone()),
                score: Some(p.clone()),
                post_filter: Some(p.clone()),
                reserve: Some(p.clone()),
                pre_bind: Some(p),
                ..Default::default()
            }
        }
        preemption::NAME => {
            let args = PreemptionArgs::from_args(args).map_err(|e| ArgsError::new(name, e))?;
            Built { post_filter: Some(Arc::new(DefaultPreemption { args })), ..Default::default() }
        }
        device_packing::NAME => Built::score(DevicePacking::new(&parse(name, args)?)?),
        other => return Err(ArgsError::new(other, "unknown plugin")),
    })
}

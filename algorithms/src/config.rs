//! The `KubeSchedulerConfiguration` (kubescheduler.config.k8s.io/v1) subset this scheduler reads,
//! and how it becomes [`Profile`]s.

use std::collections::HashMap;

use serde::Deserialize;
use thiserror::Error;

pub use crate::extender_config::{ExtenderConfig, ManagedResource};
use crate::features::FeatureGates;
use crate::framework::{Profile, WeightedScore};
use crate::plugins::registry::{self, ACCEPTED_WITHOUT_EFFECT};

/// The scheduler name pods use when none is configured.
pub const DEFAULT_SCHEDULER_NAME: &str = "custom-scheduler";

/// A configuration that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ConfigError {
    /// A plugin name that no extension point knows.
    #[error("profile {profile:?}: unknown plugin {plugin:?} (known: {known})")]
    UnknownPlugin {
        /// Profile.
        profile: String,
        /// The name.
        plugin: String,
        /// Valid names.
        known: String,
    },
    /// Args a plugin rejects.
    #[error("profile {profile:?}: {source}")]
    Args {
        /// Profile.
        profile: String,
        /// The cause.
        #[source]
        source: crate::plugins::ArgsError,
    },
    /// Anything else.
    #[error("{0}")]
    Invalid(String),
}

/// `KubeSchedulerConfiguration`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SchedulerConfiguration {
    /// Must be `kubescheduler.config.k8s.io/v1` when set.
    #[serde(default)]
    pub api_version: Option<String>,
    /// Must be `KubeSchedulerConfiguration` when set.
    #[serde(default)]
    pub kind: Option<String>,
    /// Scheduling profiles; one default profile when empty.
    #[serde(default)]
    pub profiles: Vec<ProfileConfig>,
    /// Global share of nodes to score; unset, 0 (kube-scheduler's "default") and 100
    /// evaluate every node.
    #[serde(default)]
    pub percentage_of_nodes_to_score: Option<u32>,
    /// API client settings.
    #[serde(default)]
    pub client_connection: ClientConnection,
    /// Leader election settings.
    #[serde(default)]
    pub leader_election: LeaderElection,
    /// Initial per-pod backoff in seconds (default 1).
    #[serde(default)]
    pub pod_initial_backoff_seconds: Option<u64>,
    /// Maximum per-pod backoff in seconds (default 10).
    #[serde(default)]
    pub pod_max_backoff_seconds: Option<u64>,
    /// HTTP extenders: `run` calls them; the extender reads its managed resources from here.
    #[serde(default)]
    pub extenders: Vec<ExtenderConfig>,
    /// kube-scheduler's worker count. Accepted as kube-scheduler's files carry it; filtering
    /// and scoring here run on a pool sized by the machine's cores.
    #[serde(default)]
    pub parallelism: Option<i32>,
    /// kube-scheduler's share of pod group placements to evaluate. Accepted; pod groups here
    /// evaluate every placement.
    #[serde(default)]
    pub percentage_of_placements_to_score: Option<i32>,
    /// kube-scheduler's profiling endpoints. Accepted; this scheduler serves none.
    #[serde(default)]
    pub enable_profiling: Option<bool>,
    /// kube-scheduler's lock contention profiling. Accepted; this scheduler serves none.
    #[serde(default)]
    pub enable_contention_profiling: Option<bool>,
    /// kube-scheduler's delayed caches. Accepted; the cache fills before the lease is held.
    #[serde(default)]
    pub delay_cache_until_active: Option<bool>,
    /// The feature gates (a command-line flag, not a field of the file).
    #[serde(skip)]
    pub feature_gates: FeatureGates,
}

/// `clientConnection`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientConnection {
    /// Path of a kubeconfig file.
    #[serde(default)]
    pub kubeconfig: Option<String>,
    /// Sustained queries per second to the API server.
    #[serde(default)]
    pub qps: Option<f32>,
    /// Burst above `qps`.
    #[serde(default)]
    pub burst: Option<u32>,
    /// Accepted content types. Accepted; the client asks for JSON.
    #[serde(default)]
    pub accept_content_types: Option<String>,
    /// Content type of requests. Accepted; the client sends JSON.
    #[serde(default)]
    pub content_type: Option<String>,
}

/// `leaderElection`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaderElection {
    /// Whether to elect a leader.
    #[serde(default)]
    pub leader_elect: Option<bool>,
    /// Lease duration, e.g. `15s`.
    #[serde(default)]
    pub lease_duration: Option<String>,
    /// Renew deadline, e.g. `10s`.
    #[serde(default)]
    pub renew_deadline: Option<String>,
    /// Retry period, e.g. `2s`.
    #[serde(default)]
    pub retry_period: Option<String>,
    /// Lease name.
    #[serde(default)]
    pub resource_name: Option<String>,
    /// Lease namespace.
    #[serde(default)]
    pub resource_namespace: Option<String>,
    /// The lock's kind: `leases`, the only kind kube-scheduler v1.36 accepts.
    #[serde(default)]
    pub resource_lock: Option<String>,
}

/// One profile.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProfileConfig {
    /// The scheduler name (default `custom-scheduler`).
    #[serde(default)]
    pub scheduler_name: Option<String>,
    /// Per-profile share of nodes to score.
    #[serde(default)]
    pub percentage_of_nodes_to_score: Option<u32>,
    /// Per-profile share of pod group placements to evaluate. Accepted; pod groups here
    /// evaluate every placement.
    #[serde(default)]
    pub percentage_of_placements_to_score: Option<i32>,
    /// Plugin sets per extension point.
    #[serde(default)]
    pub plugins: Plugins,
    /// Plugin args.
    #[serde(default)]
    pub plugin_config: Vec<PluginConfig>,
}

/// `plugins`: every extension point of kube-scheduler's `Plugins`. This scheduler acts on
/// `multiPoint`, `preFilter`, `filter`, `postFilter`, `score`, `reserve`, `permit`,
/// `preBind` and `placementScore`; the others are validated for plugin names only.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Plugins {
    /// Applies to every extension point a plugin implements.
    #[serde(default)]
    pub multi_point: PluginSet,
    /// PreEnqueue.
    #[serde(default)]
    pub pre_enqueue: PluginSet,
    /// QueueSort.
    #[serde(default)]
    pub queue_sort: PluginSet,
    /// PreFilter.
    #[serde(default)]
    pub pre_filter: PluginSet,
    /// Filter.
    #[serde(default)]
    pub filter: PluginSet,
    /// PostFilter.
    #[serde(default)]
    pub post_filter: PluginSet,
    /// PreScore.
    #[serde(default)]
    pub pre_score: PluginSet,
    /// Score.
    #[serde(default)]
    pub score: PluginSet,
    /// Reserve.
    #[serde(default)]
    pub reserve: PluginSet,
    /// Permit.
    #[serde(default)]
    pub permit: PluginSet,
    /// PreBind.
    #[serde(default)]
    pub pre_bind: PluginSet,
    /// Bind.
    #[serde(default)]
    pub bind: PluginSet,
    /// PostBind.
    #[serde(default)]
    pub post_bind: PluginSet,
    /// PlacementGenerate (pod groups).
    #[serde(default)]
    pub placement_generate: PluginSet,
    /// PlacementScore (pod groups).
    #[serde(default)]
    pub placement_score: PluginSet,
    /// PlacementFeasible (pod groups).
    #[serde(default)]
    pub placement_feasible: PluginSet,
    /// PodGroupPostFilter (pod groups).
    #[serde(default)]
    pub pod_group_post_filter: PluginSet,
}

impl Plugins {
    /// Every extension point but `multiPoint`, with its name in the configuration.
    pub fn points(&self) -> [(&'static str, &PluginSet); 16] {
        [
            ("preEnqueue", &self.pre_enqueue),
            ("queueSort", &self.queue_sort),
            ("preFilter", &self.pre_filter),
            ("filter", &self.filter),
            ("postFilter", &self.post_filter),
            ("preScore", &self.pre_score),
            ("score", &self.score),
            ("reserve", &self.reserve),
            ("permit", &self.permit),
            ("preBind", &self.pre_bind),
            ("bind", &self.bind),
            ("postBind", &self.post_bind),
            ("placementGenerate", &self.placement_generate),
            ("placementScore", &self.placement_score),
            ("placementFeasible", &self.placement_feasible),
            ("podGroupPostFilter", &self.pod_group_post_filter),
        ]
    }
}

/// Enabled and disabled plugins of one extension point.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginSet {
    /// Plugins to add (with weights for scores).
    #[serde(default)]
    pub enabled: Vec<PluginRef>,
    /// Plugins to remove; `*` removes every default.
    #[serde(default)]
    pub disabled: Vec<PluginRef>,
}

/// A plugin name with an optional weight.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginRef {
    /// Plugin name.
    pub name: String,
    /// Score weight.
    #[serde(default)]
    pub weight: Option<i64>,
}

/// `pluginConfig` entry.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginConfig {
    /// Plugin name.
    pub name: String,
    /// Args object.
    #[serde(default)]
    pub args: Option<serde_json::Value>,
}

impl SchedulerConfiguration {
    /// Builds every profile (one default profile named `custom-scheduler` when none is listed).
    pub fn build_profiles(&self) -> Result<Vec<Profile>, ConfigError> {
        self.build_profiles_with(false)
    }

    /// The resources the extenders mark `ignoredByScheduler`.
    pub fn extender_ignored_resources(&self) -> Vec<String> {
        let managed = self.extenders.iter().flat_map(|e| &e.managed_resources);
        managed.filter(|m| m.ignored_by_scheduler).map(|m| m.name.clone()).collect()
    }

    /// Builds every profile; with `extenders_called` (the scheduler calls the extenders),
    /// NodeResourcesFit leaves out the resources the extenders mark `ignoredByScheduler`,
    /// replacing its `ignoredResources` as kube-scheduler does.
    pub fn build_profiles_with(&self, extenders_called: bool) -> Result<Vec<Profile>, ConfigError> {
        crate::extender_config::validate_extenders(&self.extenders).map_err(ConfigError::Invalid)?;
        let ignored = if extenders_called { self.extender_ignored_resources() } else { Vec::new() };
        if let Some(v) = &self.api_version
            && v != "kubescheduler.config.k8s.io/v1"
        {
            return Err(ConfigError::Invalid(format!("apiVersion {v:?} is not kubescheduler.config.k8s.io/v1")));
        }
        if let Some(lock) = &self.leader_election.resource_lock
            && lock != "leases"
        {
            return Err(ConfigError::Invalid(format!("leaderElection.resourceLock {lock:?} is not \"leases\"")));
        }
        if let Some(k) = &self.kind
            && k != "KubeSchedulerConfiguration"
        {
            return Err(ConfigError::Invalid(format!("kind {k:?} is not KubeSchedulerConfiguration")));
        }
        let defaults = [ProfileConfig::default()];
        let profiles = if self.profiles.is_empty() { &defaults[..] } else { &self.profiles[..] };
        let mut out: Vec<Profile> = Vec::new();
        for p in profiles {
            let built = build_profile(p, self.percentage_of_nodes_to_score, self.feature_gates, &ignored)?;
            if out.iter().any(|o| o.scheduler_name == built.scheduler_name) {
                return Err(ConfigError::Invalid(format!("duplicate profile {:?}", built.scheduler_name)));
            }
            out.push(built);
        }
        Ok(out)
    }
}

/// The default profile, as kube-scheduler's, under the given scheduler name.
pub fn default_profile(scheduler_name: &str) -> Profile {
    default_profile_with(scheduler_name, FeatureGates::default())
}

/// The default profile under the given feature gates.
pub fn default_profile_with(scheduler_name: &str, gates: FeatureGates) -> Profile {
    let cfg = ProfileConfig { scheduler_name: Some(scheduler_name.to_string()), ..Default::default() };
    build_profile(&cfg, None, gates, &[])
        .unwrap_or_else(|_| Profile { scheduler_name: scheduler_name.to_string(), ..Default::default() })
}

fn check_name(profile: &str, name: &str) -> Result<(), ConfigError> {
    let placement = crate::placement::PLACEMENT_SCORES.contains(&name);
    if name == "*" || registry::is_known(name) || ACCEPTED_WITHOUT_EFFECT.contains(&name) || placement {
        return Ok(());
    }
    let mut known: Vec<&str> = registry::names();
    known.extend(crate::placement::PLACEMENT_SCORES.iter().filter(|n| !registry::is_known(n)));
    Err(ConfigError::UnknownPlugin { profile: profile.into(), plugin: name.into(), known: known.join(", ") })
}

fn apply(list: &mut Vec<(String, i64)>, set: &PluginSet, fits: fn(&str) -> bool) {
    for d in &set.disabled {
        if d.name == "*" {
            list.clear();
        } else {
            list.retain(|(n, _)| *n != d.name);
        }
    }
    for e in &set.enabled {
        if !fits(&e.name) {
            continue;
        }
        // An explicitly enabled score plugin without a weight counts 1, as in kube-scheduler.
        let weight = e.weight.filter(|w| *w != 0).unwrap_or(1);
        match list.iter().position(|(n, _)| *n == e.name) {
            Some(i) => list[i].1 = weight,
            None => list.push((e.name.clone(), weight)),
        }
    }
}

/// Plugins only a `placementScore` stanza may name, named elsewhere; and plugins named in
/// `placementScore` that have no placement score.
fn check_placement_names(profile: &str, plugins: &Plugins) -> Result<(), ConfigError> {
    use crate::placement::{NODE_RESOURCES_FIT, PLACEMENT_SCORES};
    let only_placement = |n: &str| PLACEMENT_SCORES.contains(&n) && n != NODE_RESOURCES_FIT;
    for (point, set) in std::iter::once(("multiPoint", &plugins.multi_point)).chain(plugins.points()) {
        for r in &set.enabled {
            let wrong = if point == "placementScore" {
                r.name != "*" && !PLACEMENT_SCORES.contains(&r.name.as_str())
            } else {
                only_placement(&r.name)
            };
            if wrong {
                return Err(ConfigError::Invalid(format!(
                    "profile {profile:?}: plugin {} has no {point} extension point",
                    r.name
                )));
            }
        }
    }
    Ok(())
}

/// The profile's placementScore plugins: `TightestFit` and `PodGroupPodsCount` unless the
/// stanza says otherwise;
/// `NodeResourcesFit` packs the resources of its own `scoringStrategy.resources`.
fn placement_scores(
    profile: &str,
    set: &PluginSet,
    fit_args: Option<&serde_json::Value>,
) -> Result<Vec<crate::placement::WeightedPlacementScore>, ConfigError> {
    use crate::placement::{PLACEMENT_SCORES, PlacementScorer, TIGHTEST_FIT, WeightedPlacementScore};
    let mut list: Vec<(String, i64)> =
        crate::placement::default_placement_scores().iter().map(|w| (w.scorer.name().to_string(), w.weight)).collect();
    apply(&mut list, set, |n| PLACEMENT_SCORES.contains(&n));
    let mut out = Vec::new();
    for (n, weight) in list {
        if !(1..=100).contains(&weight) {
            return Err(ConfigError::Invalid(format!(
                "profile {profile:?}: placementScore plugin {n} weight {weight} must be in 1..=100"
            )));
        }
        let scorer = match n.as_str() {
            TIGHTEST_FIT => PlacementScorer::TightestFit,
            crate::placement::POD_GROUP_PODS_COUNT => PlacementScorer::PodGroupPodsCount,
            _ => {
                use crate::plugins::node_resources_fit::{NAME, NodeResourcesFitArgs, checked_resources};
                let to_config = |source| ConfigError::Args { profile: profile.to_string(), source };
                let args: NodeResourcesFitArgs = crate::plugins::roles::parse(NAME, fit_args).map_err(to_config)?;
                let resources = args.scoring_strategy.map(|s| s.resources).unwrap_or_default();
                let resources = checked_resources(resources, "scoringStrategy.resources").map_err(to_config)?;
                PlacementScorer::NodeResourcesFit(resources.into_iter().map(|r| (r.name, r.weight)).collect())
            }
        };
        out.push(WeightedPlacementScore { scorer, weight });
    }
    Ok(out)
}

fn build_profile(
    p: &ProfileConfig,
    global_pct: Option<u32>,
    gates: FeatureGates,
    ignored: &[String],
) -> Result<Profile, ConfigError> {
    let name = p.scheduler_name.clone().unwrap_or_else(|| DEFAULT_SCHEDULER_NAME.to_string());
    let points = p.plugins.points().map(|(_, set)| set);
    for set in std::iter::once(&p.plugins.multi_point).chain(points) {
        for r in set.enabled.iter().chain(&set.disabled) {
            check_name(&name, &r.name)?;
        }
    }
    check_placement_names(&name, &p.plugins)?;
    let d = registry::defaults(gates);
    let named = |list: &[&str]| -> Vec<(String, i64)> { list.iter().map(|n| (n.to_string(), 0)).collect() };
    let mut filters = named(&d.filters);
    let mut scores: Vec<(String, i64)> = d.scores.iter().map(|(n, w)| (n.to_string(), *w)).collect();
    let mut reserves = named(&d.reserves);
    let mut permits = named(&d.permits);
    let mut pre_binds = named(&d.pre_binds);
    let mut post_filters = named(&d.post_filters);
    for (list, set, fits) in [
        (&mut reserves, &p.plugins.reserve, registry::has_reserve as fn(&str) -> bool),
        (&mut permits, &p.plugins.permit, registry::has_permit),
        (&mut pre_binds, &p.plugins.pre_bind, registry::has_pre_bind),
        (&mut post_filters, &p.plugins.post_filter, registry::has_post_filter),
    ] {
        apply(list, &p.plugins.multi_point, fits);
        apply(list, set, fits);
    }
    apply(&mut filters, &p.plugins.multi_point, registry::has_filter);
    apply(&mut scores, &p.plugins.multi_point, registry::has_score);
    apply(&mut filters, &p.plugins.filter, registry::has_filter);
    // PreFilter and Filter are one role here: a plugin enabled at preFilter alone (as
    // scheduler-plugins' configurations enable CapacityScheduling) runs.
    let pre_filter = PluginSet { enabled: p.plugins.pre_filter.enabled.clone(), ..Default::default() };
    apply(&mut filters, &pre_filter, registry::has_filter);
    apply(&mut scores, &p.plugins.score, registry::has_score);
    for (n, w) in &scores {
        if !(1..=100).contains(w) {
            return Err(ConfigError::Invalid(format!(
                "profile {name:?}: score plugin {n} weight {w} must be in 1..=100"
            )));
        }
    }
    let mut args: HashMap<&str, &serde_json::Value> = HashMap::new();
    for pc in &p.plugin_config {
        check_name(&name, &pc.name)?;
        if args.insert(pc.name.as_str(), pc.args.as_ref().unwrap_or(&serde_json::Value::Null)).is_some() {
            return Err(ConfigError::Invalid(format!("profile {name:?}: pluginConfig lists {} twice", pc.name)));
        }
    }
    let fit = crate::plugins::node_resources_fit::NAME;
    let fit_args = (!ignored.is_empty()).then(|| {
        let mut v = match args.get(fit) {
            Some(serde_json::Value::Object(m)) => serde_json::Value::Object(m.clone()),
            _ => serde_json::json!({}),
        };
        v["ignoredResources"] = serde_json::json!(ignored);
        v
    });
    if let Some(v) = &fit_args {
        args.insert(fit, v);
    }
    let placement_scores = placement_scores(&name, &p.plugins.placement_score, args.get(fit).copied())?;
    let mut cache: HashMap<String, crate::plugins::roles::Built> = HashMap::new();
    let mut get = |n: &str| -> Result<crate::plugins::roles::Built, ConfigError> {
        if let Some(b) = cache.get(n) {
            return Ok(b.clone());
        }
        let b = registry::build(n, args.get(n).copied(), gates)
            .map_err(|source| ConfigError::Args { profile: name.clone(), source })?;
        cache.insert(n.to_string(), b.clone());
        Ok(b)
    };
    // Args of configured plugins are validated even when the plugin is disabled.
    for pc in &p.plugin_config {
        if registry::is_known(&pc.name) {
            get(&pc.name)?;
        }
    }
    let mut profile = Profile {
        scheduler_name: name.clone(),
        filters: Vec::new(),
        scores: Vec::new(),
        percentage_of_nodes_to_score: p.percentage_of_nodes_to_score.or(global_pct),
        placement_scores,
        ..Default::default()
    };
    for (n, _) in &filters {
        if let Some(f) = get(n)?.filter {
            profile.filters.push(f);
        }
    }
    for (n, _) in &post_filters {
        profile.post_filters.extend(get(n)?.post_filter);
    }
    for (n, _) in &reserves {
        profile.reserves.extend(get(n)?.reserve);
    }
    for (n, _) in &permits {
        profile.permits.extend(get(n)?.permit);
    }
    for (n, _) in &pre_binds {
        profile.pre_binds.extend(get(n)?.pre_bind);
    }
    for (n, w) in &scores {
        if let Some(s) = get(n)?.score {
            profile.scores.push(WeightedScore { plugin: s, weight: *w });
        }
    }
    Ok(profile)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(v: serde_json::Value) -> SchedulerConfiguration {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn default_profile_matches_kube_scheduler() {
        let p = default_profile("custom-scheduler");
        let filters: Vec<&str> = p.filters.iter().map(|f| f.name()).collect();
        assert_eq!(
            filters,
            vec![
                "NodeUnschedulable",
                "NodeName",
                "TaintToleration",
                "NodeAffinity",
                "NodePorts",
                "NodeResourcesFit",
                "VolumeRestrictions",
                "NodeVolumeLimits",
                "VolumeBinding",
                "VolumeZone",
                "PodTopologySpread",
                "InterPodAffinity",
                "DynamicResources",
                "NodeDeclaredFeatures"
            ]
        );
        let scores: Vec<(&str, i64)> = p.scores.iter().map(|s| (s.plugin.name(), s.weight)).collect();
        assert_eq!(
            scores,
            vec![
                ("TaintToleration", 3),
                ("NodeAffinity", 2),
                ("NodeResourcesFit", 1),
                ("PodTopologySpread", 2),
                ("InterPodAffinity", 2),
                ("DynamicResources", 2),
                ("NodeResourcesBalancedAllocation", 1),
                ("ImageLocality", 1)
            ]
        );
    }

    #[test]
    fn plugins_can_be_disabled_reweighted_and_configured() {
        let c = cfg(serde_json::json!({
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [{
                "schedulerName": "bin-packer",
                "plugins": {
                    "score": {"disabled": [{"name": "ImageLocality"}], "enabled": [{"name": "NodeResourcesFit", "weight": 5}]},
                    "multiPoint": {"disabled": [{"name": "NodePorts"}]},
                    "preFilter": {"disabled": [{"name": "VolumeBinding"}]}
                },
                "pluginConfig": [{"name": "NodeResourcesFit", "args": {
                    "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "NodeResourcesFitArgs",
                    "scoringStrategy": {"type": "MostAllocated"}
                }}]
            }]
        }));
        let p = c.build_profiles().unwrap().remove(0);
        assert_eq!(p.scheduler_name, "bin-packer");
        assert!(p.filters.iter().all(|f| f.name() != "NodePorts"));
        assert!(p.scores.iter().all(|s| s.plugin.name() != "ImageLocality"));
        assert!(p.scores.iter().any(|s| s.plugin.name() == "NodeResourcesFit" && s.weight == 5));
    }

    #[test]
    fn a_plugin_enabled_at_pre_filter_alone_runs_as_scheduler_plugins_configures_quotas() {
        let filters = |p: &Profile| p.filters.iter().map(|f| f.name()).collect::<Vec<_>>();
        assert!(!filters(&default_profile("s")).contains(&"CapacityScheduling"), "not in the default profile");
        let c = cfg(serde_json::json!({"profiles": [{"plugins": {
            "preFilter": {"enabled": [{"name": "CapacityScheduling"}]},
            "reserve": {"enabled": [{"name": "CapacityScheduling"}]}
        }}]}));
        let p = c.build_profiles().unwrap().remove(0);
        assert_eq!(filters(&p).last(), Some(&"CapacityScheduling"), "after the default PreFilters");
        assert_eq!(filters(&p).len(), filters(&default_profile("s")).len() + 1);
    }

    #[test]
    fn default_preemption_can_be_tuned_and_disabled() {
        let post_filters = |p: &Profile| p.post_filters.iter().map(|f| f.name()).collect::<Vec<_>>();
        assert_eq!(post_filters(&default_profile("s")), ["DynamicResources", "DefaultPreemption"]);
        let c = cfg(serde_json::json!({"profiles": [{"pluginConfig": [{"name": "DefaultPreemption",
            "args": {"minCandidateNodesPercentage": 40, "minCandidateNodesAbsolute": 2}}]}]}));
        let p = c.build_profiles().unwrap().remove(0);
        assert_eq!(post_filters(&p), ["DynamicResources", "DefaultPreemption"]);
        for (plugins, left) in [
            (
                serde_json::json!({"postFilter": {"disabled": [{"name": "DefaultPreemption"}]}}),
                vec!["DynamicResources"],
            ),
            (serde_json::json!({"multiPoint": {"disabled": [{"name": "*"}]}}), vec![]),
        ] {
            let c = cfg(serde_json::json!({"profiles": [{"plugins": plugins}]}));
            assert_eq!(post_filters(&c.build_profiles().unwrap().remove(0)), left, "{plugins}");
        }
        let c = cfg(serde_json::json!({"profiles": [{"pluginConfig": [{"name": "DefaultPreemption",
            "args": {"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0}}]}]}));
        let err = c.build_profiles().unwrap_err().to_string();
        assert!(err.contains("cannot be zero at the same time"), "{err}");
    }

    #[test]
    fn star_disables_every_default() {
        let c = cfg(
            serde_json::json!({"profiles": [{"plugins": {"score": {"disabled": [{"name": "*"}], "enabled": [{"name": "ImageLocality"}]}}}]}),
        );
        let p = c.build_profiles().unwrap().remove(0);
        assert_eq!(p.scores.len(), 1);
        assert_eq!(p.filters.len(), 14);
    }

    #[test]
    fn unknown_plugins_and_bad_args_are_clear_errors() {
        let c = cfg(serde_json::json!({"profiles": [{"plugins": {"filter": {"enabled": [{"name": "NodeMagic"}]}}}]}));
        let err = c.build_profiles().unwrap_err().to_string();
        assert!(err.contains("NodeMagic") && err.contains("unknown plugin"), "{err}");
        // The known plugins, each once.
        let known: Vec<&str> = err.split("(known: ").nth(1).unwrap().trim_end_matches(')').split(", ").collect();
        let mut unique = known.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), known.len(), "{err}");
        assert!(known.contains(&"NodeResourcesFit") && known.contains(&"CapacityScheduling"), "{err}");
        let c = cfg(
            serde_json::json!({"profiles": [{"pluginConfig": [{"name": "InterPodAffinity", "args": {"hardPodAffinityWeight": 500}}]}]}),
        );
        assert!(c.build_profiles().unwrap_err().to_string().contains("hardPodAffinityWeight"));
        let c = cfg(
            serde_json::json!({"profiles": [{"pluginConfig": [{"name": "NodeResourcesFit", "args": {"bogus": 1}}]}]}),
        );
        assert!(c.build_profiles().unwrap_err().to_string().contains("bogus"));
        let c = cfg(serde_json::json!({"apiVersion": "v2"}));
        assert!(c.build_profiles().is_err());
    }

    #[test]
    fn device_packing_is_off_by_default_and_enabled_by_name_with_args() {
        let names = |p: &Profile| p.scores.iter().map(|s| s.plugin.name()).collect::<Vec<_>>();
        let default = cfg(serde_json::json!({})).build_profiles().unwrap().remove(0);
        assert!(!names(&default).contains(&"DevicePacking"));
        let c = cfg(serde_json::json!({"profiles": [{
            "plugins": {"score": {"enabled": [{"name": "DevicePacking", "weight": 20}]}},
            "pluginConfig": [{"name": "DevicePacking", "args": {"resources": [{"name": "example.com/fpga"}]}}]
        }]}));
        let p = c.build_profiles().unwrap().remove(0);
        let packing = p.scores.iter().find(|s| s.plugin.name() == "DevicePacking").unwrap();
        assert_eq!(packing.weight, 20);
        assert_eq!(p.scores.len(), 9);
        let c = cfg(serde_json::json!({"profiles": [{
            "plugins": {"multiPoint": {"enabled": [{"name": "DevicePacking"}]}},
            "pluginConfig": [{"name": "DevicePacking", "args": {"resources": [{"name": "memory"}]}}]
        }]}));
        assert!(c.build_profiles().unwrap_err().to_string().contains("not an extended resource"));
    }

    #[test]
    fn binding_roles_follow_their_extension_points() {
        let names = |p: &Profile| {
            let reserves: Vec<&str> = p.reserves.iter().map(|r| r.name()).collect();
            let pre_binds: Vec<&str> = p.pre_binds.iter().map(|r| r.name()).collect();
            (reserves, pre_binds, p.permits.len())
        };
        let both = || vec!["VolumeBinding", "DynamicResources"];
        assert_eq!(names(&default_profile("s")), (both(), both(), 0));
        let c =
            cfg(serde_json::json!({"profiles": [{"plugins": {"preBind": {"disabled": [{"name": "VolumeBinding"}]}}}]}));
        assert_eq!(names(&c.build_profiles().unwrap()[0]), (both(), vec!["DynamicResources"], 0));
        let c = cfg(serde_json::json!({"profiles": [{"plugins": {"multiPoint": {"disabled": [{"name": "*"}]},
            "reserve": {"enabled": [{"name": "VolumeBinding"}]}}}]}));
        let p = c.build_profiles().unwrap().remove(0);
        assert_eq!(names(&p), (vec!["VolumeBinding"], vec![], 0));
        assert!(p.filters.is_empty());
        // The plugin's args reach its PreBind.
        let c = cfg(serde_json::json!({"profiles": [{"pluginConfig": [{"name": "VolumeBinding",
            "args": {"bindTimeoutSeconds": 7}}]}]}));
        let p = c.build_profiles().unwrap().remove(0);
        assert_eq!(p.pre_binds[0].timeout(), std::time::Duration::from_secs(7));
    }

    #[test]
    fn duplicate_profiles_are_rejected() {
        let c = cfg(serde_json::json!({"profiles": [{"schedulerName": "a"}, {"schedulerName": "a"}]}));
        assert!(c.build_profiles().is_err());
    }

    #[test]
    fn resources_extenders_mark_ignored_leave_node_resources_fit_when_the_extenders_are_called() {
        use crate::builders::{NodeBuilder, PodBuilder, snapshot};
        let c = cfg(serde_json::json!({
            "extenders": [{"urlPrefix": "http://e", "filterVerb": "filter",
                "managedResources": [{"name": "example.com/gpu", "ignoredByScheduler": true}]}],
            "profiles": [{"schedulerName": "s", "pluginConfig": [{"name": "NodeResourcesFit",
                "args": {"ignoredResources": ["example.com/other"]}}]}]
        }));
        assert_eq!(c.extender_ignored_resources(), vec!["example.com/gpu".to_string()]);
        let snap = snapshot(&[NodeBuilder::new("n").build()], &[]);
        let pod = PodBuilder::new("p").device("example.com/gpu", "1").info();
        let fits = |called: bool| {
            let profile = c.build_profiles_with(called).unwrap().remove(0);
            let mut rng = <rand::rngs::SmallRng as rand::SeedableRng>::seed_from_u64(1);
            crate::framework::evaluate(&profile, &pod, &snap, &mut rng, Default::default()).selected.is_some()
        };
        // The extender checks the devices; the scheduler does not.
        assert!(fits(true));
        // simulate, explain and the extender itself check them.
        assert!(!fits(false));
    }
}

#[cfg(test)]
mod placement_config_tests {
    use super::*;
    use crate::placement::{PlacementScorer, WeightedPlacementScore};

    fn profile(plugins: serde_json::Value) -> Result<Profile, ConfigError> {
        let c: SchedulerConfiguration = serde_json::from_value(serde_json::json!({
            "profiles": [{"schedulerName": "custom-scheduler", "plugins": plugins, "pluginConfig": [{
                "name": "NodeResourcesFit",
                "args": {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "NodeResourcesFitArgs",
                         "scoringStrategy": {"type": "LeastAllocated",
                                             "resources": [{"name": "nvidia.com/gpu", "weight": 3}]}}
            }]}]
        }))
        .unwrap();
        c.build_profiles().map(|mut p| p.remove(0))
    }

    fn ws(scorer: PlacementScorer, weight: i64) -> WeightedPlacementScore {
        WeightedPlacementScore { scorer, weight }
    }

    #[test]
    fn tightest_fit_and_the_pod_count_are_the_default_placement_scores() {
        let default = vec![ws(PlacementScorer::TightestFit, 1), ws(PlacementScorer::PodGroupPodsCount, 1)];
        assert_eq!(default_profile("x").placement_scores, default);
        // kube-scheduler's own file lists an empty stanza: the default stays.
        let p = profile(serde_json::json!({"placementScore": {}})).unwrap();
        assert_eq!(p.placement_scores, default);
    }

    #[test]
    fn kube_schedulers_placement_scores_replace_or_join_the_default() {
        let gpu = vec![("nvidia.com/gpu".to_string(), 3)];
        let p = profile(serde_json::json!({"placementScore": {
            "disabled": [{"name": "*"}],
            "enabled": [{"name": "NodeResourcesFit", "weight": 2}, {"name": "PodGroupPodsCount"}]
        }}))
        .unwrap();
        assert_eq!(
            p.placement_scores,
            vec![ws(PlacementScorer::NodeResourcesFit(gpu), 2), ws(PlacementScorer::PodGroupPodsCount, 1)]
        );
        let p = profile(serde_json::json!({"placementScore": {
            "disabled": [{"name": "TightestFit"}],
            "enabled": [{"name": "PodGroupPodsCount", "weight": 5}]
        }}))
        .unwrap();
        assert_eq!(p.placement_scores, vec![ws(PlacementScorer::PodGroupPodsCount, 5)]);
        // NodeResourcesFit keeps its pod scores when it also scores placements.
        assert!(p.scores.iter().any(|s| s.plugin.name() == "NodeResourcesFit"));
    }

    #[test]
    fn placement_scores_are_checked_by_name_point_and_weight() {
        let err = profile(serde_json::json!({"placementScore": {"enabled": [{"name": "NodeAffinity"}]}}))
            .unwrap_err()
            .to_string();
        assert!(err.contains("NodeAffinity has no placementScore extension point"), "{err}");
        let err =
            profile(serde_json::json!({"score": {"enabled": [{"name": "TightestFit"}]}})).unwrap_err().to_string();
        assert!(err.contains("TightestFit has no score extension point"), "{err}");
        let err =
            profile(serde_json::json!({"placementScore": {"enabled": [{"name": "PodGroupPodsCount", "weight": 101}]}}))
                .unwrap_err()
                .to_string();
        assert!(err.contains("placementScore plugin PodGroupPodsCount weight 101"), "{err}");
        let err =
            profile(serde_json::json!({"placementScore": {"enabled": [{"name": "Bogus"}]}})).unwrap_err().to_string();
        assert!(err.contains("Bogus") && err.contains("PodGroupPodsCount"), "{err}");
    }
}

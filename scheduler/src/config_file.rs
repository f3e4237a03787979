//! Reading a `KubeSchedulerConfiguration` file (YAML or JSON).

use std::path::Path;

use algorithms::Profile;
use algorithms::config::{ConfigError, DEFAULT_SCHEDULER_NAME, SchedulerConfiguration, default_profile_with};
use algorithms::features::FeatureGates;
use thiserror::Error;

/// A configuration file that cannot be used.
#[derive(Debug, Error)]
pub enum ConfigFileError {
    /// Unreadable file.
    #[error("failed to read {path}")]
    Read {
        /// Path.
        path: String,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// Not valid YAML/JSON or wrong types.
    #[error("failed to parse {path}: {message}")]
    Parse {
        /// Path.
        path: String,
        /// What is wrong, with the field path.
        message: String,
    },
    /// Semantically invalid.
    #[error("invalid configuration {path}")]
    Invalid {
        /// Path.
        path: String,
        /// Cause.
        #[source]
        source: ConfigError,
    },
}

/// Parses configuration text strictly, as kube-scheduler does: a field it does not know,
/// anywhere in the file, is an error naming every such field.
pub fn parse(text: &str, path: &str) -> Result<SchedulerConfiguration, ConfigFileError> {
    let mut unknown = Vec::new();
    let de = serde_yaml::Deserializer::from_str(text);
    let mut note = |field: serde_ignored::Path<'_>| unknown.push(kube_path(&field));
    let parsed: Result<SchedulerConfiguration, _> =
        serde_path_to_error::deserialize(serde_ignored::Deserializer::new(de, &mut note));
    let cfg = parsed.map_err(|e| ConfigFileError::Parse {
        path: path.into(),
        message: format!("field {}: {}", e.path(), e.inner()),
    })?;
    if unknown.is_empty() {
        return Ok(cfg);
    }
    unknown.sort();
    let fields: Vec<String> = unknown.iter().map(|f| format!("unknown field {f:?}")).collect();
    Err(ConfigFileError::Parse { path: path.into(), message: format!("strict decoding error: {}", fields.join(", ")) })
}

/// A field's path as kube-scheduler names it: `profiles[0].plugins.score.enabeld`.
fn kube_path(path: &serde_ignored::Path<'_>) -> String {
    use serde_ignored::Path;
    match path {
        Path::Root => String::new(),
        Path::Seq { parent, index } => format!("{}[{index}]", kube_path(parent)),
        Path::Map { parent, key } => match kube_path(parent) {
            p if p.is_empty() => key.clone(),
            p => format!("{p}.{key}"),
        },
        Path::Some { parent } | Path::NewtypeStruct { parent } | Path::NewtypeVariant { parent } => kube_path(parent),
    }
}

/// Reads a configuration file.
pub fn load(path: &Path) -> Result<SchedulerConfiguration, ConfigFileError> {
    let p = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| ConfigFileError::Read { path: p.clone(), source })?;
    parse(&text, &p)
}

/// Profiles from an optional configuration file under the given feature gates; the
/// default profile without one.
pub fn profiles(
    path: Option<&Path>,
    gates: FeatureGates,
) -> Result<(SchedulerConfiguration, Vec<Profile>), ConfigFileError> {
    profiles_with(path, gates, false)
}

/// [`profiles`] for a caller that calls the configured extenders (`run`): NodeResourcesFit
/// then leaves out the resources they mark `ignoredByScheduler`.
pub fn profiles_with(
    path: Option<&Path>,
    gates: FeatureGates,
    extenders_called: bool,
) -> Result<(SchedulerConfiguration, Vec<Profile>), ConfigFileError> {
    let Some(path) = path else {
        let cfg = SchedulerConfiguration { feature_gates: gates, ..Default::default() };
        return Ok((cfg, vec![default_profile_with(DEFAULT_SCHEDULER_NAME, gates)]));
    };
    let mut cfg = load(path)?;
    cfg.feature_gates = gates;
    let profiles = cfg
        .build_profiles_with(extenders_called)
        .map_err(|source| ConfigFileError::Invalid { path: path.display().to_string(), source })?;
    Ok((cfg, profiles))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_configuration_with_plugin_args() {
        let text = r#"
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: custom-scheduler
    pluginConfig:
      - name: NodeResourcesFit
        args:
          scoringStrategy:
            type: MostAllocated
            resources:
              - name: cpu
                weight: 1
              - name: nvidia.com/gpu
                weight: 5
"#;
        let cfg = parse(text, "c.yaml").unwrap();
        let profiles = cfg.build_profiles().unwrap();
        assert_eq!(profiles[0].scheduler_name, "custom-scheduler");
    }

    /// kube-scheduler v1.36.2 refuses this file with the same list, in the same order
    /// (`kube_config.rs` runs it on the file).
    #[test]
    fn every_unknown_field_is_named_as_kube_scheduler_names_it() {
        let text = "percentageOfNodesToScor: 50
profile: [{schedulerName: x}]
profiles:
  - pluginConfg: []
    plugins:
      score: {enabeld: [{name: ImageLocality}]}
      prefilter: {}
clientConnection: {qpss: 5}
extenders: [{urlPrefix: http://x, filterVerbb: filter, tlsConfig: {insecur: true}}]
";
        let err = parse(text, "c.yaml").unwrap_err().to_string();
        let want = [
            "clientConnection.qpss",
            "extenders[0].filterVerbb",
            "extenders[0].tlsConfig.insecur",
            "percentageOfNodesToScor",
            "profile",
            "profiles[0].pluginConfg",
            "profiles[0].plugins.prefilter",
            "profiles[0].plugins.score.enabeld",
        ];
        let list = want.map(|f| format!("unknown field {f:?}")).join(", ");
        assert_eq!(err, format!("failed to parse c.yaml: strict decoding error: {list}"));
    }

    #[test]
    fn every_field_kube_scheduler_knows_is_accepted() {
        let text = "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
parallelism: 16
enableProfiling: true
enableContentionProfiling: true
delayCacheUntilActive: false
percentageOfPlacementsToScore: 0
clientConnection: {acceptContentTypes: '', contentType: application/json, kubeconfig: '', qps: 50, burst: 100}
leaderElection: {leaderElect: true, resourceLock: leases, resourceName: s, resourceNamespace: n,
                 leaseDuration: 15s, renewDeadline: 10s, retryPeriod: 2s}
profiles:
  - schedulerName: custom-scheduler
    percentageOfPlacementsToScore: 0
    plugins:
      preEnqueue: {}
      queueSort: {}
      preFilter: {}
      filter: {}
      postFilter: {}
      preScore: {}
      score: {}
      reserve: {}
      permit: {}
      preBind: {}
      bind: {}
      postBind: {}
      multiPoint: {}
      placementGenerate: {}
      placementScore: {}
      placementFeasible: {}
      podGroupPostFilter: {}
";
        parse(text, "c.yaml").unwrap().build_profiles().unwrap();
    }

    #[test]
    fn type_errors_name_the_field() {
        let err = parse("profiles:\n  - schedulerName: [1]\n", "c.yaml").unwrap_err().to_string();
        assert!(err.contains("profiles[0].schedulerName"), "{err}");
    }
}

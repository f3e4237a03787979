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

/// Parses configuration text.
pub fn parse(text: &str, path: &str) -> Result<SchedulerConfiguration, ConfigFileError> {
    let de = serde_yaml::Deserializer::from_str(text);
    serde_path_to_error::deserialize(de).map_err(|e| ConfigFileError::Parse {
        path: path.into(),
        message: format!("field {}: {}", e.path(), e.inner()),
    })
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

    #[test]
    fn type_errors_name_the_field() {
        let err = parse("profiles:\n  - schedulerName: [1]\n", "c.yaml").unwrap_err().to_string();
        assert!(err.contains("profiles[0].schedulerName"), "{err}");
    }
}

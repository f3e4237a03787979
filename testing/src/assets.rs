//! Finding the control-plane binaries through `KUBE_ASSETS`, as envtest finds its own
//! through `KUBEBUILDER_ASSETS`.

use std::path::{Path, PathBuf};

use crate::HarnessError;

/// The environment variable naming the folder of binaries.
pub const ASSETS_VAR: &str = "KUBE_ASSETS";

/// The binaries every real-API test needs.
const REQUIRED: [&str; 3] = ["etcd", "kube-apiserver", "kube-scheduler"];

/// A folder holding `etcd`, `kube-apiserver` and `kube-scheduler`.
#[derive(Debug, Clone)]
pub struct Assets {
    dir: PathBuf,
}

impl Assets {
    /// The binaries in `dir`, checked to be present.
    pub fn in_dir(dir: impl Into<PathBuf>) -> Result<Assets, HarnessError> {
        let dir = dir.into();
        for name in REQUIRED {
            let path = dir.join(name);
            if !path.is_file() {
                return Err(HarnessError::MissingBinary(path));
            }
        }
        Ok(Assets { dir })
    }

    /// The folder named by `KUBE_ASSETS`; `Ok(None)` when the variable is unset or empty.
    pub fn from_env() -> Result<Option<Assets>, HarnessError> {
        match std::env::var_os(ASSETS_VAR) {
            Some(dir) if !dir.is_empty() => Assets::in_dir(PathBuf::from(dir)).map(Some),
            _ => Ok(None),
        }
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Path of `etcd`.
    pub fn etcd(&self) -> PathBuf {
        self.dir.join("etcd")
    }

    /// Path of `kube-apiserver`.
    pub fn kube_apiserver(&self) -> PathBuf {
        self.dir.join("kube-apiserver")
    }

    /// Path of `kube-scheduler`.
    pub fn kube_scheduler(&self) -> PathBuf {
        self.dir.join("kube-scheduler")
    }

    /// The kube-controller-manager binary.
    pub fn kube_controller_manager(&self) -> PathBuf {
        self.dir.join("kube-controller-manager")
    }
}

/// Whether this is a CI run (`CI=true`), where a missing binary fails instead of skipping.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1")
}

/// The assets for a real-API test, or `None` after printing one line saying why the test
/// is skipped. Under `CI=true` a missing variable or binary fails the test instead.
#[allow(clippy::panic)] // a test helper: failing the test is the point
pub fn assets_or_skip(test: &str) -> Option<Assets> {
    match Assets::from_env() {
        Ok(Some(a)) => Some(a),
        Ok(None) if in_ci() => {
            panic!(
                "{test}: {ASSETS_VAR} is not set under CI=true; .ci/run unpacks the control-plane binaries and sets it"
            )
        }
        Ok(None) => {
            println!(
                "skipping {test}: {ASSETS_VAR} is not set; point it at a folder with etcd, kube-apiserver and \
                 kube-scheduler v1.36.2 (.ci/run unpacks them from shared/k8s, or use the official release archives)"
            );
            None
        }
        Err(e) => panic!("{test}: {e}"),
    }
}

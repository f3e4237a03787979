//! A real control plane for tests and benchmarks: etcd and kube-apiserver started on
//! loopback from the binaries in `KUBE_ASSETS`, kube-scheduler beside them, and helpers
//! that create nodes and pods and wait for what the scheduler does to them.

pub mod api;
pub mod assets;
pub mod backlog;
pub mod bind_watch;
pub mod certs;
pub mod check;
pub mod control_plane;
pub mod dra_backlog;
pub mod kube_scheduler;
pub mod kueue;
pub mod null_binder;
pub mod process;
pub mod server_load;
pub mod sustained;
pub mod tools;

pub use assets::{ASSETS_VAR, Assets, assets_or_skip, in_ci};
pub use control_plane::{ControlPlane, ControlPlaneOptions, free_port};
pub use kube_scheduler::{start_controller_manager, start_kube_scheduler, start_kube_scheduler_with};
pub use process::Process;

use std::path::PathBuf;

use thiserror::Error;

/// Why the control plane could not be started or used.
#[derive(Debug, Error)]
pub enum HarnessError {
    /// A binary is not where `KUBE_ASSETS` says.
    #[error("failed to find {0}: set {ASSETS_VAR} to a folder with etcd, kube-apiserver and kube-scheduler")]
    MissingBinary(PathBuf),
    /// A file or process operation failed.
    #[error("{0}: {1}")]
    Io(String, #[source] std::io::Error),
    /// A certificate could not be made.
    #[error("failed to make a test certificate: {0}")]
    Certificate(String),
    /// A process exited while it was expected to run.
    #[error("{0} exited ({1}); last lines of its log:\n{2}")]
    Exited(String, String, String),
    /// The server did not become ready in time.
    #[error("failed to get ready: {0}; last lines of the log:\n{1}")]
    NotReady(String, String),
    /// The API client could not be built.
    #[error("failed to build an API client: {0}")]
    Client(String),
    /// An API request failed.
    #[error("{0}: {1}")]
    Api(String, #[source] kube::Error),
}

//! Command-line tools some tests use when they are installed: `kubectl`, `helm`, Chromium.

use std::path::PathBuf;
use std::process::Command;

/// The tool named by the environment variable `var` (for example `HELM=/path/to/helm`),
/// else `name` when it runs from `PATH`; `None` (after a line saying so) where neither
/// answers `version_args` successfully.
pub fn find(name: &str, var: &str, version_args: &[&str], test: &str) -> Option<PathBuf> {
    let candidate = std::env::var_os(var).map(PathBuf::from).unwrap_or_else(|| PathBuf::from(name));
    match Command::new(&candidate).args(version_args).output() {
        Ok(out) if out.status.success() => Some(candidate),
        _ => {
            println!("{test}: skipped: {name} is not installed (set {var} or put it on PATH)");
            None
        }
    }
}

//! How kube-scheduler's framework words a plugin's failure at the extension points of the
//! binding cycle: the message of the pod's `PodScheduled` condition and its
//! `FailedScheduling` event.

use crate::status::{Code, Status};

/// A Permit plugin's rejection: an error as `running Permit plugin "P": <error>`, an
/// unschedulable verdict as the plugin gave it.
pub fn permit_rejection(plugin: &str, status: &Status) -> String {
    if status.code == Code::Error {
        format!("running Permit plugin {plugin:?}: {}", status.message())
    } else {
        status.message()
    }
}

/// A Bind plugin's error: `running Bind plugin "P": <error>`.
pub fn bind_error(plugin: &str, error: &str) -> String {
    format!("running Bind plugin {plugin:?}: {error}")
}

/// The plugin that binds when no extender does.
pub const DEFAULT_BINDER: &str = "DefaultBinder";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binding_cycle_failures_are_worded_as_kube_schedulers_framework_words_them() {
        let cases = [
            (permit_rejection("Gang", &Status::error("boom")), "running Permit plugin \"Gang\": boom"),
            (permit_rejection("Gang", &Status::unschedulable("waiting for 3 more")), "waiting for 3 more"),
            (
                bind_error(DEFAULT_BINDER, "pods \"p\" not found"),
                "running Bind plugin \"DefaultBinder\": pods \"p\" not found",
            ),
        ];
        for (got, want) in cases {
            assert_eq!(got, want);
        }
    }
}

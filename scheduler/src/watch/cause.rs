//! Errors of API requests told in one line: what failed, the server it was sent to, and
//! the root cause (`tcp connect error: Connection refused`), each part said once.

use std::error::Error;
use std::sync::OnceLock;

static SERVER: OnceLock<String> = OnceLock::new();

/// Records the API server's address for messages (the first call wins).
pub fn set_server(url: &str) {
    let _ = SERVER.set(url.trim_end_matches('/').to_string());
}

/// The API server's address, once recorded.
pub fn server() -> &'static str {
    SERVER.get().map_or("the API server", String::as_str)
}

/// `error` and its sources, joined with `: `; a source whose text the message already
/// holds (as `ServiceError: client error (Connect)` holds `client error (Connect)`) is
/// left out.
pub fn chain(error: &(dyn Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut next = error.source();
    while let Some(e) = next {
        let part = e.to_string();
        if !part.is_empty() && !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        next = e.source();
    }
    text
}

/// A kube client error in one line: the API server's own message and reason for an API
/// error (not kube's `Debug` dump of the `Status`), the cause chain otherwise.
pub fn api(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(s) if s.reason.is_empty() => format!("{} ({})", s.message, s.code),
        kube::Error::Api(s) => format!("{} ({} {})", s.message, s.code, s.reason),
        other => chain(other),
    }
}

/// [`api`] as a value for logs and messages.
pub struct Told<'a>(pub &'a kube::Error);

impl std::fmt::Display for Told<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&api(self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::{api, chain};

    #[test]
    fn an_api_error_is_its_message_and_reason() {
        let status = kube::core::Status::failure("pods \"p\" is forbidden: no", "Forbidden").with_code(403);
        let told = api(&kube::Error::Api(Box::new(status)));
        assert_eq!(told, "pods \"p\" is forbidden: no (403 Forbidden)");
        assert!(!told.contains("Status {"));
    }

    #[derive(Debug, thiserror::Error)]
    #[error("{0}")]
    struct Layer(&'static str, #[source] Option<Box<Layer>>);

    #[test]
    fn each_cause_is_said_once_outermost_first() {
        let root = Layer("Connection refused (os error 111)", None);
        let connect = Layer("tcp connect error", Some(Box::new(root)));
        let client = Layer("client error (Connect)", Some(Box::new(connect)));
        let top = Layer("ServiceError: client error (Connect)", Some(Box::new(client)));
        assert_eq!(
            chain(&top),
            "ServiceError: client error (Connect): tcp connect error: Connection refused (os error 111)"
        );
    }
}

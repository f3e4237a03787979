//! Plugin results: a code, kube-scheduler's reason strings and an optional human detail.

use std::borrow::Cow;
use std::cell::Cell;

use serde::Serialize;
use smallvec::{SmallVec, smallvec};

/// A status's reasons. Almost every status has exactly one, kept inline: rejecting a
/// node allocates nothing.
pub type Reasons = SmallVec<[Cow<'static, str>; 1]>;

thread_local! {
    static DETAILS: Cell<bool> = const { Cell::new(false) };
}

/// Whether plugins build human detail strings on this thread: off, except while the
/// framework runs the filters of a profile that wants them (the profile's `details`;
/// only `explain` turns it on: building one per rejected node per pod is measurable).
pub fn details_enabled() -> bool {
    DETAILS.with(Cell::get)
}

/// Runs `f` with detail strings on or off on this thread, then restores the setting
/// (also when `f` panics).
pub fn with_details<R>(on: bool, f: impl FnOnce() -> R) -> R {
    if DETAILS.with(Cell::get) == on {
        // The scheduling loop's case: nothing to switch.
        return f();
    }
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            DETAILS.with(|d| d.set(self.0));
        }
    }
    let _restore = Restore(DETAILS.with(|d| d.replace(on)));
    f()
}

/// The outcome class of a plugin call, as kube-scheduler's framework defines them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum Code {
    /// The node passes.
    Success,
    /// An internal error; the pod is retried.
    Error,
    /// The node does not fit now; preemption might help.
    Unschedulable,
    /// The node does not fit and preemption will not help.
    UnschedulableAndUnresolvable,
    /// The plugin has nothing to do for this pod.
    Skip,
}

impl Code {
    /// The name used in JSON output.
    pub fn as_str(&self) -> &'static str {
        match self {
            Code::Success => "Success",
            Code::Error => "Error",
            Code::Unschedulable => "Unschedulable",
            Code::UnschedulableAndUnresolvable => "UnschedulableAndUnresolvable",
            Code::Skip => "Skip",
        }
    }
}

/// A plugin result.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Status {
    /// The code.
    pub code: Code,
    /// Reasons, exactly as kube-scheduler words them.
    pub reasons: Reasons,
    /// Extra detail for people (which taint, how much is missing).
    pub detail: Option<String>,
    /// The plugin that returned it (set by the framework).
    pub plugin: &'static str,
}

impl Status {
    fn with_code(code: Code, reason: impl Into<Cow<'static, str>>) -> Self {
        Status { code, reasons: smallvec![reason.into()], detail: None, plugin: "" }
    }

    /// Success.
    pub const fn success() -> Self {
        Status { code: Code::Success, reasons: SmallVec::new_const(), detail: None, plugin: "" }
    }

    /// Skip: the plugin has nothing to check or score for this pod.
    pub const fn skip() -> Self {
        Status { code: Code::Skip, reasons: SmallVec::new_const(), detail: None, plugin: "" }
    }

    /// Unschedulable with one reason.
    pub fn unschedulable(reason: impl Into<Cow<'static, str>>) -> Self {
        Self::with_code(Code::Unschedulable, reason)
    }

    /// UnschedulableAndUnresolvable with one reason.
    pub fn unresolvable(reason: impl Into<Cow<'static, str>>) -> Self {
        Self::with_code(Code::UnschedulableAndUnresolvable, reason)
    }

    /// An internal error.
    pub fn error(reason: impl Into<Cow<'static, str>>) -> Self {
        Self::with_code(Code::Error, reason)
    }

    /// Adds a human detail.
    pub fn with_detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    /// Adds a human detail built only when details are enabled.
    pub fn with_detail_fn(mut self, detail: impl FnOnce() -> String) -> Self {
        if details_enabled() {
            self.detail = Some(detail());
        }
        self
    }

    /// Whether the code is Success.
    pub fn is_success(&self) -> bool {
        self.code == Code::Success
    }

    /// Whether the code is Skip.
    pub fn is_skip(&self) -> bool {
        self.code == Code::Skip
    }

    /// Whether the node was rejected (either unschedulable code).
    pub fn is_rejected(&self) -> bool {
        matches!(self.code, Code::Unschedulable | Code::UnschedulableAndUnresolvable)
    }

    /// The reasons joined with ", " (kube-scheduler's `Message()`).
    pub fn message(&self) -> String {
        self.reasons.join(", ")
    }
}

//! Timed runs of extension points, labelled as kube-scheduler's
//! `scheduler_framework_extension_point_duration_seconds` labels them.

use algorithms::Code;

/// An extension point that is timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Point {
    /// PreEnqueue.
    PreEnqueue,
    /// PreFilter.
    PreFilter,
    /// PostFilter.
    PostFilter,
    /// Reserve.
    Reserve,
    /// Permit.
    Permit,
    /// PreBindPreFlight: whether PreBind has anything to do.
    PreBindPreFlight,
    /// PreBind.
    PreBind,
    /// Bind.
    Bind,
    /// PostBind.
    PostBind,
}

impl Point {
    /// kube-scheduler's name of the point.
    pub fn as_str(self) -> &'static str {
        match self {
            Point::PreEnqueue => "PreEnqueue",
            Point::PreFilter => "PreFilter",
            Point::PostFilter => "PostFilter",
            Point::Reserve => "Reserve",
            Point::Permit => "Permit",
            Point::PreBindPreFlight => "PreBindPreFlight",
            Point::PreBind => "PreBind",
            Point::Bind => "Bind",
            Point::PostBind => "PostBind",
        }
    }
}

/// How a run ended: a status code, or a Permit plugin's wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ended {
    /// With this code.
    Code(Code),
    /// A Permit plugin made the pod wait.
    Wait,
}

impl Ended {
    /// Success, or Error.
    pub fn ok(ok: bool) -> Self {
        Ended::Code(if ok { Code::Success } else { Code::Error })
    }

    /// The status label.
    pub fn as_str(self) -> &'static str {
        match self {
            Ended::Code(code) => code.as_str(),
            Ended::Wait => "Wait",
        }
    }
}

/// One timed run of an extension point.
#[derive(Debug, Clone, PartialEq)]
pub struct Timing {
    /// The point.
    pub point: Point,
    /// How it ended.
    pub ended: Ended,
    /// The profile.
    pub profile: String,
    /// How long it took.
    pub seconds: f64,
}

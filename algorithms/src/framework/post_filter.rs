//! PostFilter: what runs when a pod fits nowhere, as kube-scheduler's framework runs it.
//! Each plugin of the profile, in order, may make room (DefaultPreemption nominates a
//! node and names victims), reject with reasons (the chain goes on and the reasons are
//! joined), or stop the chain.

use std::sync::Arc;

use rand::RngCore;

use super::{ApiWrite, Evaluation, Profile};
use crate::pod_info::PodInfo;
use crate::snapshot::Snapshot;

/// A node where evicting pods makes the pod fit, with the pods to evict there.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// Node index in the snapshot.
    pub node: usize,
    /// Victims, most important first.
    pub victims: Vec<Arc<PodInfo>>,
    /// How many victims a PodDisruptionBudget does not allow to go.
    pub pdb_violations: usize,
}

/// What PostFilter decided (one plugin's answer, or the whole chain's).
#[derive(Debug, Clone)]
pub enum PostFilterResult {
    /// Evict the victims and nominate the pod to the node.
    Nominate(Candidate),
    /// No room was made; the reasons (joined with ", " over the chain). With `clear`
    /// the pod's nomination is cleared (a preemption found no candidate), else kept.
    Unschedulable {
        /// The reasons.
        message: String,
        /// Whether the nomination is cleared.
        clear: bool,
    },
    /// A plugin stopped the chain (an error, or a rejection no later plugin can undo);
    /// its message alone is reported.
    Stopped(String),
    /// No room was made yet, but the plugin asks for writes that may make some
    /// (DynamicResources deallocating a claim): like [`PostFilterResult::Unschedulable`],
    /// with the writes the caller makes through the API server.
    Released {
        /// The reasons.
        message: String,
        /// Whether the nomination is cleared.
        clear: bool,
        /// The writes.
        writes: Vec<ApiWrite>,
    },
}

impl PostFilterResult {
    /// PostFilter's part of kube-scheduler's FailedScheduling message (after the first
    /// sentence); none after a successful nomination.
    pub fn message(&self) -> Option<String> {
        match self {
            PostFilterResult::Nominate(_) => None,
            PostFilterResult::Unschedulable { message, .. }
            | PostFilterResult::Released { message, .. }
            | PostFilterResult::Stopped(message) => Some(message.clone()),
        }
    }
}

/// A PostFilter plugin.
pub trait PostFilterPlugin: Send + Sync {
    /// kube-scheduler's plugin name.
    fn name(&self) -> &'static str;

    /// Runs for `pod`, which fit nowhere in `ev`. `snapshot` may be changed for dry runs
    /// and must be restored before returning.
    fn post_filter(
        &self,
        profile: &Profile,
        pod: &PodInfo,
        snapshot: &mut Snapshot,
        ev: &Evaluation,
        rng: &mut dyn RngCore,
    ) -> PostFilterResult;
}

/// Runs the profile's PostFilter plugins in order: the first nomination or stop ends the
/// chain; rejections are gathered. `None` when the profile has no PostFilter plugin.
pub fn run_post_filters(
    profile: &Profile,
    pod: &PodInfo,
    snapshot: &mut Snapshot,
    ev: &Evaluation,
    rng: &mut dyn RngCore,
) -> Option<PostFilterResult> {
    let mut reasons: Vec<String> = Vec::new();
    let mut clear = false;
    let mut writes = Vec::new();
    for plugin in &profile.post_filters {
        match plugin.post_filter(profile, pod, snapshot, ev, rng) {
            PostFilterResult::Unschedulable { message, clear: c } => {
                reasons.push(message);
                clear |= c;
            }
            PostFilterResult::Released { message, clear: c, writes: w } => {
                reasons.push(message);
                clear |= c;
                writes.extend(w);
            }
            // A nomination or a stop ends the chain; writes asked for before it are not
            // made (the next attempt asks again if they are still needed).
            done => return Some(done),
        }
    }
    if profile.post_filters.is_empty() {
        return None;
    }
    let message = reasons.join(", ");
    Some(match writes.is_empty() {
        true => PostFilterResult::Unschedulable { message, clear },
        false => PostFilterResult::Released { message, clear, writes },
    })
}

/// The whole FailedScheduling message of an attempt that PostFilter followed.
pub fn failure_message(ev: &Evaluation, post: &PostFilterResult) -> Option<String> {
    let first = ev.failure_message()?;
    Some(match post.message() {
        Some(m) if ev.error.is_none() => format!("{first} {m}"),
        _ => first,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::Status;

    /// A PostFilter plugin that answers with a fixed result.
    struct Fixed(&'static str, PostFilterResult);

    impl PostFilterPlugin for Fixed {
        fn name(&self) -> &'static str {
            self.0
        }
        fn post_filter(
            &self,
            _: &Profile,
            _: &PodInfo,
            _: &mut Snapshot,
            _: &Evaluation,
            _: &mut dyn RngCore,
        ) -> PostFilterResult {
            self.1.clone()
        }
    }

    fn reject(message: &str, clear: bool) -> PostFilterResult {
        PostFilterResult::Unschedulable { message: message.into(), clear }
    }

    fn chain(plugins: Vec<PostFilterResult>, ev: &Evaluation) -> Option<PostFilterResult> {
        let profile = Profile {
            post_filters: plugins.into_iter().map(|r| Arc::new(Fixed("P", r)) as Arc<dyn PostFilterPlugin>).collect(),
            ..Default::default()
        };
        let pod = crate::builders::PodBuilder::new("p").info();
        run_post_filters(
            &profile,
            &pod,
            &mut Snapshot::default(),
            ev,
            &mut <rand::rngs::SmallRng as rand::SeedableRng>::seed_from_u64(0),
        )
    }

    #[test]
    fn the_chain_joins_rejections_and_ends_at_a_nomination_or_a_stop() {
        let ev = Evaluation::default();
        assert!(chain(vec![], &ev).is_none());
        let out = chain(vec![reject("a", false), reject("b", true)], &ev).unwrap();
        assert!(
            matches!(&out, PostFilterResult::Unschedulable { message, clear: true } if message == "a, b"),
            "{out:?}"
        );
        // Writes asked for along the chain are gathered; the reasons joined as before.
        let write = ApiWrite::new("a write of some plugin".to_string());
        let released = PostFilterResult::Released { message: "a".into(), clear: false, writes: vec![write.clone()] };
        let out = chain(vec![released, reject("b", true)], &ev).unwrap();
        assert!(
            matches!(&out, PostFilterResult::Released { message, clear: true, writes } if message == "a, b" && writes == &vec![write]),
            "{out:?}"
        );
        let stop = PostFilterResult::Stopped("boom".into());
        let out = chain(vec![reject("a", false), stop, reject("b", true)], &ev).unwrap();
        assert!(matches!(&out, PostFilterResult::Stopped(m) if m == "boom"), "{out:?}");
        let nominate = PostFilterResult::Nominate(Candidate { node: 3, victims: Vec::new(), pdb_violations: 0 });
        let out = chain(vec![reject("a", false), nominate, reject("b", true)], &ev).unwrap();
        assert!(matches!(out, PostFilterResult::Nominate(Candidate { node: 3, .. })));
    }

    #[test]
    fn dynamic_resources_has_nothing_to_deallocate_and_no_state_after_a_prefilter_rejection() {
        use crate::plugins::dynamic_resources::DynamicResources;
        let dra = || {
            vec![DynamicResources::default().post_filter(
                &Profile::default(),
                &crate::builders::PodBuilder::new("p").info(),
                &mut Snapshot::default(),
                &Evaluation::default(),
                &mut <rand::rngs::SmallRng as rand::SeedableRng>::seed_from_u64(0),
            )]
        };
        assert_eq!(
            chain(dra(), &Evaluation::default()).and_then(|r| r.message()).as_deref(),
            Some("no new claims to deallocate")
        );
        let rejected =
            Evaluation { prefilter_rejection: Some(Status::unresolvable("no")), num_nodes: 2, ..Default::default() };
        let mut snap = Snapshot::default();
        let pod = crate::builders::PodBuilder::new("p").info();
        let out = DynamicResources::default().post_filter(
            &Profile::default(),
            &pod,
            &mut snap,
            &rejected,
            &mut <rand::rngs::SmallRng as rand::SeedableRng>::seed_from_u64(0),
        );
        assert!(matches!(&out, PostFilterResult::Stopped(m) if m == "not found"), "{out:?}");
        assert_eq!(failure_message(&rejected, &out).unwrap(), "0/2 nodes are available: no. not found");
    }
}

//! What `run` watches and writes for each owner of cluster objects
//! ([`algorithms::owners::Owner`]): one folder per owner, listed once in [`API_OWNERS`].
//! `run`'s object watcher and its binding cycle's writer go through these and name none.

pub mod dra;
pub mod quotas;
pub mod volumes;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{StreamExt, future};
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, Resource};
use tracing::{info, warn};

use algorithms::events::ObjectKind;
use algorithms::framework::ApiWrite;
use algorithms::objects::ClusterObjects;

use crate::watch::relist::key_of;
use crate::watch::watches::{Watched, watch};

/// The API side of every owner, one line each.
pub const API_OWNERS: &[&dyn ApiOwner] = &[&volumes::Volumes, &dra::Dra, &quotas::Quotas];

/// What `run` does for one owner of cluster objects through the API server.
pub trait ApiOwner: Send + Sync {
    /// The watches of the kinds it reads, as store operations.
    fn watches(&self, client: &Client) -> Vec<BoxStream<'static, Op>>;

    /// Makes one of its writes, returning the object's new resource version; `None`
    /// when the write is not its own.
    fn write<'a>(&'a self, client: &'a Client, write: &'a ApiWrite) -> Option<BoxFuture<'a, Result<u64, String>>>;
}

/// Stores a parsed object; returns whether it replaced one.
pub type Store = Box<dyn FnOnce(&mut ClusterObjects) -> bool + Send>;

/// Removes the object of a key; returns whether there was one.
pub type Remove = fn(&mut ClusterObjects, &str) -> bool;

/// One watch's output: an event with each object's key and, when it could be read, how
/// to store it; or a failure.
pub enum Op {
    /// An event of a kind, with how to remove its objects.
    Event(ObjectKind, Remove, Event<(String, Option<Store>)>),
    /// The watch could not run (not served, forbidden, failing): the kind counts as listed
    /// so that scheduling does not wait on it; pods needing it retry when it arrives.
    Failed(ObjectKind, String),
}

/// A watch of the API type `K` (`resource`, its plural, for logs) as store operations;
/// objects that do not parse are logged and skipped.
pub fn ops<K>(
    client: &Client,
    kind: ObjectKind,
    resource: &'static str,
    parse: fn(&K) -> Result<Store, String>,
    remove: Remove,
) -> BoxStream<'static, Op>
where
    K: Resource<DynamicType = ()> + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    let api: Api<K> = Api::all(client.clone());
    let read = move |o: K| {
        let key = key_of(&o);
        let store = parse(&o)
            .map_err(
                |e| warn!(kind = resource, object = %key, error = %e, "ignoring an object the scheduler cannot read"),
            )
            .ok();
        (key, store)
    };
    watch(resource, api, watcher::Config::default())
        .filter_map(move |w| {
            let op = match w {
                Watched::Event(ev) => Some(Op::Event(kind, remove, map(ev, read))),
                Watched::Expired(n) => {
                    info!(kind = n, "watch expired (410 Gone); relisting");
                    None
                }
                Watched::Failed(_, e) => Some(Op::Failed(kind, e)),
            };
            future::ready(op)
        })
        .boxed()
}

/// An event with its object turned into something else.
fn map<K, T>(ev: Event<K>, f: impl Fn(K) -> T) -> Event<T> {
    match ev {
        Event::Init => Event::Init,
        Event::InitApply(o) => Event::InitApply(f(o)),
        Event::InitDone => Event::InitDone,
        Event::Apply(o) => Event::Apply(f(o)),
        Event::Delete(o) => Event::Delete(f(o)),
    }
}

/// How to store `object` with `upsert` (which returns whether it replaced one).
pub fn store<T: Send + 'static>(object: T, upsert: fn(&mut ClusterObjects, T) -> bool) -> Store {
    Box::new(move |objects| upsert(objects, object))
}

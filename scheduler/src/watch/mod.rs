//! Watching the API server: watch streams with the scheduler's retry policy, and the
//! relist bookkeeping that turns a watcher's events into changes of a store.

pub mod cause;
pub mod relist;
pub mod watches;

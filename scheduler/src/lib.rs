//! custom-scheduler: the scheduling queue, cache and cycle, and the `simulate` and
//! `explain` commands, on top of the plugins in `algorithms`.

pub mod admission_check;
pub mod binding;
pub mod cache;
pub mod cluster;
pub mod config_file;
pub mod detail;
pub mod engine;
pub mod explain;
pub mod explain_group;
pub mod extender_mode;
pub mod extenders;
pub mod gang;
pub mod listener;
pub mod nominator;
pub mod owners;
pub mod queue;
pub mod report;
pub mod run;
pub mod simulate;
pub mod synthetic;
pub mod watch;

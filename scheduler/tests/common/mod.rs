//! Test support shared by the integration tests.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod api_util;
pub mod fake_api;
pub mod report;

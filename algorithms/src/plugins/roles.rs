//! A plugin's roles as the registry builds them: one object behind every extension
//! point it implements, and the reading of its args.

use std::sync::Arc;

use serde::de::DeserializeOwned;

use super::ArgsError;
use crate::framework::{FilterPlugin, PermitPlugin, PostFilterPlugin, PreBindPlugin, ReservePlugin, ScorePlugin};

/// A plugin built from its args, one object shared by all its roles.
#[derive(Clone, Default)]
pub struct Built {
    /// The filter role, if any.
    pub filter: Option<Arc<dyn FilterPlugin>>,
    /// The score role, if any.
    pub score: Option<Arc<dyn ScorePlugin>>,
    /// The PostFilter role, if any.
    pub post_filter: Option<Arc<dyn PostFilterPlugin>>,
    /// The Reserve role, if any.
    pub reserve: Option<Arc<dyn ReservePlugin>>,
    /// The Permit role, if any.
    pub permit: Option<Arc<dyn PermitPlugin>>,
    /// The PreBind role, if any.
    pub pre_bind: Option<Arc<dyn PreBindPlugin>>,
}

impl Built {
    /// A filter alone.
    pub fn filter(p: impl FilterPlugin + 'static) -> Self {
        Built { filter: Some(Arc::new(p)), ..Default::default() }
    }

    /// A score alone.
    pub fn score(p: impl ScorePlugin + 'static) -> Self {
        Built { score: Some(Arc::new(p)), ..Default::default() }
    }
}

/// Reads a plugin's args (`apiVersion` and `kind` ignored); none gives the defaults.
pub fn parse<T: DeserializeOwned + Default>(name: &str, args: Option<&serde_json::Value>) -> Result<T, ArgsError> {
    let Some(v) = args else { return Ok(T::default()) };
    let mut v = v.clone();
    if let Some(obj) = v.as_object_mut() {
        obj.remove("apiVersion");
        obj.remove("kind");
    }
    if v.is_null() {
        return Ok(T::default());
    }
    serde_json::from_value(v).map_err(|e| ArgsError::new(name, e.to_string()))
}

/// A filter that also scores.
pub fn both<T: FilterPlugin + ScorePlugin + 'static>(p: T) -> Built {
    let p = Arc::new(p);
    Built { filter: Some(p.clone()), score: Some(p), ..Default::default() }
}

/// A plugin with PreFilter/Filter and PostFilter roles, one object behind both (the quota
/// plugins).
pub fn filter_and_post_filter<T: FilterPlugin + PostFilterPlugin + 'static>(p: T) -> Built {
    let p = Arc::new(p);
    Built { filter: Some(p.clone()), post_filter: Some(p), ..Default::default() }
}

//! Evaluating DeviceClass and request selectors on devices: each expression compiled
//! once (by its text), each device's CEL value built once (kept with the device), and
//! each device's verdict for a set of selectors kept with the device, so that the
//! next pod asking for the same class and selectors pays a lookup, not an evaluation.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, RwLock};

use cel::common::traits::{Container, Indexer, Iterable, Sizer};
use cel::common::types::{self, CelBool, CelInt, CelMap, CelMapKey, CelString, Type};
use cel::common::value::{CowVal, Val};
use cel::context::VariableResolver;
use cel::{Context, ExecutionError, Program, Value};

use super::cel_env::{CelQuantity, env, version};
use super::objects::{Alternative, Attribute, Claim, Device};
use super::pools::Reachable;
use super::state::DraState;

/// The longest selector expression accepted, as the API server's validation.
pub const MAX_EXPRESSION_LENGTH: usize = 10 * 1024;

type Compiled = Result<Arc<Program>, String>;

static PROGRAMS: LazyLock<RwLock<HashMap<String, Compiled>>> = LazyLock::new(Default::default);
static SETS: LazyLock<RwLock<HashMap<String, u64>>> = LazyLock::new(Default::default);

/// An expression, compiled once per process.
fn compile(source: &str) -> Compiled {
    if let Some(p) = PROGRAMS.read().unwrap_or_else(|e| e.into_inner()).get(source) {
        return p.clone();
    }
    let compiled = if source.len() > MAX_EXPRESSION_LENGTH {
        Err(format!("expression is {} bytes long, more than {MAX_EXPRESSION_LENGTH}", source.len()))
    } else {
        env().and_then(|e| e.compile(source).map(Arc::new).map_err(|e| e.to_string()))
    };
    let mut map = PROGRAMS.write().unwrap_or_else(|e| e.into_inner());
    if map.len() > 100_000 {
        map.clear();
    }
    map.insert(source.to_string(), compiled.clone());
    compiled
}

/// Selector sets remembered before the map starts over (their numbers are never given
/// again, so a verdict kept under an old number is only missed, never misread).
const MAX_SETS: usize = 100_000;
static NEXT_SET: AtomicU64 = AtomicU64::new(1);

/// A number naming one set of selectors (a class's, then a request's), the key of the
/// verdicts kept with each device.
fn set_id(key: String) -> u64 {
    if let Some(id) = SETS.read().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return *id;
    }
    let mut map = SETS.write().unwrap_or_else(|e| e.into_inner());
    if let Some(id) = map.get(&key) {
        return *id;
    }
    if map.len() >= MAX_SETS {
        map.clear();
    }
    let id = NEXT_SET.fetch_add(1, Ordering::Relaxed);
    map.insert(key, id);
    id
}

/// The selectors of one request alternative, ready to run.
#[derive(Debug, Clone)]
pub struct Prepared {
    id: u64,
    class: String,
    claim: String,
    class_programs: Vec<Compiled>,
    request_programs: Vec<Compiled>,
}

impl Prepared {
    /// The number of its set of selectors (the class's text and the request's).
    pub(crate) fn id(&self) -> u64 {
        self.id
    }
}

/// Compiles the selectors of an alternative (its class must exist).
pub fn prepare(state: &DraState, claim: &Claim, alt: &Alternative) -> Prepared {
    let class_selectors = state.class(&alt.class).map(|c| c.selectors.clone()).unwrap_or_default();
    let key = format!("{}\u{0}{}\u{1}{}", alt.class, class_selectors.join("\u{0}"), alt.selectors.join("\u{0}"));
    Prepared {
        id: set_id(key),
        class: alt.class.clone(),
        claim: claim.key(),
        class_programs: class_selectors.iter().map(|s| compile(s)).collect(),
        request_programs: alt.selectors.iter().map(|s| compile(s)).collect(),
    }
}

/// Compiles a class's own selectors (no request): which devices the class selects.
pub fn prepare_class(state: &DraState, class: &str) -> Prepared {
    let class_selectors = state.class(class).map(|c| c.selectors.clone()).unwrap_or_default();
    let key = format!("{class}\u{0}{}\u{1}", class_selectors.join("\u{0}"));
    Prepared {
        id: set_id(key),
        class: class.to_string(),
        claim: String::new(),
        class_programs: class_selectors.iter().map(|s| compile(s)).collect(),
        request_programs: Vec::new(),
    }
}

/// Whether every selector holds for the device; errors as kube-scheduler words them.
pub fn matches(prepared: &Prepared, device: &Reachable) -> Result<bool, String> {
    let d = &device.device;
    if let Some(known) = d.verdicts.read().unwrap_or_else(|e| e.into_inner()).get(&prepared.id) {
        return Ok(*known);
    }
    let value = d.cel_value(&device.slice.driver);
    let verdict = evaluate(prepared, value)?;
    d.verdicts.write().unwrap_or_else(|e| e.into_inner()).insert(prepared.id, verdict);
    Ok(verdict)
}

fn evaluate(p: &Prepared, value: &Result<Box<dyn Val>, String>) -> Result<bool, String> {
    let lists =
        [(&p.class_programs, format!("class {}", p.class)), (&p.request_programs, format!("claim {}", p.claim))];
    for (programs, whose) in lists {
        for (i, program) in programs.iter().enumerate() {
            let program = program.as_ref().map_err(|e| format!("{whose}: selector #{i}: CEL compile error: {e}"))?;
            let value = value.as_ref().map_err(|e| format!("{whose}: selector #{i}: CEL runtime error: {e}"))?;
            match run(program, value.as_ref()) {
                Ok(true) => {}
                Ok(false) => return Ok(false),
                Err(e) => return Err(format!("{whose}: selector #{i}: CEL runtime error: {e}")),
            }
        }
    }
    Ok(true)
}

struct DeviceVariable<'a> {
    device: &'a (dyn Val + 'static),
}

impl VariableResolver for DeviceVariable<'_> {
    fn resolve<'b>(&'b self, variable: &str) -> Option<CowVal<'b, 'b>> {
        (variable == "device").then(|| CowVal::Borrowed(self.device))
    }
}

/// Runs one program on a device value; the result must be a bool.
pub fn run(program: &Program, device: &(dyn Val + 'static)) -> Result<bool, String> {
    let env = env()?;
    let resolver = DeviceVariable { device };
    let mut ctx = Context::with_env(Arc::clone(env));
    ctx.set_variable_resolver(&resolver);
    let out = Value::resolve_val(program.expression(), &ctx).map_err(describe)?;
    match out.downcast_ref::<CelBool>() {
        Some(b) => Ok(*b.inner()),
        None => Err(format!("CEL result of type {} could not be converted to bool", out.get_type().name())),
    }
}

fn describe(e: ExecutionError) -> String {
    match e {
        ExecutionError::NoSuchKey(k) => format!("no such key: {k}"),
        other => other.to_string(),
    }
}

/// The outer `attributes` and `capacity` maps: an unknown domain reads as an empty map.
#[derive(Debug, Clone, Default)]
struct Domains(CelMap<'static>);

static EMPTY: LazyLock<CelMap<'static>> = LazyLock::new(CelMap::default);

impl Val for Domains {
    fn get_type(&self) -> &Type {
        &types::MAP_TYPE
    }
    fn cel_type() -> &'static Type {
        &types::MAP_TYPE
    }
    fn as_container(&self) -> Option<&dyn Container> {
        self.0.as_container()
    }
    fn as_indexer<'b, 'v>(&'b self) -> Option<&'b (dyn Indexer + 'v)>
    where
        Self: 'v,
    {
        Some(self)
    }
    fn as_iterable<'b, 'v>(&'b self) -> Option<&'b (dyn Iterable + 'v)>
    where
        Self: 'v,
    {
        self.0.as_iterable()
    }
    fn as_sizer(&self) -> Option<&dyn Sizer> {
        self.0.as_sizer()
    }
    fn equals(&self, other: &dyn Val) -> bool {
        self.0.equals(other)
    }
    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v>
    where
        Self: 'v,
    {
        Box::new(self.clone())
    }
}

impl Indexer for Domains {
    fn get<'b, 'v>(&'b self, idx: &dyn Val) -> Result<CowVal<'b, 'v>, ExecutionError>
    where
        Self: 'v,
    {
        match Indexer::get(&self.0, idx) {
            Err(ExecutionError::NoSuchKey(_)) => Ok(CowVal::Borrowed(&*EMPTY)),
            other => other,
        }
    }
    fn steal<'v>(self: Box<Self>, idx: &dyn Val) -> Result<Box<dyn Val + 'v>, ExecutionError>
    where
        Self: 'v,
    {
        self.get(idx).map(CowVal::into_owned)
    }
}

fn key(s: &str) -> CelMapKey<'static> {
    CelMapKey::String(CelString::from(s.to_owned()))
}

type Grouped = HashMap<String, HashMap<CelMapKey<'static>, Box<dyn Val>>>;

fn domains(grouped: Grouped) -> Box<dyn Val> {
    let outer: HashMap<CelMapKey<'static>, Box<dyn Val>> =
        grouped.into_iter().map(|(k, v)| (key(&k), Box::new(CelMap::from(v)) as Box<dyn Val>)).collect();
    Box::new(Domains(CelMap::from(outer)))
}

/// The `device` variable of a device published by `driver`.
pub fn device_value(driver: &str, d: &Device) -> Result<Box<dyn Val>, String> {
    let mut attributes = Grouped::new();
    for (name, a) in &d.attributes {
        let (domain, id) = name.split_once('/').unwrap_or((driver, name));
        let v: Box<dyn Val> = match a {
            Attribute::Int(i) => Box::new(CelInt::from(*i)),
            Attribute::Bool(b) => Box::new(CelBool::from(*b)),
            Attribute::Str(s) => Box::new(CelString::from(s.clone())),
            Attribute::Version(s) => {
                Box::new(version(s).map_err(|e| format!("attribute {name}: parse semantic version: {e}"))?)
            }
        };
        attributes.entry(domain.to_string()).or_default().insert(key(id), v);
    }
    let mut capacity = Grouped::new();
    for (name, q) in &d.capacity {
        let (domain, id) = name.split_once('/').unwrap_or((driver, name));
        capacity.entry(domain.to_string()).or_default().insert(key(id), Box::new(CelQuantity::of(q)));
    }
    let mut fields: HashMap<CelMapKey<'static>, Box<dyn Val>> = HashMap::new();
    fields.insert(key("driver"), Box::new(CelString::from(driver.to_string())));
    fields.insert(key("allowMultipleAllocations"), Box::new(CelBool::from(d.multi)));
    fields.insert(key("attributes"), domains(attributes));
    fields.insert(key("capacity"), domains(capacity));
    Ok(Box::new(CelMap::from(fields)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_selector_set_keeps_its_number_until_the_map_starts_over_and_no_number_comes_twice() {
        let first = set_id("set-a".into());
        assert_eq!(set_id("set-a".into()), first);
        let others: Vec<u64> = (0..=MAX_SETS).map(|i| set_id(format!("filler-{i}"))).collect();
        assert!(SETS.read().unwrap_or_else(|e| e.into_inner()).len() <= MAX_SETS, "the map is bounded");
        let again = set_id("set-a".into());
        assert_ne!(again, first, "the map started over");
        assert!(!others.contains(&again) && others.iter().all(|n| *n != first));
    }
}

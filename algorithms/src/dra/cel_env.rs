//! Kubernetes' CEL environment for DRA device selectors, on the `cel` crate: the
//! standard library and string extension, `cel.bind`, and the `kubernetes.Quantity`
//! and `kubernetes.Semver` types with their functions (`quantity`, `isQuantity`,
//! `sign`, `compareTo`, `isGreaterThan`, `isLessThan`, `asInteger`, `isInteger`,
//! `asApproximateFloat`, `add`, `sub`; `semver`, `isSemver`, `major`, `minor`, `patch`).
//!
//! Quantities are held as signed billionths (exact for every quantity a driver can
//! publish below about 10^29); like Kubernetes there is no `<` on them.

use std::any::Any;
use std::sync::{Arc, LazyLock};

use cel::common::ast::{ComprehensionExpr, Expr, ListExpr, LiteralValue};
use cel::common::types::{CelBool, CelInt, CelString, Type};
use cel::common::value::{StaticVal, Val};
use cel::parser::Macro;
use cel::{Env, ExecutionError};

use crate::quantity::Quantity as Parsed;

static QUANTITY_TYPE: Type = Type::new_unspecified_type("kubernetes.Quantity");
static SEMVER_TYPE: Type = Type::new_unspecified_type("kubernetes.Semver");

/// A `kubernetes.Quantity` value: billionths of a unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CelQuantity(pub i128);

impl CelQuantity {
    /// The value of a parsed quantity.
    pub fn of(q: &Parsed) -> Self {
        CelQuantity(q.nanos())
    }
}

impl Val for CelQuantity {
    fn get_type(&self) -> &Type {
        &QUANTITY_TYPE
    }
    fn cel_type() -> &'static Type {
        &QUANTITY_TYPE
    }
    fn equals(&self, other: &dyn Val) -> bool {
        other.downcast_ref::<CelQuantity>().is_some_and(|o| o.0 == self.0)
    }
    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v>
    where
        Self: 'v,
    {
        Box::new(*self)
    }
    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }
}
impl StaticVal for CelQuantity {}

/// A `kubernetes.Semver` value; equality and order ignore build metadata.
#[derive(Debug, Clone)]
pub struct CelSemver(pub semver::Version);

impl Val for CelSemver {
    fn get_type(&self) -> &Type {
        &SEMVER_TYPE
    }
    fn cel_type() -> &'static Type {
        &SEMVER_TYPE
    }
    fn equals(&self, other: &dyn Val) -> bool {
        other.downcast_ref::<CelSemver>().is_some_and(|o| o.0.cmp_precedence(&self.0).is_eq())
    }
    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v>
    where
        Self: 'v,
    {
        Box::new(self.clone())
    }
    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }
}
impl StaticVal for CelSemver {}

const NANO: i128 = 1_000_000_000;

fn failed(function: &str, message: impl std::fmt::Display) -> ExecutionError {
    ExecutionError::function_error(function, message.to_string())
}

fn parse_quantity(s: &str) -> Result<CelQuantity, String> {
    Parsed::parse(s).map(|q| CelQuantity::of(&q)).map_err(|e| e.to_string())
}

fn quantity(s: &CelString<'_>) -> Result<CelQuantity, ExecutionError> {
    parse_quantity(s.inner()).map_err(|e| failed("quantity", e))
}
fn is_quantity(s: &CelString<'_>) -> CelBool {
    CelBool::from(parse_quantity(s.inner()).is_ok())
}
fn q_sign(a: &CelQuantity) -> CelInt {
    CelInt::from(a.0.signum() as i64)
}
fn q_greater(a: &CelQuantity, b: &CelQuantity) -> CelBool {
    CelBool::from(a.0 > b.0)
}
fn q_less(a: &CelQuantity, b: &CelQuantity) -> CelBool {
    CelBool::from(a.0 < b.0)
}
fn q_compare(a: &CelQuantity, b: &CelQuantity) -> CelInt {
    CelInt::from(a.0.cmp(&b.0) as i64)
}
fn integer(a: &CelQuantity) -> Option<i64> {
    (a.0 % NANO == 0).then(|| i64::try_from(a.0 / NANO).ok()).flatten()
}
fn q_as_integer(a: &CelQuantity) -> Result<CelInt, ExecutionError> {
    integer(a).map(CelInt::from).ok_or_else(|| failed("asInteger", "cannot convert value to integer"))
}
fn q_is_integer(a: &CelQuantity) -> CelBool {
    CelBool::from(integer(a).is_some())
}
fn q_as_float(a: &CelQuantity) -> cel::common::types::CelDouble {
    cel::common::types::CelDouble::from(a.0 as f64 / NANO as f64)
}
fn q_add(a: &CelQuantity, b: &CelQuantity) -> CelQuantity {
    CelQuantity(a.0.saturating_add(b.0))
}
fn q_add_int(a: &CelQuantity, b: &CelInt) -> CelQuantity {
    CelQuantity(a.0.saturating_add(i128::from(*b.inner()) * NANO))
}
fn q_sub(a: &CelQuantity, b: &CelQuantity) -> CelQuantity {
    CelQuantity(a.0.saturating_sub(b.0))
}
fn q_sub_int(a: &CelQuantity, b: &CelInt) -> CelQuantity {
    CelQuantity(a.0.saturating_sub(i128::from(*b.inner()) * NANO))
}

/// Kubernetes' normalization for `semver(s, true)`: one leading `v` dropped, leading
/// zeros of the numeric parts dropped, missing minor and patch parts added.
fn normalize(s: &str) -> Result<String, String> {
    let s = s.strip_prefix('v').unwrap_or(s);
    let cut = s.find(['-', '+']).unwrap_or(s.len());
    let (core, rest) = s.split_at(cut);
    let mut parts: Vec<String> = core
        .split('.')
        .map(|p| {
            let t = p.trim_start_matches('0');
            if t.is_empty() || !t.starts_with(|c: char| c.is_ascii_digit()) { format!("0{t}") } else { t.to_string() }
        })
        .collect();
    if parts.len() < 3 {
        if !rest.is_empty() {
            return Err("short version cannot contain PreRelease/Build meta data".into());
        }
        while parts.len() < 3 {
            parts.push("0".into());
        }
    }
    Ok(format!("{}{rest}", parts.join(".")))
}

fn parse_semver(s: &str, normalized: bool) -> Result<CelSemver, String> {
    let text = if normalized { normalize(s)? } else { s.to_string() };
    semver::Version::parse(&text).map(CelSemver).map_err(|e| e.to_string())
}
fn semver_of(s: &CelString<'_>) -> Result<CelSemver, ExecutionError> {
    parse_semver(s.inner(), false).map_err(|e| failed("semver", e))
}
fn semver_normalized(s: &CelString<'_>, n: &CelBool) -> Result<CelSemver, ExecutionError> {
    parse_semver(s.inner(), *n.inner()).map_err(|e| failed("semver", e))
}
fn is_semver(s: &CelString<'_>) -> CelBool {
    CelBool::from(parse_semver(s.inner(), false).is_ok())
}
fn is_semver_normalized(s: &CelString<'_>, n: &CelBool) -> CelBool {
    CelBool::from(parse_semver(s.inner(), *n.inner()).is_ok())
}
fn v_greater(a: &CelSemver, b: &CelSemver) -> CelBool {
    CelBool::from(a.0.cmp_precedence(&b.0).is_gt())
}
fn v_less(a: &CelSemver, b: &CelSemver) -> CelBool {
    CelBool::from(a.0.cmp_precedence(&b.0).is_lt())
}
fn v_compare(a: &CelSemver, b: &CelSemver) -> CelInt {
    CelInt::from(a.0.cmp_precedence(&b.0) as i64)
}
fn v_major(a: &CelSemver) -> CelInt {
    CelInt::from(i64::try_from(a.0.major).unwrap_or(i64::MAX))
}
fn v_minor(a: &CelSemver) -> CelInt {
    CelInt::from(i64::try_from(a.0.minor).unwrap_or(i64::MAX))
}
fn v_patch(a: &CelSemver) -> CelInt {
    CelInt::from(i64::try_from(a.0.patch).unwrap_or(i64::MAX))
}

/// `cel.bind(name, init, body)`: `body` with `name` bound to `init`, expanded as a
/// comprehension over an empty list whose accumulator is `name`.
fn bind_macro() -> Macro {
    Macro::receiver("bind", 3, |helper, target, args| {
        if !matches!(target.as_ref().map(|t| &t.expr), Some(Expr::Ident(n)) if n == "cel") {
            return Ok(None);
        }
        let Some(first) = args.first() else { return Ok(None) };
        let var = match &first.expr {
            Expr::Ident(n) => n.clone(),
            _ => return Err(helper.new_error(first.id, "cel.bind() variable name must be a simple identifier")),
        };
        let (Some(body), Some(init)) = (args.pop(), args.pop()) else { return Ok(None) };
        target.take();
        let comprehension = ComprehensionExpr {
            iter_range: helper.next_expr(Expr::List(ListExpr::new(Vec::new()))),
            iter_var: "#unused".to_owned(),
            iter_var2: None,
            accu_var: var.clone(),
            accu_init: init,
            loop_cond: helper.next_expr(Expr::Literal(LiteralValue::Boolean(false.into()))),
            loop_step: helper.next_expr(Expr::Ident(var)),
            result: body,
        };
        Ok(Some(helper.next_expr(Expr::Comprehension(Box::new(comprehension)))))
    })
}

fn build() -> Result<Env, cel::DeclarationError> {
    let mut env = Env::stdlib();
    env.add_extension(cel::extensions::strings)?;
    env.add_type(QUANTITY_TYPE.to_owned())?;
    env.add_type(SEMVER_TYPE.to_owned())?;
    cel::add_overload!(env, fn quantity: (CelString) -> Result<CelQuantity>)?;
    cel::add_overload!(env, fn is_quantity: (CelString) -> CelBool, name = "isQuantity")?;
    cel::add_overload!(env, fn q_sign: (CelQuantity) -> CelInt, name = "sign")?;
    cel::add_member_overload!(env, fn q_greater: (CelQuantity, CelQuantity) -> CelBool, name = "isGreaterThan")?;
    cel::add_member_overload!(env, fn q_less: (CelQuantity, CelQuantity) -> CelBool, name = "isLessThan")?;
    cel::add_member_overload!(env, fn q_compare: (CelQuantity, CelQuantity) -> CelInt, name = "compareTo")?;
    cel::add_member_overload!(env, fn q_as_integer: (CelQuantity) -> Result<CelInt>, name = "asInteger")?;
    cel::add_member_overload!(env, fn q_is_integer: (CelQuantity) -> CelBool, name = "isInteger")?;
    cel::add_member_overload!(env, fn q_as_float: (CelQuantity) -> cel::common::types::CelDouble, name = "asApproximateFloat")?;
    cel::add_member_overload!(env, fn q_add: (CelQuantity, CelQuantity) -> CelQuantity, name = "add")?;
    cel::add_member_overload!(env, fn q_add_int: (CelQuantity, CelInt) -> CelQuantity, name = "add")?;
    cel::add_member_overload!(env, fn q_sub: (CelQuantity, CelQuantity) -> CelQuantity, name = "sub")?;
    cel::add_member_overload!(env, fn q_sub_int: (CelQuantity, CelInt) -> CelQuantity, name = "sub")?;
    cel::add_overload!(env, fn semver_of: (CelString) -> Result<CelSemver>, name = "semver")?;
    cel::add_overload!(env, fn semver_normalized: (CelString, CelBool) -> Result<CelSemver>, name = "semver")?;
    cel::add_overload!(env, fn is_semver: (CelString) -> CelBool, name = "isSemver")?;
    cel::add_overload!(env, fn is_semver_normalized: (CelString, CelBool) -> CelBool, name = "isSemver")?;
    cel::add_member_overload!(env, fn v_greater: (CelSemver, CelSemver) -> CelBool, name = "isGreaterThan")?;
    cel::add_member_overload!(env, fn v_less: (CelSemver, CelSemver) -> CelBool, name = "isLessThan")?;
    cel::add_member_overload!(env, fn v_compare: (CelSemver, CelSemver) -> CelInt, name = "compareTo")?;
    cel::add_member_overload!(env, fn v_major: (CelSemver) -> CelInt, name = "major")?;
    cel::add_member_overload!(env, fn v_minor: (CelSemver) -> CelInt, name = "minor")?;
    cel::add_member_overload!(env, fn v_patch: (CelSemver) -> CelInt, name = "patch")?;
    env.add_macro(bind_macro())?;
    Ok(env)
}

static ENV: LazyLock<Result<Arc<Env>, String>> = LazyLock::new(|| build().map(Arc::new).map_err(|e| e.to_string()));

/// The shared environment (built once).
pub fn env() -> Result<&'static Arc<Env>, String> {
    ENV.as_ref().map_err(|e| format!("building the CEL environment: {e}"))
}

/// Parses a semantic version attribute as a device publishes it (strictly).
pub fn version(s: &str) -> Result<CelSemver, String> {
    parse_semver(s, false)
}

//! Exact parsing of Kubernetes resource quantities (`500m`, `1.5Gi`, `2e3`).
//!
//! A quantity is held as an exact rational `mantissa * 10^exp10 * 2^exp2` and
//! converted to integers the way the API server does: rounding up (away from
//! zero) to the requested scale, saturating at the `i64` range.

use thiserror::Error;

/// A quantity string that does not follow the Kubernetes grammar.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("failed to parse quantity {input:?}: {reason}")]
pub struct QuantityError {
    /// The text that was rejected.
    pub input: String,
    /// What was wrong with it.
    pub reason: &'static str,
}

/// An exactly parsed quantity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quantity {
    negative: bool,
    /// Decimal digits of the number without its point.
    mantissa: u128,
    /// Power of ten applied to the mantissa.
    exp10: i32,
    /// Power of two applied to the mantissa (binary suffixes).
    exp2: u32,
}

const MAX_DIGITS: usize = 36;

impl Quantity {
    /// Parses a quantity such as `100m`, `1Gi`, `1.5`, `12e6` or `+3k`.
    /// Parses a quantity that must not be negative (requests, limits, allocatable), with
    /// the API server's message for one that is.
    pub fn parse_non_negative(input: &str) -> Result<Self, QuantityError> {
        let q = Self::parse(input)?;
        if q.negative {
            return Err(QuantityError { input: input.to_string(), reason: "must be greater than or equal to 0" });
        }
        Ok(q)
    }

    /// Parses a quantity.
    pub fn parse(input: &str) -> Result<Self, QuantityError> {
        let err = |reason| QuantityError { input: input.to_string(), reason };
        let s = input.trim();
        if s.is_empty() {
            return Err(err("empty quantity"));
        }
        let (negative, rest) = match s.as_bytes()[0] {
            b'-' => (true, &s[1..]),
            b'+' => (false, &s[1..]),
            _ => (false, s),
        };
        let num_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let (number, suffix) = rest.split_at(num_end);
        if number.is_empty() || number == "." {
            return Err(err("a quantity must start with a number"));
        }
        let mut mantissa: u128 = 0;
        let mut exp10: i32 = 0;
        let mut seen_point = false;
        let mut digits = 0usize;
        for c in number.bytes() {
            if c == b'.' {
                if seen_point {
                    return Err(err("more than one decimal point"));
                }
                seen_point = true;
                continue;
            }
            let d = u128::from(c - b'0');
            if mantissa == 0 && d == 0 {
                if seen_point {
                    exp10 -= 1;
                }
                continue;
            }
            if digits >= MAX_DIGITS {
                // Further digits only matter below the precision we keep; keep
                // the magnitude right and round the rest up.
                if !seen_point {
                    exp10 += 1;
                } else if d != 0 && mantissa.is_multiple_of(10) {
                    mantissa += 1;
                }
                continue;
            }
            mantissa = mantissa * 10 + d;
            digits += 1;
            if seen_point {
                exp10 -= 1;
            }
        }
        let (s10, s2) = parse_suffix(suffix).ok_or_else(|| err("unknown suffix"))?;
        Ok(Quantity { negative: negative && mantissa != 0, mantissa, exp10: exp10 + s10, exp2: s2 })
    }

    /// The value scaled by `10^scale`, rounded up (away from zero) and
    /// saturated to `i64`. `scaled(0)` is `Value()`, `scaled(3)` is `MilliValue()`.
    pub fn scaled(&self, scale: i32) -> i64 {
        if self.mantissa == 0 {
            return 0;
        }
        let magnitude = self.scaled_magnitude(scale);
        let clipped = i64::try_from(magnitude).unwrap_or(i64::MAX);
        if self.negative { -clipped } else { clipped }
    }

    fn scaled_magnitude(&self, scale: i32) -> u128 {
        let mut num: u128 = self.mantissa;
        let mut den: u128 = 1;
        let e10 = self.exp10 + scale;
        for _ in 0..self.exp2 {
            num = match num.checked_mul(2) {
                Some(v) => v,
                None => return u128::MAX,
            };
        }
        if e10 >= 0 {
            for _ in 0..e10 {
                num = match num.checked_mul(10) {
                    Some(v) => v,
                    None => return u128::MAX,
                };
            }
        } else {
            for _ in 0..(-e10) {
                den = match den.checked_mul(10) {
                    Some(v) => v,
                    // The value is below one unit of the scale: rounds up to one.
                    None => return 1,
                };
            }
        }
        num.div_ceil(den)
    }

    /// The value in billionths, rounded up (away from zero) and saturated.
    pub fn nanos(&self) -> i128 {
        if self.mantissa == 0 {
            return 0;
        }
        let magnitude = i128::try_from(self.scaled_magnitude(9)).unwrap_or(i128::MAX);
        if self.negative { -magnitude } else { magnitude }
    }

    /// `Value()`: the integer value, rounded up.
    pub fn value(&self) -> i64 {
        self.scaled(0)
    }

    /// `MilliValue()`: the value in thousandths, rounded up.
    pub fn milli_value(&self) -> i64 {
        self.scaled(3)
    }

    /// Whether the quantity is zero.
    pub fn is_zero(&self) -> bool {
        self.mantissa == 0
    }
}

/// Returns (power of ten, power of two) for a suffix.
fn parse_suffix(suffix: &str) -> Option<(i32, u32)> {
    Some(match suffix {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        _ => {
            let rest = suffix.strip_prefix(['e', 'E'])?;
            let (sign, digits) = match rest.as_bytes().first() {
                Some(b'-') => (-1, &rest[1..]),
                Some(b'+') => (1, &rest[1..]),
                _ => (1, rest),
            };
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) || digits.len() > 4 {
                return None;
            }
            let e: i32 = digits.parse().ok()?;
            (sign * e, 0)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap()
    }

    #[test]
    fn parses_the_suffixes_the_api_server_accepts() {
        let cases: &[(&str, i64, i64)] = &[
            ("0", 0, 0),
            ("1", 1, 1000),
            ("100m", 1, 100),
            ("1500m", 2, 1500),
            ("0.5", 1, 500),
            ("1.5", 2, 1500),
            ("1k", 1000, 1_000_000),
            ("1Ki", 1024, 1_024_000),
            ("200Mi", 200 * 1024 * 1024, 200 * 1024 * 1024 * 1000),
            ("32Gi", 32 << 30, (32i64 << 30) * 1000),
            ("1e3", 1000, 1_000_000),
            ("1E3", 1000, 1_000_000),
            ("1e-3", 1, 1),
            ("2.5e+2", 250, 250_000),
            ("1n", 1, 1),
            ("1u", 1, 1),
            ("1000000n", 1, 1),
            ("1G", 1_000_000_000, 1_000_000_000_000),
            ("+3", 3, 3000),
            ("-3", -3, -3000),
            ("0.1m", 1, 1),
            (".5", 1, 500),
            ("5.", 5, 5000),
            ("1Ei", 1 << 60, i64::MAX),
            ("10E", i64::MAX, i64::MAX),
        ];
        for (input, value, milli) in cases {
            let parsed = q(input);
            assert_eq!(parsed.value(), *value, "value of {input}");
            assert_eq!(parsed.milli_value(), *milli, "milli value of {input}");
        }
    }

    #[test]
    fn rejects_text_outside_the_grammar() {
        for bad in ["", "abc", "1.2.3", "1Q", "1KiB", "m", "1e", "1e1.5", "--1", "1 m"] {
            assert!(Quantity::parse(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    proptest! {
        #[test]
        fn integer_milli_round_trips(v in 0i64..1_000_000_000_000) {
            prop_assert_eq!(q(&format!("{v}m")).milli_value(), v);
            prop_assert_eq!(q(&format!("{v}m")).value(), (v + 999) / 1000);
        }

        #[test]
        fn binary_suffixes_multiply_exactly(v in 0i64..1_000_000, shift in 0usize..4) {
            let suffix = ["Ki", "Mi", "Gi", "Ti"][shift];
            let expected = v.checked_mul(1i64 << (10 * (shift + 1))).unwrap();
            prop_assert_eq!(q(&format!("{v}{suffix}")).value(), expected);
        }

        #[test]
        fn decimal_fractions_round_up(whole in 0i64..1_000_000, frac in 0u32..1000) {
            let text = format!("{whole}.{frac:03}");
            let milli = whole * 1000 + i64::from(frac);
            prop_assert_eq!(q(&text).milli_value(), milli);
            prop_assert_eq!(q(&text).value(), whole + i64::from(frac > 0));
        }
    }
}

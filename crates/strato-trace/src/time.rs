//! Time: `i64` nanoseconds, and exact conversion from the decimal microsecond numbers that
//! Chrome-trace JSON files carry (`"ts": 1712195495505543.2`). Going through `f64` would lose
//! nanoseconds on epoch-sized timestamps (2^53 ns is only 104 days), so the text is parsed.

/// Nanoseconds on a trace's reference clock (or a duration in nanoseconds).
pub type Ns = i64;

/// The valid time range: every time a trace holds is in `-TIME_LIMIT_NS..=TIME_LIMIT_NS`.
///
/// 4e18 ns is about 126.8 years: wall-clock (Unix epoch) nanoseconds up to the year 2096, and
/// any monotonic or device clock. The bound is chosen so that the difference of any two valid
/// times (at most 8e18) fits in an `i64` (max ~9.22e18): a span's duration, a gap between two
/// events, a window's length never overflow. Importers refuse (or drop and count) times
/// outside it; [`crate::Trace::validate`] checks it.
pub const TIME_LIMIT_NS: Ns = 4_000_000_000_000_000_000;

/// True when `t` is in the valid time range ([`TIME_LIMIT_NS`]).
pub fn time_in_range(t: Ns) -> bool {
    (-TIME_LIMIT_NS..=TIME_LIMIT_NS).contains(&t)
}

/// A time outside the valid range ([`TIME_LIMIT_NS`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("time {0} ns is outside the valid range (+-{TIME_LIMIT_NS} ns, about +-126 years)")]
pub struct TimeOutOfRange(pub i128);

/// `t` when it is in the valid range.
pub fn checked_time(t: i128) -> Result<Ns, TimeOutOfRange> {
    match Ns::try_from(t) {
        Ok(v) if time_in_range(v) => Ok(v),
        _ => Err(TimeOutOfRange(t)),
    }
}

/// `start + duration`, computed without overflow and checked to be in the valid range.
pub fn checked_end(start: Ns, duration: Ns) -> Result<Ns, TimeOutOfRange> {
    checked_time(i128::from(start) + i128::from(duration))
}

/// Why a decimal time could not be converted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimeParseError {
    #[error("not a decimal number: {0:?}")]
    NotANumber(String),
    #[error("time out of range: {0:?}")]
    OutOfRange(String),
}

/// Converts a decimal number written in units of `10^-scale_exp10` ... precisely: the text is
/// a JSON number in units where one unit = `unit_ns` nanoseconds (1000 for microseconds, 1 for
/// nanoseconds). Digits finer than one nanosecond are rounded half away from zero. Accepts an
/// optional sign, a fraction and an exponent (`1.5e3`) of any length: a zero is 0 whatever its
/// exponent (`0e999999999`), a value below half a nanosecond is 0 (`1e-50`), and the work is
/// bounded whatever the text (significant digits past the 30th only move sub-ns rounding of
/// values far beyond any valid time, so they are not kept).
pub fn parse_decimal_to_ns(text: &str, unit_ns: i64) -> Result<Ns, TimeParseError> {
    /// Significant digits kept (i128 holds 10^38; times need 19).
    const MAX_DIGITS: i128 = 10_i128.pow(30);
    let bad = || TimeParseError::NotANumber(text.to_owned());
    let range = || TimeParseError::OutOfRange(text.to_owned());
    let bytes = text.trim().as_bytes();
    if bytes.is_empty() {
        return Err(bad());
    }
    let (negative, rest) = match bytes[0] {
        b'-' => (true, &bytes[1..]),
        b'+' => (false, &bytes[1..]),
        _ => (false, bytes),
    };
    // Split mantissa and exponent. The exponent saturates: past +-10^9 every non-zero value is
    // out of range or rounds to 0 anyway.
    let (mantissa, exponent) = match rest.iter().position(|&b| b == b'e' || b == b'E') {
        Some(p) => (&rest[..p], parse_exponent(&rest[p + 1..]).ok_or_else(bad)?),
        None => (rest, 0),
    };
    // Collect digits as an integer with a decimal exponent: value = digits * 10^(exponent - scale).
    let mut digits: i128 = 0;
    let mut scale: i64 = 0;
    let mut seen_digit = false;
    let mut seen_dot = false;
    for &b in mantissa {
        match b {
            b'0'..=b'9' => {
                seen_digit = true;
                if digits < MAX_DIGITS {
                    digits = digits * 10 + i128::from(b - b'0');
                    if seen_dot {
                        scale += 1;
                    }
                } else if !seen_dot {
                    // An integer digit not kept still counts as a power of ten.
                    scale -= 1;
                }
            }
            b'.' if !seen_dot => seen_dot = true,
            _ => return Err(bad()),
        }
    }
    if !seen_digit {
        return Err(bad());
    }
    if digits == 0 {
        return Ok(0);
    }
    // value_ns = digits * unit_ns * 10^(exponent - scale)
    let mut value = digits.checked_mul(i128::from(unit_ns)).ok_or_else(range)?;
    let shift = exponent - scale;
    if shift >= 0 {
        // A non-zero value times 10^39 is past i128 already: the loop is short.
        for _ in 0..shift.min(40) {
            value = value.checked_mul(10).ok_or_else(range)?;
        }
    } else if shift < -38 {
        // value < 10^38 (digits < 10^31, unit_ns well below 10^7), so below half a ns.
        value = 0;
    } else {
        let divisor = 10_i128.pow((-shift) as u32);
        let quotient = value / divisor;
        let remainder = value % divisor;
        value = if remainder * 2 >= divisor {
            quotient + 1
        } else {
            quotient
        };
    }
    let value = if negative { -value } else { value };
    i64::try_from(value).map_err(|_| range())
}

/// A decimal exponent (`+5`, `-12`, `007`), saturated to +-10^9; `None` when not one.
fn parse_exponent(text: &[u8]) -> Option<i64> {
    let (negative, digits) = match text.first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let magnitude = digits.iter().fold(0_i64, |acc, &d| {
        (acc * 10 + i64::from(d - b'0')).min(1_000_000_000)
    });
    Some(if negative { -magnitude } else { magnitude })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn microseconds_with_fraction_are_exact() {
        assert_eq!(
            parse_decimal_to_ns("1712195495505543.2", 1000),
            Ok(1_712_195_495_505_543_200)
        );
        assert_eq!(
            parse_decimal_to_ns("4458676522690.655", 1000),
            Ok(4_458_676_522_690_655)
        );
        assert_eq!(parse_decimal_to_ns("68.0", 1000), Ok(68_000));
        assert_eq!(
            parse_decimal_to_ns("1669783687464181", 1000),
            Ok(1_669_783_687_464_181_000)
        );
    }

    #[test]
    fn sub_nanosecond_digits_round() {
        assert_eq!(parse_decimal_to_ns("0.0004", 1000), Ok(0));
        assert_eq!(parse_decimal_to_ns("0.0005", 1000), Ok(1));
        assert_eq!(parse_decimal_to_ns("-0.0015", 1000), Ok(-2));
        assert_eq!(parse_decimal_to_ns("49.493", 1000), Ok(49_493));
        assert_eq!(parse_decimal_to_ns("2575285.879", 1), Ok(2_575_286));
    }

    #[test]
    fn valid_range_keeps_differences_in_i64() {
        assert!(time_in_range(TIME_LIMIT_NS) && time_in_range(-TIME_LIMIT_NS));
        assert!(!time_in_range(TIME_LIMIT_NS + 1) && !time_in_range(i64::MIN));
        // The widest difference of two valid times still fits.
        assert!(TIME_LIMIT_NS.checked_sub(-TIME_LIMIT_NS).is_some());
        assert_eq!(checked_end(5, 7), Ok(12));
        assert!(checked_end(TIME_LIMIT_NS, 1).is_err());
        assert!(checked_end(i64::MAX, i64::MAX).is_err());
        assert!(checked_time(i128::from(i64::MIN)).is_err());
    }

    #[test]
    fn exponents_and_errors() {
        assert_eq!(parse_decimal_to_ns("1.5e3", 1000), Ok(1_500_000));
        assert_eq!(parse_decimal_to_ns("15E-1", 1000), Ok(1_500));
        assert!(parse_decimal_to_ns("", 1000).is_err());
        assert!(parse_decimal_to_ns("abc", 1000).is_err());
        assert!(parse_decimal_to_ns("1.2.3", 1000).is_err());
        assert!(parse_decimal_to_ns("1e300", 1000).is_err());
        assert!(parse_decimal_to_ns("99999999999999999999", 1000).is_err());
        assert!(parse_decimal_to_ns("1e", 1000).is_err());
        assert!(parse_decimal_to_ns("1e+", 1000).is_err());
    }

    /// Every grammatical JSON number gives its value (Python's `json` reads them all): zero
    /// with any exponent, tiny values, exponents beyond `i32`, many digits; in bounded time.
    #[test]
    fn any_json_number_is_read() {
        let t = |s| parse_decimal_to_ns(s, 1000);
        assert_eq!(t("0e999999999"), Ok(0));
        assert_eq!(t("0e99999999999999999999"), Ok(0));
        assert_eq!(t("-0"), Ok(0));
        assert_eq!(t("-0.0e-5"), Ok(0));
        assert_eq!(t("1e-50"), Ok(0));
        assert_eq!(t("0.5e-2147483648"), Ok(0));
        assert_eq!(t("1E+2"), Ok(100_000));
        assert_eq!(t("1.6e15"), Ok(1_600_000_000_000_000_000));
        assert_eq!(
            t("0.000000000000000000000000000000000000000001e45"),
            Ok(1_000_000)
        );
        assert_eq!(
            t("1.00000000000000000000000000000000000000000001"),
            Ok(1000)
        );
        // 40 integer digits brought back down by the exponent.
        assert_eq!(t("1000000000000000000000000000000000000000e-39"), Ok(1000));
        assert!(t("1e99999999999999").is_err());
        assert!(t("1e400").is_err());
    }
}

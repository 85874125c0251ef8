//! Date-times and decimal times, parsed exactly to integer nanoseconds.

/// Parses `YYYY-MM-DD HH:MM:SS[.fraction][Z|±HH:MM]` (a `T` may replace the space) into
/// nanoseconds since 1970-01-01T00:00:00Z. Fractions beyond nanoseconds are truncated. `None`
/// when the text is not such a date-time.
pub fn parse_datetime_ns(s: &str) -> Option<i64> {
    let b = s.trim().as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let d = b.get(r)?;
        let mut v = 0i64;
        for &c in d {
            if !c.is_ascii_digit() {
                return None;
            }
            v = v * 10 + (c - b'0') as i64;
        }
        Some(v)
    };
    if b.len() < 19
        || b[4] != b'-'
        || b[7] != b'-'
        || !(b[10] == b' ' || b[10] == b'T')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let mut i = 19;
    let mut frac_ns = 0i64;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        let mut scale = 100_000_000i64;
        while let Some(c) = b.get(i).filter(|c| c.is_ascii_digit()) {
            frac_ns += (c - b'0') as i64 * scale;
            scale /= 10;
            i += 1;
        }
        if i == start {
            return None;
        }
    }
    let offset_s = match b.get(i) {
        None => 0,
        Some(b'Z') | Some(b'z') if i + 1 == b.len() => 0,
        Some(&sign @ (b'+' | b'-')) if b.len() == i + 6 && b[i + 3] == b':' => {
            let (oh, om) = (num(i + 1..i + 3)?, num(i + 4..i + 6)?);
            let off = oh * 3600 + om * 60;
            if sign == b'+' {
                off
            } else {
                -off
            }
        }
        _ => return None,
    };
    let days = days_from_civil(y, mo, d);
    let secs = days * 86_400 + h * 3600 + mi * 60 + sec - offset_s;
    secs.checked_mul(1_000_000_000)?.checked_add(frac_ns)
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Parses a decimal number of `unit_ns`-nanosecond units (`12`, `-3.5`, `0.000001`) exactly
/// into nanoseconds; digits below a nanosecond are rounded half away from zero. Exponent
/// notation falls back to floating point. `None` when the text is not a number.
pub fn parse_decimal_ns(s: &str, unit_ns: i64) -> Option<i64> {
    let t = s.trim();
    if t.contains(['e', 'E']) {
        let x: f64 = t.parse().ok()?;
        let ns = (x * unit_ns as f64).round();
        return (ns.is_finite() && ns.abs() < 9.2e18).then_some(ns as i64);
    }
    let (neg, body) = match t.as_bytes().first()? {
        b'-' => (true, &t[1..]),
        b'+' => (false, &t[1..]),
        _ => (false, t),
    };
    let (int, frac) = body.split_once('.').unwrap_or((body, ""));
    if (int.is_empty() && frac.is_empty()) || !int.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    if !frac.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let mut ns: i64 = 0;
    for c in int.bytes() {
        ns = ns.checked_mul(10)?.checked_add((c - b'0') as i64)?;
    }
    ns = ns.checked_mul(unit_ns)?;
    // The fraction, digit by digit: each digit is worth unit_ns / 10^k nanoseconds.
    let mut num: i128 = 0;
    let mut den: i128 = 1;
    for c in frac.bytes().take(30) {
        num = num * 10 + (c - b'0') as i128;
        den *= 10;
    }
    let part = (num * unit_ns as i128 * 2 + den) / (2 * den);
    ns = ns.checked_add(part as i64)?;
    Some(if neg { -ns } else { ns })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datetimes_parse_exactly() {
        assert_eq!(parse_datetime_ns("1970-01-01 00:00:00"), Some(0));
        assert_eq!(parse_datetime_ns("1970-01-02T00:00:01.5Z"), Some(86_401_500_000_000));
        // 2023-11-16 18:15:46 UTC is 1700158546 s after the epoch (date -u -d ... +%s).
        assert_eq!(parse_datetime_ns("2023-11-16 18:15:46.6805900"), Some(1_700_158_546_680_590_000));
        assert_eq!(parse_datetime_ns("2023-11-16 19:15:46+01:00"), parse_datetime_ns("2023-11-16 18:15:46"));
        assert_eq!(parse_datetime_ns("2024-02-29 00:00:00"), Some(1_709_164_800 * 1_000_000_000));
        for bad in ["2023-02-29 00:00:00", "2023-11-16", "2023-11-16 25:00:00", "2023-11-16 18:15:46.", "x"] {
            assert_eq!(parse_datetime_ns(bad), None, "{bad}");
        }
    }

    #[test]
    fn decimals_parse_exactly() {
        assert_eq!(parse_decimal_ns("12", 1_000_000_000), Some(12_000_000_000));
        assert_eq!(parse_decimal_ns("0.000000001", 1_000_000_000), Some(1));
        assert_eq!(parse_decimal_ns("3535999.123456789", 1_000_000_000), Some(3_535_999_123_456_789));
        assert_eq!(parse_decimal_ns("40", 1_000_000), Some(40_000_000));
        assert_eq!(parse_decimal_ns("-1.5", 1_000), Some(-1_500));
        assert_eq!(parse_decimal_ns("1e3", 1), Some(1000));
        for bad in ["", "-", "12a", "1.2.3", ".", "--1"] {
            assert_eq!(parse_decimal_ns(bad, 1), None, "{bad}");
        }
    }
}

//! Go's `time.ParseDuration` and `time.Duration.String`, including their error texts, because
//! Consul echoes both in the errors and values clients see (`Session TTL '5x' invalid: ...`,
//! `must be between [10s=24h0m0s]`).

/// Parses a Go duration string (`"15s"`, `"1m30s"`, `"-1.5h"`, `"0"`) into nanoseconds.
///
/// On failure returns Go's error text, e.g. `time: invalid duration "abc"`,
/// `time: missing unit in duration "5"` or `time: unknown unit "x" in duration "5x"`.
pub fn parse_go_duration(orig: &str) -> Result<i64, String> {
    let invalid = || format!("time: invalid duration {}", go_quote(orig));
    let mut s = orig;
    let mut neg = false;
    if let Some(c) = s.chars().next() {
        if c == '-' || c == '+' {
            neg = c == '-';
            s = &s[1..];
        }
    }
    if s == "0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err(invalid());
    }
    let mut total: u64 = 0;
    while !s.is_empty() {
        let c = s.as_bytes()[0];
        if !(c == b'.' || c.is_ascii_digit()) {
            return Err(invalid());
        }
        // Integer part.
        let int_len = s.bytes().take_while(u8::is_ascii_digit).count();
        let int_part = &s[..int_len];
        s = &s[int_len..];
        let mut v: u64 = 0;
        for d in int_part.bytes() {
            v = v
                .checked_mul(10)
                .and_then(|v| v.checked_add(u64::from(d - b'0')))
                .filter(|v| *v <= 1 << 63)
                .ok_or_else(invalid)?;
        }
        let pre = int_len > 0;
        // Fractional part.
        let mut frac: u64 = 0;
        let mut scale: f64 = 1.0;
        let mut post = false;
        if s.starts_with('.') {
            s = &s[1..];
            let frac_len = s.bytes().take_while(u8::is_ascii_digit).count();
            post = frac_len > 0;
            let mut overflow = false;
            for d in s[..frac_len].bytes() {
                if overflow {
                    continue;
                }
                match frac
                    .checked_mul(10)
                    .and_then(|f| f.checked_add(u64::from(d - b'0')))
                {
                    Some(f) if f <= 1 << 63 => {
                        frac = f;
                        scale *= 10.0;
                    }
                    _ => overflow = true,
                }
            }
            s = &s[frac_len..];
        }
        if !pre && !post {
            return Err(invalid());
        }
        // Unit.
        let unit_len = s
            .char_indices()
            .find(|(_, c)| *c == '.' || c.is_ascii_digit())
            .map(|(i, _)| i)
            .unwrap_or(s.len());
        if unit_len == 0 {
            return Err(format!("time: missing unit in duration {}", go_quote(orig)));
        }
        let unit = &s[..unit_len];
        s = &s[unit_len..];
        let mult: u64 = match unit {
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60 * 1_000_000_000,
            "h" => 3600 * 1_000_000_000,
            _ => {
                return Err(format!(
                    "time: unknown unit {} in duration {}",
                    go_quote(unit),
                    go_quote(orig)
                ))
            }
        };
        if v > (1 << 63) / mult {
            return Err(invalid());
        }
        v *= mult;
        if frac > 0 {
            v = v
                .checked_add((frac as f64 * (mult as f64 / scale)) as u64)
                .filter(|v| *v <= 1 << 63)
                .ok_or_else(invalid)?;
        }
        total = total
            .checked_add(v)
            .filter(|t| *t <= 1 << 63)
            .ok_or_else(invalid)?;
    }
    if neg {
        Ok((total as i128).wrapping_neg() as i64)
    } else if total > i64::MAX as u64 {
        Err(invalid())
    } else {
        Ok(total as i64)
    }
}

/// Formats nanoseconds the way Go's `time.Duration.String` does: `"10s"`, `"24h0m0s"`,
/// `"1.5ms"`, `"0s"`.
pub fn format_go_duration(ns: i64) -> String {
    if ns == 0 {
        return "0s".to_string();
    }
    let neg = ns < 0;
    let u = ns.unsigned_abs();
    let mut out = String::new();
    if u < 1_000_000_000 {
        let (unit, div) = if u < 1_000 {
            ("ns", 1)
        } else if u < 1_000_000 {
            ("\u{b5}s", 1_000)
        } else {
            ("ms", 1_000_000)
        };
        out.push_str(&frac_str(u, div));
        out.push_str(unit);
    } else {
        let h = u / 3_600_000_000_000;
        let rem = u % 3_600_000_000_000;
        let m = rem / 60_000_000_000;
        let s_ns = rem % 60_000_000_000;
        if h > 0 {
            out.push_str(&format!("{h}h{m}m"));
        } else if m > 0 {
            out.push_str(&format!("{m}m"));
        }
        out.push_str(&frac_str(s_ns, 1_000_000_000));
        out.push('s');
    }
    if neg {
        out.insert(0, '-');
    }
    out
}

/// `v / div` with the fraction printed without trailing zeros.
fn frac_str(v: u64, div: u64) -> String {
    let whole = v / div;
    let frac = v % div;
    if frac == 0 {
        return whole.to_string();
    }
    let width = div.to_string().len() - 1;
    let digits = format!("{frac:0width$}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

/// Go's `strconv.Quote` for the strings that appear here (printable ASCII and UTF-8).
pub(crate) fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// RFC 3339 in UTC with nanoseconds, as Go marshals a `time.Time`.
pub(crate) fn rfc3339(t: std::time::SystemTime) -> String {
    let d = t.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86400), secs.rem_euclid(86400));
    // Howard Hinnant's civil-from-days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:09}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        d.subsec_nanos()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_forms() {
        assert_eq!(parse_go_duration("15s"), Ok(15_000_000_000));
        assert_eq!(parse_go_duration("1m30s"), Ok(90_000_000_000));
        assert_eq!(parse_go_duration("1.5h"), Ok(5_400_000_000_000));
        assert_eq!(parse_go_duration("500ms"), Ok(500_000_000));
        assert_eq!(parse_go_duration("0"), Ok(0));
        assert_eq!(parse_go_duration("-2s"), Ok(-2_000_000_000));
        assert_eq!(parse_go_duration(".5s"), Ok(500_000_000));
        assert_eq!(parse_go_duration("1\u{b5}s"), Ok(1_000));
    }

    #[test]
    fn error_texts_match_go() {
        assert_eq!(
            parse_go_duration("abc").unwrap_err(),
            "time: invalid duration \"abc\""
        );
        assert_eq!(
            parse_go_duration("").unwrap_err(),
            "time: invalid duration \"\""
        );
        assert_eq!(
            parse_go_duration("5").unwrap_err(),
            "time: missing unit in duration \"5\""
        );
        assert_eq!(
            parse_go_duration("5x").unwrap_err(),
            "time: unknown unit \"x\" in duration \"5x\""
        );
        assert!(parse_go_duration("99999999999999999999h").is_err());
    }

    #[test]
    fn formats_like_go() {
        assert_eq!(format_go_duration(0), "0s");
        assert_eq!(format_go_duration(10_000_000_000), "10s");
        assert_eq!(format_go_duration(24 * 3_600_000_000_000), "24h0m0s");
        assert_eq!(format_go_duration(90_000_000_000), "1m30s");
        assert_eq!(format_go_duration(1_500_000), "1.5ms");
        assert_eq!(format_go_duration(1_500_000_000), "1.5s");
        assert_eq!(format_go_duration(100), "100ns");
        assert_eq!(format_go_duration(-1_000_000_000), "-1s");
    }
}

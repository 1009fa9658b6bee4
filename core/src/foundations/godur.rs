//! Go duration strings (`"15s"`, `"1m30s"`, `"250ms"`), as Consul stores TTLs.

use std::time::Duration;

/// Parses a Go `time.ParseDuration` string (non-negative values only).
///
/// Exact like Go's, in integers: each `<number><unit>` part is scaled in
/// nanoseconds (a fraction is rounded down, as Go does), and a total beyond
/// Go's `int64` nanoseconds (about 292 years) is no duration (`None`), as it is
/// an "invalid duration" to Go. Text from a server is taken as it comes, so
/// nothing here can overflow or panic.
pub fn parse_go_duration(s: &str) -> Option<Duration> {
    const MAX_NS: u64 = i64::MAX as u64;
    let s = s.strip_prefix('+').unwrap_or(s);
    if s == "0" {
        return Some(Duration::ZERO);
    }
    if s.is_empty() || s.starts_with('-') {
        return None;
    }
    let mut total: u64 = 0;
    let mut rest = s;
    while !rest.is_empty() {
        // The whole part (Go: leadingInt; an overflow is an error).
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let mut whole: u64 = 0;
        for b in rest[..int_len].bytes() {
            whole = whole.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
        }
        rest = &rest[int_len..];
        // The fraction (Go: leadingFraction; digits past u64's precision are dropped).
        let (mut frac, mut scale, mut frac_len) = (0u64, 1u64, 0usize);
        if let Some(after) = rest.strip_prefix('.') {
            frac_len = after.bytes().take_while(u8::is_ascii_digit).count();
            for b in after[..frac_len].bytes() {
                match (frac.checked_mul(10), scale.checked_mul(10)) {
                    (Some(f), Some(sc)) => {
                        frac = f + u64::from(b - b'0');
                        scale = sc;
                    }
                    _ => break,
                }
            }
            rest = &after[frac_len..];
        }
        if int_len == 0 && frac_len == 0 {
            return None; // no digits, e.g. ".s" or "s"
        }
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let per: u64 = match &rest[..unit_len] {
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return None, // a missing or unknown unit
        };
        rest = &rest[unit_len..];
        let mut part = whole.checked_mul(per)?;
        if frac > 0 {
            // As Go: float64(f) * (float64(unit) / scale), truncated.
            part = part.checked_add((frac as f64 * (per as f64 / scale as f64)) as u64)?;
        }
        total = total.checked_add(part)?;
        if total > MAX_NS {
            return None;
        }
    }
    Some(Duration::from_nanos(total))
}

/// Formats a duration for Consul: whole seconds as `"15s"`, else whole
/// milliseconds as `"1500ms"` (a positive sub-millisecond value becomes `"1ms"`),
/// zero as `"0s"`.
pub fn format_go_duration(d: Duration) -> String {
    if d.is_zero() {
        return "0s".to_string();
    }
    if d.subsec_nanos() == 0 {
        return format!("{}s", d.as_secs());
    }
    let ms = d.as_millis().max(1);
    format!("{ms}ms")
}

/// Formats a duration for people, as Go's `time.Duration.String` does for the
/// durations a client meets: `"25h0m0s"`, `"1m30s"`, `"1.5s"`, `"500ms"`
/// (sub-millisecond parts dropped).
pub(crate) fn human(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let secs = d.as_secs();
    let frac = d.subsec_millis();
    let s = if frac == 0 {
        format!("{}s", secs % 60)
    } else {
        let f = format!("{:03}", frac);
        format!("{}.{}s", secs % 60, f.trim_end_matches('0'))
    };
    match (secs / 3600, secs % 3600 / 60) {
        (0, 0) => s,
        (0, m) => format!("{m}m{s}"),
        (h, m) => format!("{h}h{m}m{s}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_for_people_as_go_does() {
        assert_eq!(human(Duration::from_secs(25 * 3600)), "25h0m0s");
        assert_eq!(human(Duration::from_secs(90)), "1m30s");
        assert_eq!(human(Duration::from_millis(1500)), "1.5s");
        assert_eq!(human(Duration::from_millis(10_250)), "10.25s");
        assert_eq!(human(Duration::from_millis(100)), "100ms");
        assert_eq!(human(Duration::from_secs(10)), "10s");
    }

    #[test]
    fn parses_go_durations() {
        assert_eq!(parse_go_duration("15s"), Some(Duration::from_secs(15)));
        assert_eq!(parse_go_duration("30000ms"), Some(Duration::from_secs(30)));
        assert_eq!(parse_go_duration("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_go_duration("1.5h"), Some(Duration::from_secs(5400)));
        assert_eq!(parse_go_duration("0"), Some(Duration::ZERO));
        assert_eq!(parse_go_duration("10us"), Some(Duration::from_micros(10)));
        assert_eq!(parse_go_duration(""), None);
        assert_eq!(parse_go_duration("15"), None);
        assert_eq!(parse_go_duration("s"), None);
        assert_eq!(parse_go_duration("5x"), None);
    }

    #[test]
    fn formats_for_consul() {
        assert_eq!(format_go_duration(Duration::ZERO), "0s");
        assert_eq!(format_go_duration(Duration::from_secs(15)), "15s");
        assert_eq!(format_go_duration(Duration::from_millis(1500)), "1500ms");
        assert_eq!(format_go_duration(Duration::from_nanos(10)), "1ms");
    }
}

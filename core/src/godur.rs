//! Go duration strings (`"15s"`, `"1m30s"`, `"250ms"`), as Consul stores TTLs.

use std::time::Duration;

/// Parses a Go `time.ParseDuration` string (non-negative values only).
pub fn parse_go_duration(s: &str) -> Option<Duration> {
    let s = s.strip_prefix('+').unwrap_or(s);
    if s == "0" {
        return Some(Duration::ZERO);
    }
    if s.is_empty() || s.starts_with('-') {
        return None;
    }
    let mut total: f64 = 0.0;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_len == 0 {
            return None;
        }
        let num: f64 = rest[..num_len].parse().ok()?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let ns_per = match &rest[..unit_len] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total += num * ns_per;
    }
    Some(Duration::from_nanos(total.round() as u64))
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

//! Human-readable sizes and durations ("64MiB", "50ms") for workload files and CLIs.

/// Bytes in a MiB, as an integer, for sizes counted in whole bytes.
pub const MIB_BYTES: u64 = 1 << 20;

/// Bytes in a GiB, as an integer, for sizes counted in whole bytes.
pub const GIB_BYTES: u64 = 1 << 30;

/// Bytes in a GiB, as a float for rates: every GiB/s iorepro prints is this many bytes a second.
pub const GIB: f64 = GIB_BYTES as f64;

/// Bytes in a MiB, as a float, for the sizes reports print in MiB.
pub const MIB: f64 = MIB_BYTES as f64;

/// Parses "4096", "4k", "4KiB", "1.5GiB", "2MB" into bytes (KB/MB are decimal, K/KiB binary).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let (value, unit) =
        split_number(s).ok_or_else(|| format!("`{s}` is not a size (try 4096, 64KiB, 1GiB)"))?;
    let mult: f64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kib" => 1024.0,
        "m" | "mib" => MIB,
        "g" | "gib" => GIB,
        "t" | "tib" => 1024.0f64.powi(4),
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        other => return Err(format!("`{s}`: unknown size unit `{other}`")),
    };
    Ok((value * mult).round() as u64)
}

/// Parses a duration into nanoseconds: "50ms", "2s", "1.5m", "100us",
/// "10ns", "1h30m", "1m 30s", "2 hours"; a bare number is seconds. The one
/// duration parser of every command line and workload file.
pub fn parse_duration_ns(s: &str) -> Result<u64, String> {
    let bad = || format!("`{s}` is not a duration (try 50ms, 2s, 10m, 1h30m)");
    let mut rest = s.trim();
    if rest.is_empty() {
        return Err(bad());
    }
    let mut total = 0f64;
    let mut parts = 0;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (num, tail) = rest.split_at(digits);
        let value: f64 = num.parse().map_err(|_| bad())?;
        let tail = tail.trim_start();
        let letters = tail
            .find(|c: char| c.is_ascii_digit() || c == '.' || c.is_whitespace())
            .unwrap_or(tail.len());
        let (unit, after) = tail.split_at(letters);
        let mult = match unit {
            // A bare number is seconds, but only alone ("1m30" is a typo).
            "" if parts == 0 && after.trim().is_empty() => 1e9,
            "s" | "sec" | "secs" | "second" | "seconds" => 1e9,
            "ns" | "nsec" | "nanos" => 1.0,
            "us" | "µs" | "usec" | "micros" => 1e3,
            "ms" | "msec" | "millis" => 1e6,
            "m" | "min" | "mins" | "minute" | "minutes" => 60e9,
            "h" | "hr" | "hrs" | "hour" | "hours" => 3600e9,
            "d" | "day" | "days" => 86_400e9,
            "" => return Err(bad()),
            other => return Err(format!("`{s}`: unknown duration unit `{other}`")),
        };
        total += value * mult;
        parts += 1;
        rest = after.trim_start();
    }
    Ok(total.round() as u64)
}

/// [`parse_duration_ns`] as a [`std::time::Duration`].
pub fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    parse_duration_ns(s).map(std::time::Duration::from_nanos)
}

/// "1.5GiB" -> (1.5, "GiB"): the leading number and the unit after it.
fn split_number(s: &str) -> Option<(f64, &str)> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    Some((num.parse().ok()?, unit.trim()))
}

/// `x` per second of `secs`; 0 for no time (a rate over nothing is none).
pub fn per_s(x: f64, secs: f64) -> f64 {
    if secs > 0.0 {
        x / secs
    } else {
        0.0
    }
}

/// Formats bytes with a binary unit, three significant digits.
pub fn fmt_bytes(b: f64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = b;
    let mut i = 0;
    while v.abs() >= 1024.0 && i < UNITS.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{v:.0} {}", UNITS[i])
    } else {
        format!("{v:.2} {}", UNITS[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_durations() {
        assert_eq!(parse_size("4k").unwrap(), 4096);
        assert_eq!(parse_size("64MiB").unwrap(), 64 << 20);
        assert_eq!(parse_size("1.5GiB").unwrap(), 3 << 29);
        assert_eq!(parse_size("2MB").unwrap(), 2_000_000);
        assert!(parse_size("abc").is_err());
        assert!(parse_size("3 parsecs").is_err());
        assert_eq!(parse_duration_ns("50ms").unwrap(), 50_000_000);
        assert_eq!(parse_duration_ns("2").unwrap(), 2_000_000_000);
        assert_eq!(parse_duration_ns("1.5m").unwrap(), 90_000_000_000);
        assert!(parse_duration_ns("5 fortnights").is_err());
        assert_eq!(parse_duration_ns("1h30m").unwrap(), 5_400_000_000_000);
        assert_eq!(parse_duration_ns("1m 30s").unwrap(), 90_000_000_000);
        assert_eq!(parse_duration_ns("2 hours").unwrap(), 7_200_000_000_000);
        assert_eq!(parse_duration_ns("0s").unwrap(), 0);
        assert_eq!(parse_duration_ns("100us").unwrap(), 100_000);
        assert!(parse_duration_ns("1m30").is_err());
        assert!(parse_duration_ns("").is_err());
        assert!(parse_duration_ns("ms").is_err());
        assert!(parse_duration_ns("-1s").is_err());
        assert_eq!(fmt_bytes(1536.0), "1.50 KiB");
    }
}

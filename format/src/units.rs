//! Human-readable sizes and durations ("64MiB", "50ms") for workload files and CLIs.

/// Bytes in a GiB, as a float for rates: every GiB/s iorepro prints is this many bytes a second.
pub const GIB: f64 = (1u64 << 30) as f64;

/// Bytes in a MiB, as a float, for the sizes reports print in MiB.
pub const MIB: f64 = (1u64 << 20) as f64;

/// Parses "4096", "4k", "4KiB", "1.5GiB", "2MB" into bytes (KB/MB are decimal, K/KiB binary).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let (value, unit) =
        split_number(s).ok_or_else(|| format!("`{s}` is not a size (try 4096, 64KiB, 1GiB)"))?;
    let mult: f64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kib" => 1024.0,
        "m" | "mib" => 1024.0 * 1024.0,
        "g" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "t" | "tib" => 1024.0f64.powi(4),
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        other => return Err(format!("`{s}`: unknown size unit `{other}`")),
    };
    Ok((value * mult).round() as u64)
}

/// Parses "50ms", "2s", "1.5m", "100us", "10ns" into nanoseconds; a bare number is seconds.
pub fn parse_duration_ns(s: &str) -> Result<u64, String> {
    let (value, unit) =
        split_number(s).ok_or_else(|| format!("`{s}` is not a duration (try 50ms, 2s, 10m)"))?;
    let mult = match unit {
        "" | "s" => 1e9,
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "m" | "min" => 60e9,
        "h" => 3600e9,
        other => return Err(format!("`{s}`: unknown duration unit `{other}`")),
    };
    Ok((value * mult).round() as u64)
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
        assert_eq!(fmt_bytes(1536.0), "1.50 KiB");
    }
}

//! The quantities configs and command lines name — durations ("50ms"), rates
//! ("100mbit"), sizes ("256KB") and fractions ("1%") — parsed, and printed back
//! so that what a `Display` prints parses to the same value.

use std::fmt;
use std::time::Duration;

/// A quantity that did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{text}' is not a {what} ({hint})")]
pub struct BadQuantity {
    /// The text given.
    pub text: String,
    /// What was wanted.
    pub what: &'static str,
    /// An example of the right form.
    pub hint: &'static str,
}

fn split_number(s: &str) -> Option<(f64, &str)> {
    let s = s.trim();
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == 'e' || c == '-' || c == '+'))
        .unwrap_or(s.len());
    // "1e-8" is a number, but "1e" followed by a unit letter is not ambiguous here
    // because no unit starts with 'e'.
    let value: f64 = s[..end].parse().ok()?;
    if !value.is_finite() || value < 0.0 {
        return None;
    }
    Some((value, s[end..].trim()))
}

/// Parses "250ns", "10us", "50ms", "1.5s"; a bare number is milliseconds.
pub fn parse_duration(s: &str) -> Result<Duration, BadQuantity> {
    let bad = || BadQuantity {
        text: s.into(),
        what: "duration",
        hint: "like 50ms, 10us or 1.5s",
    };
    let (v, unit) = split_number(s).ok_or_else(bad)?;
    let secs = match unit.to_ascii_lowercase().as_str() {
        "ns" => v / 1e9,
        "us" | "µs" => v / 1e6,
        "" | "ms" => v / 1e3,
        "s" | "sec" => v,
        "m" | "min" => v * 60.0,
        _ => return Err(bad()),
    };
    Ok(Duration::from_secs_f64(secs))
}

/// Parses a bit rate: "100mbit", "1gbit", "500kbit", "10mbps"; a bare number is
/// bits per second. Returns bits per second.
pub fn parse_rate(s: &str) -> Result<u64, BadQuantity> {
    let bad = || BadQuantity {
        text: s.into(),
        what: "rate",
        hint: "like 100mbit, 1gbit or 500kbit",
    };
    let (v, unit) = split_number(s).ok_or_else(bad)?;
    let mult = match unit.to_ascii_lowercase().as_str() {
        "" | "bit" | "bps" => 1.0,
        "kbit" | "kbps" | "k" => 1e3,
        "mbit" | "mbps" | "m" => 1e6,
        "gbit" | "gbps" | "g" => 1e9,
        _ => return Err(bad()),
    };
    Ok((v * mult) as u64)
}

/// Parses a size: "1500", "256KB", "64KiB", "10MB", "1GiB". Decimal units are
/// powers of 1000, binary ones of 1024. Returns bytes.
pub fn parse_size(s: &str) -> Result<u64, BadQuantity> {
    let bad = || BadQuantity {
        text: s.into(),
        what: "size",
        hint: "like 1500, 256KB or 64KiB",
    };
    let (v, unit) = split_number(s).ok_or_else(bad)?;
    let mult = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "kib" => 1024.0,
        "m" | "mb" => 1e6,
        "mib" => 1024.0 * 1024.0,
        "g" | "gb" => 1e9,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        _ => return Err(bad()),
    };
    Ok((v * mult) as u64)
}

/// Parses a probability: "1%", "0.01", "1e-8". Must lie in [0, 1].
pub fn parse_fraction(s: &str) -> Result<f64, BadQuantity> {
    let bad = || BadQuantity {
        text: s.into(),
        what: "fraction",
        hint: "like 1%, 0.01 or 1e-8",
    };
    let (v, unit) = split_number(s).ok_or_else(bad)?;
    let p = match unit {
        "" => v,
        "%" => v / 100.0,
        _ => return Err(bad()),
    };
    if (0.0..=1.0).contains(&p) {
        Ok(p)
    } else {
        Err(bad())
    }
}

/// "50ms", "1500us", "2s": the largest unit that shows the value exactly.
pub struct Dur(
    /// The duration.
    pub Duration,
);

impl fmt::Display for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = self.0.as_nanos();
        match ns {
            0 => f.write_str("0ms"),
            _ if ns.is_multiple_of(1_000_000_000) => write!(f, "{}s", ns / 1_000_000_000),
            _ if ns.is_multiple_of(1_000_000) => write!(f, "{}ms", ns / 1_000_000),
            _ if ns.is_multiple_of(1_000) => write!(f, "{}us", ns / 1_000),
            _ => write!(f, "{ns}ns"),
        }
    }
}

/// "1%", "0.25%", "1e-8": a percentage when that is exact, else the bare number.
pub struct Fraction(
    /// The probability.
    pub f64,
);

impl fmt::Display for Fraction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = self.0;
        let percent = p * 100.0;
        if p >= 1e-4 && percent / 100.0 == p {
            write!(f, "{percent}%")
        } else if p >= 1e-4 {
            write!(f, "{p}")
        } else {
            write!(f, "{p:e}")
        }
    }
}

/// "100mbit", "1gbit", "1500bit".
pub struct Rate(
    /// Bits per second.
    pub u64,
);

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = self.0;
        match r {
            0 => f.write_str("0bit"),
            _ if r.is_multiple_of(1_000_000_000) => write!(f, "{}gbit", r / 1_000_000_000),
            _ if r.is_multiple_of(1_000_000) => write!(f, "{}mbit", r / 1_000_000),
            _ if r.is_multiple_of(1_000) => write!(f, "{}kbit", r / 1_000),
            _ => write!(f, "{r}bit"),
        }
    }
}

/// "256KB", "64KiB", "1500".
pub struct Size(
    /// Bytes.
    pub u64,
);

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const KIB: u64 = 1024;
        const MIB: u64 = 1024 * 1024;
        let s = self.0;
        match s {
            0 => f.write_str("0"),
            _ if s.is_multiple_of(1_000_000) => write!(f, "{}MB", s / 1_000_000),
            _ if s.is_multiple_of(MIB) => write!(f, "{}MiB", s / MIB),
            _ if s.is_multiple_of(1_000) => write!(f, "{}KB", s / 1_000),
            _ if s.is_multiple_of(KIB) => write!(f, "{}KiB", s / KIB),
            _ => write!(f, "{s}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_parse_in_their_usual_spellings() {
        assert_eq!(parse_duration("50ms").unwrap(), Duration::from_millis(50));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("10us").unwrap(), Duration::from_micros(10));
        assert_eq!(parse_rate("100mbit").unwrap(), 100_000_000);
        assert_eq!(parse_size("256KB").unwrap(), 256_000);
        assert_eq!(parse_size("64KiB").unwrap(), 65_536);
        assert_eq!(parse_fraction("1%").unwrap(), 0.01);
        assert_eq!(parse_fraction("1e-8").unwrap(), 1e-8);
    }

    #[test]
    fn nonsense_is_refused_not_guessed() {
        assert!(parse_duration("fast").is_err());
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_rate("-3mbit").is_err());
        assert!(parse_fraction("150%").is_err());
        assert!(parse_size("12 bananas").is_err());
    }

    #[test]
    fn printed_quantities_parse_back_to_the_same_value() {
        for ns in [0, 1, 999, 1_000, 1_500_000, 50_000_000, 2_000_000_000] {
            let d = Duration::from_nanos(ns);
            assert_eq!(parse_duration(&Dur(d).to_string()).unwrap(), d);
        }
        for p in [0.0, 1.0, 0.01, 0.0025, 0.07, 1e-8, 3.3e-5, 0.123456789] {
            let text = Fraction(p).to_string();
            assert_eq!(parse_fraction(&text).unwrap(), p, "{text}");
        }
        for r in [0, 1_500, 64_000, 100_000_000, 10_000_000_000, 1_234_567] {
            assert_eq!(parse_rate(&Rate(r).to_string()).unwrap(), r);
        }
        for s in [
            0,
            1500,
            256_000,
            65_536,
            3 * 1024 * 1024,
            2_000_000,
            1_234_567,
        ] {
            assert_eq!(parse_size(&Size(s).to_string()).unwrap(), s);
        }
    }

    #[test]
    fn quantities_print_in_their_usual_units() {
        assert_eq!(Dur(Duration::from_millis(50)).to_string(), "50ms");
        assert_eq!(Dur(Duration::from_micros(1500)).to_string(), "1500us");
        assert_eq!(Fraction(0.01).to_string(), "1%");
        assert_eq!(Fraction(1e-8).to_string(), "1e-8");
        assert_eq!(Rate(100_000_000).to_string(), "100mbit");
        assert_eq!(Size(256_000).to_string(), "256KB");
        assert_eq!(Size(65_536).to_string(), "64KiB");
    }
}

//! The duration syntax shared by the coordinator config and the YAML job file.
//!
//! A duration is a bare number of seconds (`90`, or `90` as a string) or a sequence of whole
//! amounts with units, largest unit first, each unit at most once:
//!
//! | unit | meaning      |
//! |------|--------------|
//! | `d`  | days         |
//! | `h`  | hours        |
//! | `m`  | minutes      |
//! | `s`  | seconds      |
//! | `ms` | milliseconds |
//!
//! So `90s`, `10m`, `1h`, `1h30m` and `2m30s500ms` parse; `30m1h` (out of order), `1h1h`
//! (repeated), `1.5h` (fractional amount with a unit), `-5s` and `10 m` do not. In YAML a bare
//! number may also be fractional (`interval: 0.5`), which is read as seconds.
//!
//! The order rule keeps the syntax unambiguous to a reader; nothing is lost by it.

use std::fmt;
use std::time::Duration;

use serde::Deserializer;
use serde::de::{self, Visitor};

/// The units, largest first, with their length in milliseconds.
const UNITS: [(&str, u64); 5] = [
    ("d", 86_400_000),
    ("h", 3_600_000),
    ("m", 60_000),
    ("s", 1_000),
    ("ms", 1),
];

/// Parses `90`, `90s`, `10m`, `1h30m`, ... (see the module docs). The error says what is wrong
/// and what is accepted.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let text = s.trim();
    let bad = |why: &str| {
        format!(
            "invalid duration {s:?}: {why} (expected seconds like 90, or units like 90s, 10m, 1h, \
             1h30m)"
        )
    };
    if text.is_empty() {
        return Err(bad("empty"));
    }
    if text.bytes().all(|b| b.is_ascii_digit()) {
        let secs: u64 = text.parse().map_err(|_| bad("too large"))?;
        return Ok(Duration::from_secs(secs));
    }
    let mut total_ms: u64 = 0;
    // Index into UNITS of the next unit allowed: each one must be smaller than the last.
    let mut next_unit = 0;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(bad("expected a whole number before each unit"));
        }
        let amount: u64 = rest[..digits].parse().map_err(|_| bad("too large"))?;
        rest = &rest[digits..];
        let letters = rest.bytes().take_while(u8::is_ascii_alphabetic).count();
        let unit = &rest[..letters];
        rest = &rest[letters..];
        let Some(index) = UNITS.iter().position(|(name, _)| *name == unit) else {
            return Err(if unit.is_empty() {
                bad("a number without a unit must stand alone")
            } else {
                bad(&format!("unknown unit {unit:?}"))
            });
        };
        if index < next_unit {
            return Err(bad(
                "units must go from largest to smallest, each at most once",
            ));
        }
        next_unit = index + 1;
        let ms = amount
            .checked_mul(UNITS[index].1)
            .and_then(|ms| total_ms.checked_add(ms))
            .ok_or_else(|| bad("too large"))?;
        total_ms = ms;
    }
    Ok(Duration::from_millis(total_ms))
}

/// Formats a duration in the syntax [`parse_duration`] reads: `1h30m`, `90ms`, `0s`.
/// Sub-millisecond parts are dropped.
pub fn format_duration(d: Duration) -> String {
    let mut ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    if ms == 0 {
        return "0s".to_owned();
    }
    let mut out = String::new();
    for (name, len) in UNITS {
        if ms >= len {
            out.push_str(&format!("{}{name}", ms / len));
            ms %= len;
        }
    }
    out
}

/// For `#[serde(deserialize_with = "...")]`: a duration written as a YAML number of seconds or
/// as a [`parse_duration`] string.
pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
    deserializer.deserialize_any(DurationVisitor)
}

/// Like [`deserialize`] for an optional duration: null or a missing key (with
/// `#[serde(default)]`) is `None`.
pub fn deserialize_option<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Duration>, D::Error> {
    deserializer.deserialize_option(OptionVisitor)
}

struct DurationVisitor;

impl<'de> Visitor<'de> for DurationVisitor {
    type Value = Duration;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a duration: seconds like 90, or a string like 90s, 10m, 1h30m")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Duration, E> {
        Ok(Duration::from_secs(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Duration, E> {
        u64::try_from(v)
            .map(Duration::from_secs)
            .map_err(|_| E::custom(format!("invalid duration {v}: must not be negative")))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Duration, E> {
        Duration::try_from_secs_f64(v)
            .map_err(|_| E::custom(format!("invalid duration {v}: must be a finite number ≥ 0")))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Duration, E> {
        parse_duration(v).map_err(E::custom)
    }
}

struct OptionVisitor;

impl<'de> Visitor<'de> for OptionVisitor {
    type Value = Option<Duration>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        DurationVisitor.expecting(f)
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        deserialize(d).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn accepts_bare_seconds_and_unit_sequences() {
        assert_eq!(parse_duration("90"), Ok(secs(90)));
        assert_eq!(parse_duration(" 90s "), Ok(secs(90)));
        assert_eq!(parse_duration("10m"), Ok(secs(600)));
        assert_eq!(parse_duration("1h"), Ok(secs(3600)));
        assert_eq!(parse_duration("1h30m"), Ok(secs(5400)));
        assert_eq!(
            parse_duration("1d2h3m4s5ms"),
            Ok(Duration::from_millis(93_784_005))
        );
        assert_eq!(parse_duration("0s"), Ok(secs(0)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
    }

    #[test]
    fn rejects_what_a_reader_could_misread() {
        for bad in [
            "",
            "s",
            "10 m",
            "30m1h",
            "1h1h",
            "1.5h",
            "-5s",
            "5x",
            "10m5",
            "+5",
            "1e3",
            "5S",
            "99999999999999999999",
            "213503982334601d",
        ] {
            let err = parse_duration(bad).expect_err(bad);
            assert!(err.contains("invalid duration"), "{bad}: {err}");
        }
        assert!(
            parse_duration("30m1h")
                .unwrap_err()
                .contains("largest to smallest")
        );
        assert!(
            parse_duration("5x")
                .unwrap_err()
                .contains("unknown unit \"x\"")
        );
    }

    #[test]
    fn formatting_round_trips() {
        for text in ["0s", "90ms", "1m30s", "1h30m", "2d", "1d1h1m1s1ms"] {
            let d = parse_duration(text).unwrap();
            assert_eq!(format_duration(d), text);
            assert_eq!(parse_duration(&format_duration(d)), Ok(d));
        }
        assert_eq!(format_duration(secs(90)), "1m30s");
    }
}

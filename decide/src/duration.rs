//! Durations as people read and write them: `40s`, `1m 30s`, `250ms`.
//!
//! Two formats: [`fmt_duration`] echoes a configured value exactly (the
//! settings' messages, the guards' quiet period), and
//! [`fmt_duration_rounded`] rounds a measured one for people (how long a
//! lease was overdue, how long an acquisition waited). The lock crate
//! re-exports both at the paths they had before they moved here.

use std::time::Duration;

/// A duration as an operator writes it: `40s`, `1m 30s`, `250ms` — exact,
/// for echoing a configured value.
pub fn fmt_duration(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

/// A measured duration rounded for people: `850ms`, `3s`, `3.4s`, `1m 30s`,
/// `2h 5m` — never `3s 1ms`. Below a second to the millisecond, below ten
/// seconds to a tenth, below an hour to the second, then to the minute.
pub fn fmt_duration_rounded(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1_000 {
        return format!("{ms}ms");
    }
    if ms < 10_000 {
        let tenths = (ms + 50) / 100;
        return if tenths.is_multiple_of(10) {
            format!("{}s", tenths / 10)
        } else {
            format!("{}.{}s", tenths / 10, tenths % 10)
        };
    }
    let secs = (ms + 500) / 1_000;
    let rounded = if secs < 3_600 {
        secs
    } else {
        (secs + 30) / 60 * 60
    };
    fmt_duration(Duration::from_secs(
        u64::try_from(rounded).unwrap_or(u64::MAX),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 19 (C) #8: measured durations read as people say them.
    #[test]
    fn measured_durations_are_rounded_for_people() {
        let cases = [
            (0, "0ms"),
            (850, "850ms"),
            (999, "999ms"),
            (1_000, "1s"),
            (3_001, "3s"),
            (3_049, "3s"),
            (3_050, "3.1s"),
            (3_400, "3.4s"),
            (9_960, "10s"),
            (10_400, "10s"),
            (90_700, "1m 31s"),
            (7_505_000, "2h 5m"),
        ];
        for (ms, want) in cases {
            assert_eq!(
                fmt_duration_rounded(Duration::from_millis(ms)),
                want,
                "{ms} ms"
            );
        }
    }
}

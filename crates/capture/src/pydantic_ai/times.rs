//! When a PydanticAI history says things happened: its messages' and parts' `timestamp`
//! fields (RFC 3339, as pydantic writes datetimes: `2026-12-03T22:17:49.625944Z`, or with
//! an offset such as `+02:00`), and the clock an import stamps its events with.
//!
//! A timestamp that is missing, not a string, or not such a time is treated as absent:
//! the import keeps everything else of the history, and an event with no time of its own
//! takes the one before it (or the import's time when the history has none at all).

use std::time::{Duration, SystemTime};

use serde_json::{Map, Value};

/// The `timestamp` member of `obj` as a time, when it is one.
pub(super) fn timestamp(obj: &Map<String, Value>) -> Option<SystemTime> {
    obj.get("timestamp").and_then(Value::as_str).and_then(parse)
}

/// An RFC 3339 time with `Z` or a `±HH:MM` offset (any number of fraction digits up to
/// nine), as UTC.
pub(super) fn parse(text: &str) -> Option<SystemTime> {
    let text = text.trim();
    if let Some(utc) = text.strip_suffix('Z').or_else(|| text.strip_suffix('z')) {
        return humantime::parse_rfc3339_weak(utc).ok();
    }
    // An offset: the last six characters, `+HH:MM` or `-HH:MM`, after the seconds.
    let split = text.len().checked_sub(6)?;
    let (local, offset) = (text.get(..split)?, text.get(split..)?);
    let sign = match offset.as_bytes()[0] {
        b'+' => 1i64,
        b'-' => -1,
        _ => return None,
    };
    let (hours, minutes) = offset[1..].split_once(':')?;
    let (hours, minutes): (u64, u64) = (hours.parse().ok()?, minutes.parse().ok()?);
    if hours > 23 || minutes > 59 || !local.contains('T') {
        return None;
    }
    let at = humantime::parse_rfc3339_weak(local).ok()?;
    let shift = Duration::from_secs(hours * 3600 + minutes * 60);
    // Local time = UTC + offset, so UTC = local - offset.
    if sign > 0 {
        at.checked_sub(shift)
    } else {
        at.checked_add(shift)
    }
}

/// The milliseconds from `from` to `to`, when both are known and `to` is not earlier.
pub(super) fn millis_between(from: Option<SystemTime>, to: Option<SystemTime>) -> Option<u64> {
    let took = to?.duration_since(from?).ok()?;
    Some(u64::try_from(took.as_millis()).unwrap_or(u64::MAX))
}

/// The times an import stamps its events with: each the history's own where it has one,
/// never earlier than the event before it (a log reads forward in time).
#[derive(Debug, Default)]
pub(super) struct Clock {
    last: Option<SystemTime>,
}

impl Clock {
    /// The stamp for an event the history dates `at`: `at`, or the previous stamp when
    /// `at` is absent or earlier; `None` while the history has given no time at all.
    pub(super) fn stamp(&mut self, at: Option<SystemTime>) -> Option<SystemTime> {
        self.last = match (self.last, at) {
            (Some(last), Some(at)) => Some(last.max(at)),
            (last, at) => at.or(last),
        };
        self.last
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn millis(t: SystemTime) -> u128 {
        t.duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_millis()
    }

    #[test]
    fn utc_and_offset_times_parse_to_the_same_instant_and_bad_ones_are_absent() {
        let utc = parse("2026-12-03T22:17:49.625944Z").unwrap();
        assert_eq!(millis(utc), 1_796_336_269_625);
        assert_eq!(parse("2026-12-03T23:17:49.625944+01:00"), Some(utc));
        assert_eq!(parse("2026-12-03T20:47:49.625944-01:30"), Some(utc));
        for bad in [
            "",
            "yesterday",
            "2026-12-03",
            "2026-12-03T22:17:49+25:00",
            "12:00+01:00",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_clock_never_goes_back_and_fills_gaps_with_the_last_time() {
        let t = |ms| SystemTime::UNIX_EPOCH + Duration::from_millis(ms);
        let mut clock = Clock::default();
        assert_eq!(clock.stamp(None), None);
        assert_eq!(clock.stamp(Some(t(10))), Some(t(10)));
        assert_eq!(clock.stamp(Some(t(5))), Some(t(10)));
        assert_eq!(clock.stamp(None), Some(t(10)));
        assert_eq!(clock.stamp(Some(t(30))), Some(t(30)));
        assert_eq!(millis_between(Some(t(10)), Some(t(30))), Some(20));
        assert_eq!(millis_between(Some(t(30)), Some(t(10))), None);
        assert_eq!(millis_between(None, Some(t(10))), None);
    }
}

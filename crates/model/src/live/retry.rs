//! The waits between attempts: what a response's `Retry-After` asks for, and the
//! jittered backoff and server waits that keep many clients from coming back together.

use std::time::{Duration, SystemTime};

use reqwest::header::HeaderMap;

use super::RetryPolicy;

/// The wait a response asks for: `retry-after-ms`, `retry-after` in seconds, or
/// `retry-after` as an HTTP date (a date in the past is no wait).
pub(crate) fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let get = |k: &str| headers.get(k).and_then(|v| v.to_str().ok()).map(str::trim);
    if let Some(ms) = get("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        return (ms.is_finite() && (0.0..1e12).contains(&ms))
            .then(|| Duration::from_secs_f64(ms / 1000.0));
    }
    let value = get("retry-after")?;
    if let Ok(s) = value.parse::<f64>() {
        return (s.is_finite() && (0.0..1e9).contains(&s)).then(|| Duration::from_secs_f64(s));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// The backoff before retry `retry` (0-based): exponential up to `max_backoff`, then a
/// random part of it taken off (between none and half), so that many clients that failed
/// together do not all come back together.
pub(crate) fn jittered_backoff(policy: &RetryPolicy, retry: u32) -> Duration {
    let full = policy
        .initial_backoff
        .saturating_mul(2u32.saturating_pow(retry))
        .min(policy.max_backoff);
    full.mul_f64(1.0 - fastrand::f64() * 0.5)
}

/// The wait before retrying when the server said how long to wait: that long, plus a
/// random part of up to a quarter of it (at most 10 s more), never less. Hundreds of runs
/// of one batch told the same `Retry-After` then come back spread out, not in lockstep.
pub(crate) fn jittered_server_wait(wait: Duration) -> Duration {
    wait + wait
        .mul_f64(fastrand::f64() * 0.25)
        .min(Duration::from_secs(10))
}

#[cfg(test)]
mod tests {
    use reqwest::header::HeaderValue;

    use super::*;

    #[test]
    fn retry_after_reads_seconds_milliseconds_and_http_dates() {
        let now = httpdate::parse_http_date("Thu, 03 Dec 2026 17:00:00 GMT").unwrap();
        let mut h = HeaderMap::new();
        h.insert("retry-after", HeaderValue::from_static("2.5"));
        assert_eq!(retry_after(&h, now), Some(Duration::from_millis(2500)));
        h.insert(
            "retry-after",
            HeaderValue::from_static("Thu, 03 Dec 2026 17:00:07 GMT"),
        );
        assert_eq!(retry_after(&h, now), Some(Duration::from_secs(7)));
        h.insert(
            "retry-after",
            HeaderValue::from_static("Thu, 03 Dec 2026 16:00:00 GMT"),
        );
        assert_eq!(retry_after(&h, now), Some(Duration::ZERO));
        h.insert("retry-after", HeaderValue::from_static("soon"));
        assert_eq!(retry_after(&h, now), None);
        h.insert("retry-after-ms", HeaderValue::from_static("120"));
        assert_eq!(retry_after(&h, now), Some(Duration::from_millis(120)));
    }

    #[test]
    fn server_waits_are_kept_and_spread_by_at_most_a_quarter() {
        let wait = Duration::from_secs(4);
        let waits: Vec<Duration> = (0..200).map(|_| jittered_server_wait(wait)).collect();
        assert!(waits.iter().all(|w| *w >= wait && *w <= wait + wait / 4));
        // Spread out, not one value for everyone.
        let distinct: std::collections::BTreeSet<_> = waits.iter().collect();
        assert!(
            distinct.len() > 100,
            "only {} distinct waits",
            distinct.len()
        );
        assert!(jittered_server_wait(Duration::from_secs(3600)) <= Duration::from_secs(3610));
        assert_eq!(jittered_server_wait(Duration::ZERO), Duration::ZERO);
    }

    #[test]
    fn backoff_is_jittered_within_half_of_the_exponential_step() {
        let policy = RetryPolicy::default();
        let mut seen = std::collections::HashSet::new();
        for _ in 0..50 {
            let d = jittered_backoff(&policy, 2);
            assert!(
                d <= Duration::from_secs(2) && d >= Duration::from_secs(1),
                "{d:?}"
            );
            seen.insert(d);
        }
        assert!(seen.len() > 1, "the waits must differ");
        assert!(jittered_backoff(&policy, 30) <= policy.max_backoff);
    }
}

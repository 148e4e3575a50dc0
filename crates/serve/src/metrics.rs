//! What `GET /metrics` shows, in the OpenMetrics text format Prometheus scrapes
//! (`prometheus-client` encodes it): the runs in flight, the runs ended by status, the time
//! from a run request's arrival to its first event on the wire, and the store's errors.
//! Every name starts with `provrun_` (docs/serve.md lists them).

use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The content type of the exposition.
pub(crate) const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The statuses a run ends with (`not_started`: it could not start, nothing was written).
const STATUSES: [&str; 5] = ["finished", "failed", "cancelled", "paused", "not_started"];

/// What a store error happened doing: putting a bundle, or reading one back.
#[derive(Debug, Clone, Copy)]
pub(crate) enum StoreOp {
    /// A bundle put in a bucket store.
    Put,
    /// A bundle read for a route (its page, tar or report).
    Read,
}

impl StoreOp {
    fn label(self) -> &'static str {
        match self {
            StoreOp::Put => "put",
            StoreOp::Read => "read",
        }
    }
}

type Labels = Vec<(&'static str, &'static str)>;

/// The server's metrics, and the registry that encodes them.
pub(crate) struct Metrics {
    registry: Registry,
    in_flight: Gauge,
    ended: Family<Labels, Counter>,
    first_event: Histogram,
    store_errors: Family<Labels, Counter>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Metrics {
    /// Every metric at zero, each status and store operation shown from the start.
    pub(crate) fn new() -> Self {
        let mut registry = Registry::default();
        let in_flight = Gauge::default();
        registry.register(
            "provrun_runs_in_flight",
            "Runs executing now (resumes included)",
            in_flight.clone(),
        );
        let ended = Family::<Labels, Counter>::default();
        registry.register(
            "provrun_runs_ended",
            "Run segments ended, by status (finished, failed, cancelled, paused, not_started)",
            ended.clone(),
        );
        for status in STATUSES {
            let _ = ended.get_or_create(&vec![("status", status)]);
        }
        // 5 ms to about 41 s.
        let first_event = Histogram::new(exponential_buckets(0.005, 2.0, 14));
        registry.register(
            "provrun_run_first_event_seconds",
            "Time from a run request's arrival to its first event handed to the connection",
            first_event.clone(),
        );
        let store_errors = Family::<Labels, Counter>::default();
        registry.register(
            "provrun_store_errors",
            "Errors of the bundle store, by operation (put, read)",
            store_errors.clone(),
        );
        for op in [StoreOp::Put, StoreOp::Read] {
            let _ = store_errors.get_or_create(&vec![("operation", op.label())]);
        }
        Self {
            registry,
            in_flight,
            ended,
            first_event,
            store_errors,
        }
    }

    /// A run began executing.
    pub(crate) fn run_began(&self) {
        self.in_flight.inc();
    }

    /// A run stopped executing, with this status (`RunStatus::as_str`, or `not_started`).
    pub(crate) fn run_ended(&self, status: &'static str) {
        self.in_flight.dec();
        self.ended.get_or_create(&vec![("status", status)]).inc();
    }

    /// A run stopped executing here without ending here (another replica took it over
    /// and ends it, counting it there).
    pub(crate) fn run_left(&self) {
        self.in_flight.dec();
    }

    /// A run of another replica (lost) was ended here, with this status: counted ended,
    /// never in flight here.
    pub(crate) fn run_ended_for_another(&self, status: &'static str) {
        self.ended.get_or_create(&vec![("status", status)]).inc();
    }

    /// A run's first event went out this long after its request arrived.
    pub(crate) fn first_event(&self, after: Duration) {
        self.first_event.observe(after.as_secs_f64());
    }

    /// The store failed at `op`.
    pub(crate) fn store_error(&self, op: StoreOp) {
        self.store_errors
            .get_or_create(&vec![("operation", op.label())])
            .inc();
    }

    /// The exposition, ending with `# EOF`.
    pub(crate) fn encode(&self) -> String {
        let mut text = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exposition_names_every_metric_and_ends() {
        let m = Metrics::new();
        m.run_began();
        m.run_ended("finished");
        m.first_event(Duration::from_millis(12));
        m.store_error(StoreOp::Put);
        let text = m.encode();
        assert!(text.contains("provrun_runs_in_flight 0"), "{text}");
        assert!(
            text.contains("provrun_runs_ended_total{status=\"finished\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("provrun_runs_ended_total{status=\"failed\"} 0"),
            "{text}"
        );
        assert!(
            text.contains("provrun_run_first_event_seconds_count 1"),
            "{text}"
        );
        assert!(
            text.contains("provrun_store_errors_total{operation=\"put\"} 1"),
            "{text}"
        );
        assert!(text.ends_with("# EOF\n"), "{text}");
    }
}

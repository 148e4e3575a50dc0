//! One figure of a scenario, printed as one JSON line, and this process's peak RSS.

use serde_json::{Value, json};

/// One figure, printed as one JSON line.
pub(crate) struct Figure {
    pub(crate) name: String,
    pub(crate) runs: u64,
    pub(crate) seconds: f64,
    pub(crate) events: Option<u64>,
    pub(crate) latencies_ms: Vec<f64>,
    pub(crate) skipped: Option<String>,
    /// Why the scenario failed (it measured nothing), when it did.
    pub(crate) failed: Option<String>,
    /// Scenario-specific figures, appended to the line.
    pub(crate) extra: Vec<(&'static str, Value)>,
}

impl Figure {
    pub(crate) fn new(name: &str, runs: u64, seconds: f64) -> Self {
        Self {
            name: name.to_string(),
            runs,
            seconds,
            events: None,
            latencies_ms: Vec::new(),
            skipped: None,
            failed: None,
            extra: Vec::new(),
        }
    }

    pub(crate) fn print(&self) {
        let mut lat = self.latencies_ms.clone();
        lat.sort_by(f64::total_cmp);
        let pct = |p: f64| -> Value {
            if lat.is_empty() {
                return Value::Null;
            }
            let i = ((p * lat.len() as f64).ceil() as usize).clamp(1, lat.len()) - 1;
            json!(round(lat[i], 3))
        };
        let per_s = |n: f64| -> Value {
            if self.seconds > 0.0 && self.skipped.is_none() && self.failed.is_none() {
                json!(round(n / self.seconds, 2))
            } else {
                Value::Null
            }
        };
        // Keys in the order issue 9 lists them.
        let mut line = format!(
            "{{\"name\":{},\"runs\":{},\"seconds\":{},\"runs_per_second\":{},\"events_per_second\":{},\"p50_ms\":{},\"p99_ms\":{},\"peak_rss_mb\":{}",
            json!(self.name),
            self.runs,
            json!(round(self.seconds, 4)),
            per_s(self.runs as f64),
            self.events.map_or(Value::Null, |e| per_s(e as f64)),
            pct(0.50),
            pct(0.99),
            json!(round(peak_rss_mb(), 1)),
        );
        for (k, v) in &self.extra {
            line.push_str(&format!(",{}:{v}", json!(k)));
        }
        if let Some(why) = &self.skipped {
            line.push_str(&format!(",\"skipped\":{}", json!(why)));
        }
        if let Some(why) = &self.failed {
            line.push_str(&format!(",\"failed\":{}", json!(why)));
        }
        line.push('}');
        // Printed at once, so a later figure's failure loses none made before it.
        println!("{line}");
        use std::io::Write as _;
        let _ = std::io::stdout().flush();
    }
}

pub(crate) fn round(x: f64, digits: i32) -> f64 {
    let f = 10f64.powi(digits);
    (x * f).round() / f
}

/// This process's peak resident set (`VmHWM`), in MiB.
fn peak_rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

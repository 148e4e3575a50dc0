//! The bench's report: the goals checked against the figures, the machine the figures
//! come from, and the table printed for people.

use std::process::Command;

use super::dirs::target_dir;
use super::line::{Line, field};
use crate::root;

/// One goal of issue 9, checked against the figures.
pub(super) struct Goal {
    scenario: &'static str,
    what: &'static str,
    value: Option<f64>,
    target: f64,
    at_most: bool,
}

impl Goal {
    fn met(&self) -> Option<bool> {
        self.value.map(|v| {
            if self.at_most {
                v <= self.target
            } else {
                v >= self.target
            }
        })
    }

    pub(super) fn json(&self) -> String {
        let v = self.value.map_or("null".to_string(), |v| format!("{v:.3}"));
        let met = self.met().map_or("null".to_string(), |m| m.to_string());
        format!(
            "{{\"name\":\"goal:{}\",\"measure\":\"{}\",\"value\":{v},\"target\":{},\"met\":{met}}}",
            self.scenario, self.what, self.target
        )
    }
}

// One table of goals, each beside the figures it reads; split, the table would scatter.
pub(super) fn goals(results: &[Line]) -> Vec<Goal> {
    // A skipped scenario measured nothing: its goal is "not measured", never met.
    let get = |name: &str, key: &str| {
        results
            .iter()
            .find(|l| {
                l.name == name
                    && field(&l.json, "skipped").is_none()
                    && field(&l.json, "failed").is_none()
            })
            .and_then(|l| l.get(key))
    };
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    };
    vec![
        Goal {
            scenario: "scripted_k10_c1",
            what: "runs/s vs peer",
            value: ratio(
                get("scripted_k10_c1", "runs_per_second"),
                get("peer:scripted_k10_c1", "runs_per_second"),
            ),
            target: 100.0,
            at_most: false,
        },
        Goal {
            scenario: "scripted_k10_c100",
            what: "runs/s vs peer",
            value: ratio(
                get("scripted_k10_c100", "runs_per_second"),
                get("peer:scripted_k10_c100", "runs_per_second"),
            ),
            target: 100.0,
            at_most: false,
        },
        Goal {
            scenario: "scripted_k10_c100_fsync",
            what: "events/s vs one fdatasync per event",
            value: ratio(
                get("scripted_k10_c100_fsync", "events_per_second"),
                get("fsync_per_event_baseline", "events_per_second"),
            ),
            target: 5.0,
            at_most: false,
        },
        Goal {
            scenario: "scripted_k10_c1",
            what: "files per 10-step bundle, input/ excluded",
            value: get("scripted_k10_c1", "files_per_run"),
            target: 12.0,
            at_most: true,
        },
        Goal {
            scenario: "long_k300",
            what: "bundle bytes ÷ distinct tool results",
            value: get("long_k300", "size_vs_distinct"),
            target: 4.0,
            at_most: true,
        },
        Goal {
            scenario: "long_k300",
            what: "bundle bytes, K=300 ÷ K=30",
            value: ratio(
                get("long_k300", "bundle_bytes"),
                get("long_k30", "bundle_bytes"),
            ),
            target: 12.0,
            at_most: true,
        },
        Goal {
            scenario: "long_k300",
            what: "run time, K=300 ÷ K=30",
            value: ratio(get("long_k300", "seconds"), get("long_k30", "seconds")),
            target: 12.0,
            at_most: true,
        },
        Goal {
            scenario: "long_k300",
            what: "verify time, pack ÷ loose blobs",
            value: ratio(
                get("long_k300", "verify_seconds"),
                get("long_k300_loose", "verify_seconds"),
            ),
            target: 1.0,
            at_most: true,
        },
        Goal {
            scenario: "concurrent_10k_idle",
            what: "peak RSS MiB",
            value: get("concurrent_10k_idle", "peak_rss_mb"),
            target: 256.0,
            at_most: true,
        },
        Goal {
            scenario: "batch_10k",
            what: "runs/s (K=3)",
            value: get("batch_10k", "runs_per_second"),
            target: 1700.0,
            at_most: false,
        },
        Goal {
            scenario: "batch_10k_flush",
            what: "runs/s (K=3), no syncs as the library's",
            value: get("batch_10k_flush", "runs_per_second"),
            target: 1700.0,
            at_most: false,
        },
        Goal {
            scenario: "verify_1g",
            what: "throughput vs sha256sum",
            value: ratio(
                get("verify_1g_sha256sum", "seconds"),
                get("verify_1g", "seconds"),
            ),
            target: 0.8,
            at_most: false,
        },
        Goal {
            scenario: "cli_single_run",
            what: "process wall time, peer ÷ ours",
            value: ratio(
                get("peer:cli_single_run", "p50_ms"),
                get("cli_single_run", "p50_ms"),
            ),
            target: 50.0,
            at_most: false,
        },
        Goal {
            scenario: "exec_trail",
            what: "wall time with the process trail ÷ without (1,000 execs)",
            value: get("exec_trail", "overhead_ratio"),
            target: 1.05,
            at_most: true,
        },
        Goal {
            scenario: "serve_200",
            what: "p99 ms to the first event",
            value: get("serve_200", "p99_ms"),
            target: 50.0,
            at_most: true,
        },
        Goal {
            scenario: "python_overhead",
            what: "run with a bundle ÷ plain PydanticAI run",
            value: get("python_overhead", "ratio"),
            target: 1.3,
            at_most: true,
        },
        Goal {
            scenario: "python_overhead",
            what: "the same, durability flush (no syncs)",
            value: get("python_overhead", "ratio_flush"),
            target: 1.3,
            at_most: true,
        },
    ]
}

/// The machine the figures come from, in a few lines: CPU, cores, memory, kernel, the
/// file system of the bench folder, the commit and the load when the bench began.
pub(super) fn machine() -> String {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let cpu = read("/proc/cpuinfo")
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|v| v.trim_start_matches([' ', '\t', ':']).to_string())
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem_gib = read("/proc/meminfo")
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0 / 1024.0);
    let kernel = read("/proc/sys/kernel/osrelease").trim().to_string();
    let dir = target_dir().join("bench-tmp");
    let fs = Command::new("stat")
        .args(["-f", "-c", "%T"])
        .arg(&dir)
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let commit = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(root())
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    format!(
        "machine: {cpu}, {cores} cores, {mem_gib:.1} GiB, Linux {kernel}\n\
         bench folder: {} ({fs}); commit {commit}; load at the start: {}",
        dir.display(),
        loadavg()
    )
}

pub(super) fn machine_json(machine: &str) -> String {
    format!(
        "{{\"name\":\"machine\",\"description\":\"{}\",\"load_at_end\":\"{}\"}}",
        machine
            .replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('\n', "; "),
        loadavg()
    )
}

/// `/proc/loadavg`'s three load averages.
pub(super) fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

pub(super) fn print_header() {
    println!(
        "\n{:<28} {:>6} {:>9} {:>10} {:>11} {:>9} {:>9} {:>8}",
        "scenario", "runs", "seconds", "runs/s", "events/s", "p50 ms", "p99 ms", "rss MiB"
    );
}

/// One figure as a table row; a skipped or failed one says why.
pub(super) fn print_row(l: &Line) {
    let cell = |k: &str| {
        field(&l.json, k)
            .filter(|v| v != "null")
            .unwrap_or_else(|| "-".into())
    };
    let note = match (field(&l.json, "skipped"), field(&l.json, "failed")) {
        (_, Some(w)) => format!("  FAILED: {w}"),
        (Some(w), None) => format!("  SKIPPED: {w}"),
        _ => String::new(),
    };
    println!(
        "{:<28} {:>6} {:>9} {:>10} {:>11} {:>9} {:>9} {:>8}{note}",
        l.name,
        cell("runs"),
        cell("seconds"),
        cell("runs_per_second"),
        cell("events_per_second"),
        cell("p50_ms"),
        cell("p99_ms"),
        cell("peak_rss_mb"),
    );
}

pub(super) fn print_table(results: &[Line], goals: &[Goal], repeat: usize) {
    print_header();
    for l in results {
        print_row(l);
    }
    if repeat > 1 {
        println!("(median of {repeat} runs of each scenario)");
    }
    println!("\ngoals:");
    for g in goals {
        let v = g.value.map_or("n/a".to_string(), |v| format!("{v:.2}"));
        let met = match g.met() {
            Some(true) => "met",
            Some(false) => "NOT met",
            None => "not measured",
        };
        let cmp = if g.at_most { "≤" } else { "≥" };
        println!(
            "  {:<26} {:<38} {v:>10} (goal {cmp} {}): {met}",
            g.scenario, g.what, g.target
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(json: &str) -> Line {
        Line {
            name: field(json, "name").unwrap(),
            json: json.to_string(),
        }
    }

    #[test]
    fn a_skipped_scenario_is_not_measured_rather_than_met() {
        let skipped = line(
            r#"{"name":"concurrent_10k_idle","runs":10000,"seconds":0.0,"peak_rss_mb":4.6,"skipped":"limit"}"#,
        );
        let g = goals(&[skipped]);
        let idle = g
            .iter()
            .find(|g| g.scenario == "concurrent_10k_idle")
            .unwrap();
        assert_eq!(idle.value, None);
        assert_eq!(idle.met(), None);
        let ran = line(
            r#"{"name":"concurrent_10k_idle","runs":10000,"seconds":7.9,"peak_rss_mb":201.7}"#,
        );
        let g = goals(&[ran]);
        let idle = g
            .iter()
            .find(|g| g.scenario == "concurrent_10k_idle")
            .unwrap();
        assert_eq!(idle.value, Some(201.7));
        assert_eq!(idle.met(), Some(true));
        // A failed scenario measured nothing either.
        let failed = line(
            r#"{"name":"concurrent_10k_idle","runs":10000,"seconds":3.1,"peak_rss_mb":90.0,"failed":"3 of 10000 runs failed"}"#,
        );
        let g = goals(&[failed]);
        let idle = g
            .iter()
            .find(|g| g.scenario == "concurrent_10k_idle")
            .unwrap();
        assert_eq!(idle.met(), None);
    }
}

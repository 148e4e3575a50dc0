//! `provrun doctor`: what this machine gives the sandbox, one line per item with `ok` or
//! `missing` and the fix, from the sandbox's own probe ([`Sandbox::check_machine`]) and
//! the open-files limit against the runs asked for. Exit 0 when commands would run with
//! every layer the evidence records, 1 otherwise.

use provrun_sandbox::{Limits, MachineCheck, Sandbox};
use serde_json::json;

use crate::inert::{inert, inert_json};
use crate::style::Painter;
use crate::{EXIT_FAILED, EXIT_OK, fail};

/// Descriptors one run holds while its tools work: its log, its blob pack and its three
/// sandbox folders.
const FILES_PER_WORKING_RUN: u64 = 5;
/// Descriptors one run holds while it waits on its model (it gives its folders back):
/// docs/benchmarks.md counted 1.4 for 10,000 waiting runs.
const FILES_PER_WAITING_RUN: u64 = 2;
/// Descriptors the process holds besides its runs (standard streams, the runtime, the
/// runs file, sockets).
const FILES_BASE: u64 = 64;

/// Arguments of `provrun doctor`.
#[derive(Debug, clap::Args)]
pub(crate) struct DoctorArgs {
    /// Print one JSON object: `{"ok", "fully_confined", "checks": [{"name", "status",
    /// "detail", "fix"}]}`.
    #[arg(long)]
    json: bool,
    /// The runs you mean to have in flight at once (`batch --concurrency`); the
    /// open-files limit is checked against it.
    #[arg(long, value_name = "N", default_value_t = 16,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    concurrency: u32,
}

/// The open-files limit against `concurrency` runs in flight: enough when every run may
/// wait on its model at once; the fix names what all of them working at once need.
fn open_files_check(concurrency: u32) -> MachineCheck {
    let n = u64::from(concurrency);
    let needed = FILES_BASE + FILES_PER_WAITING_RUN * n;
    let busy = FILES_BASE + FILES_PER_WORKING_RUN * n;
    let (soft, hard) = provrun_sandbox::open_files_limit();
    let shown = |l: Option<u64>| l.map_or_else(|| "unlimited".to_string(), |n| n.to_string());
    let ok = soft.is_none_or(|s| s >= needed);
    let detail = format!(
        "soft limit {} (hard {}); {concurrency} runs in flight need about {needed} while they \
         wait on their models, {busy} while all their tools work",
        shown(soft),
        shown(hard)
    );
    let fix = if hard.is_none_or(|h| h >= busy) {
        format!(
            "raise the soft limit before starting provrun: `ulimit -n {busy}` (systemd: \
             `LimitNOFILE={busy}`)"
        )
    } else {
        format!(
            "raise the hard limit to {busy} (/etc/security/limits.conf, systemd \
             `LimitNOFILE=`, `docker run --ulimit nofile={busy}`), or run fewer at once"
        )
    };
    MachineCheck {
        name: "open_files".to_string(),
        ok,
        detail,
        fix: (!ok).then_some(fix),
    }
}

pub(crate) fn doctor(args: &DoctorArgs) -> u8 {
    let report = Sandbox::check_machine(&Limits::default());
    let mut checks = report.checks;
    checks.push(open_files_check(args.concurrency));
    let code = if report.fully_confined {
        EXIT_OK
    } else {
        EXIT_FAILED
    };
    if args.json {
        let value = json!({
            "ok": report.fully_confined,
            "fully_confined": report.fully_confined,
            "checks": checks.iter().map(|c| json!({
                "name": c.name,
                "status": if c.ok { "ok" } else { "missing" },
                "detail": c.detail,
                "fix": c.fix,
            })).collect::<Vec<_>>(),
        });
        return match serde_json::to_string_pretty(&value) {
            Ok(text) => {
                out!("{}", inert_json(&text));
                code
            }
            Err(e) => fail(EXIT_FAILED, format!("cannot print the report: {e}")),
        };
    }
    let paint = Painter::stdout();
    out!("what this machine gives the sandbox:");
    for c in &checks {
        let status = if c.ok {
            paint.good("ok     ")
        } else {
            paint.bad("missing")
        };
        out!("  {status} {:<14} {}", c.name, inert(&c.detail));
        if let Some(fix) = &c.fix {
            out!("          {:<14} fix: {}", "", inert(fix));
        }
    }
    let missing = |pick: fn(&str) -> bool| -> Vec<&str> {
        checks
            .iter()
            .filter(|c| !c.ok && pick(&c.name))
            .map(|c| c.name.as_str())
            .collect()
    };
    let layers = missing(|n| !["bubblewrap", "command_user", "open_files"].contains(&n));
    if report.fully_confined {
        out!(
            "{}",
            paint.good("commands run fully confined: every layer the evidence records is here")
        );
    } else {
        out!("{}", paint.bad("commands would not run fully confined"));
    }
    if !layers.is_empty() {
        out!(
            "  missing {}: commands are refused unless the agent sets allow_degraded_sandbox = \
             true (then they run without those layers, on record)",
            layers.join(", ")
        );
    }
    if !missing(|n| n == "command_user").is_empty() {
        out!(
            "  the command user cannot run commands: they are refused, allow_degraded_sandbox \
             or not"
        );
    }
    if !missing(|n| n == "open_files").is_empty() {
        out!(
            "  the open-files limit is below what {} runs at once need (runs then fail to open \
             files; it does not change the confinement)",
            args.concurrency
        );
    }
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_open_files_limit_is_measured_against_the_runs_asked_for() {
        let few = open_files_check(1);
        let (soft, _) = provrun_sandbox::open_files_limit();
        assert_eq!(
            few.ok,
            soft.is_none_or(|s| s >= FILES_BASE + FILES_PER_WAITING_RUN)
        );
        let many = open_files_check(1_000_000);
        if soft.is_some() {
            assert!(!many.ok, "{many:?}");
            assert!(many.detail.contains("2000064"), "{many:?}");
            assert!(many.fix.as_deref().unwrap().contains("5000064"), "{many:?}");
        }
    }
}

//! `exec_trail`: what the process trail costs an exec-heavy confined command. The
//! workload is `sh` inside the sandbox running `/usr/bin/true` 1,000 times, through
//! [`Sandbox::run_command`] with every confinement layer, once with the trail (a tracer
//! outside the sandbox attached with `ptrace` events, every exec's arguments read and its
//! executable hashed, the records read back by the runtime) and once without, alternating
//! so that both see the same load; `overhead_ratio` is the median of the pairs' ratios
//! of wall time (with ÷ without), the goal at most 1.05; `tracer_cpu_s` the median CPU
//! time the tracer itself used for the 1,001 execs.

use std::time::Instant;

use provrun_sandbox::{Limits, Sandbox, TrailSink};

use crate::figure::{Figure, round};
use crate::harness::{discard_tree, work_dir};

/// The workload: 1,000 execs of `/usr/bin/true` from one shell.
const WORKLOAD: &str = "i=0; while [ $i -lt 1000 ]; do /usr/bin/true; i=$((i+1)); done";

/// Runs `pairs` alternating pairs (with the trail, then without, then the other order)
/// after one warm-up of each.
pub(crate) fn exec_trail(pairs: usize) -> Figure {
    let name = "exec_trail";
    let support = Sandbox::command_support();
    if !support.is_complete() {
        let mut f = Figure::new(name, 0, 0.0);
        f.skipped = Some(format!(
            "this machine lacks confinement layers: {}",
            support.missing_summary()
        ));
        return f;
    }
    let tmp = work_dir();
    let dir = tmp.path();
    let (input, output, scratch) = (dir.join("in"), dir.join("out"), dir.join("scratch"));
    for d in [&input, &output, &scratch] {
        std::fs::create_dir_all(d).expect("make the sandbox's folders");
    }
    let base = Sandbox::new(&input, &output, &scratch, Limits::default()).expect("the sandbox");
    let sink = TrailSink::new();
    let traced = base.clone().with_trail_sink(sink.clone());
    let plain = base.with_trail(false);
    let run = |sb: &Sandbox| -> Result<f64, String> {
        let t = Instant::now();
        let out = sb.run_command(WORKLOAD, None).map_err(|e| e.to_string())?;
        let secs = t.elapsed().as_secs_f64();
        if out.exit_code != Some(0) {
            return Err(format!("the workload failed: {}", out.render()));
        }
        Ok(secs)
    };
    let started = Instant::now();
    let mut with = Vec::new();
    let mut without = Vec::new();
    let mut ratios = Vec::new();
    let mut tracer_cpu = Vec::new();
    let mut recorded = 0u64;
    let result: Result<(), String> = (|| {
        run(&traced)?;
        run(&plain)?;
        sink.take();
        for i in 0..pairs {
            // Alternate which goes first, so neither always follows the other.
            let (a, b) = if i % 2 == 0 {
                (run(&traced)?, run(&plain)?)
            } else {
                let b = run(&plain)?;
                (run(&traced)?, b)
            };
            with.push(a);
            without.push(b);
            ratios.push(a / b);
            let trails = sink.take();
            let trail = trails.first().ok_or("the traced run left no trail")?;
            if !trail.summary.complete || trail.summary.execs < 1001 {
                return Err(format!("the trail is short: {:?}", trail.summary));
            }
            recorded = trail.summary.processes;
            if let Some(ms) = trail.summary.tracer_cpu_ms {
                tracer_cpu.push(ms as f64 / 1000.0);
            }
        }
        Ok(())
    })();
    let mut f = Figure::new(name, pairs as u64, started.elapsed().as_secs_f64());
    drop((traced, plain));
    discard_tree(tmp.path());
    if let Err(why) = result {
        f.failed = Some(why);
        return f;
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    f.latencies_ms = with.iter().map(|s| s * 1000.0).collect();
    f.extra
        .push(("overhead_ratio", round(median(&mut ratios), 4).into()));
    f.extra
        .push(("median_with_trail_s", round(median(&mut with), 4).into()));
    f.extra.push((
        "median_without_trail_s",
        round(median(&mut without), 4).into(),
    ));
    if !tracer_cpu.is_empty() {
        f.extra
            .push(("tracer_cpu_s", round(median(&mut tracer_cpu), 3).into()));
    }
    f.extra.push(("execs_per_run", 1001.into()));
    f.extra.push(("processes_recorded", recorded.into()));
    f
}

//! Recorder throughput: small events per second with flush-per-event and with
//! fsync-per-event, beside the raw `write` + `fdatasync` rate of the same disk in the
//! same directory, and group commit with 100 concurrent writers.
//!
//! Run with `cargo bench -p provrun-evidence --bench recorder [-- --quick]`. Prints one
//! JSON object per line. The directory is `$PROVRUN_BENCH_DIR` if set, else Cargo's
//! target tmp dir (a real disk, unlike a tmpfs `/tmp`).

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use provrun_evidence::*;
use serde_json::json;

fn started() -> RunStarted {
    RunStarted {
        builder: "provrun/bench".into(),
        agent_spec_digest: "0".repeat(64),
        agent: "bench".into(),
        model: "test".into(),
        tools: vec![],
        limits: json!({}),
        details: serde_json::Value::Null,
    }
}

fn small_event(i: usize) -> ToolCalled {
    ToolCalled {
        name: "read_file".into(),
        call_id: format!("call-{i}"),
        arguments: json!({"path": "/input/a.txt"}),
        result: json!("hello world"),
        ok: true,
        duration_ms: 1,
        deferred: false,
        output_tool: false,
        provider_run: false,
        mode: None,
        arguments_blob: None,
        result_blob: None,
        decided_by: None,
        mcp: None,
        mcp_blob: None,
        ..ToolCalled::default()
    }
}

struct Bench {
    base: PathBuf,
    n: usize,
}

impl Bench {
    fn dir(&self, name: &str) -> PathBuf {
        let d = self.base.join(format!("{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    /// Events/s of one writer recording `n` small events; also the mean line length.
    fn single(&self, name: &str, durability: Durability, n: usize) -> (f64, usize) {
        let dir = self.dir(name);
        let rec = Recorder::create(&dir, "bench", durability, &started()).expect("create");
        let t = Instant::now();
        for i in 0..n {
            rec.record(&small_event(i)).expect("record");
        }
        let secs = t.elapsed().as_secs_f64();
        let len = std::fs::metadata(dir.join("events.jsonl"))
            .map(|m| m.len() as usize)
            .unwrap_or(0)
            / (n + 1);
        drop(rec);
        let _ = std::fs::remove_dir_all(&dir);
        (n as f64 / secs, len)
    }

    /// Raw `write` + `fdatasync` per line of `len` bytes, same directory.
    fn raw(&self, len: usize, n: usize) -> f64 {
        let dir = self.dir("raw");
        std::fs::create_dir_all(&dir).expect("mkdir");
        let path = dir.join("raw.jsonl");
        let mut f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .expect("open");
        let mut line = vec![b'x'; len.saturating_sub(1)];
        line.push(b'\n');
        let t = Instant::now();
        for _ in 0..n {
            f.write_all(&line).expect("write");
            f.sync_data().expect("fdatasync");
        }
        let secs = t.elapsed().as_secs_f64();
        let _ = std::fs::remove_dir_all(&dir);
        n as f64 / secs
    }

    /// Events/s with `writers` threads sharing one recorder, `per` events each.
    fn shared(&self, name: &str, durability: Durability, writers: usize, per: usize) -> f64 {
        let dir = self.dir(name);
        let rec = Recorder::create(&dir, "bench", durability, &started()).expect("create");
        let t = Instant::now();
        std::thread::scope(|s| {
            for w in 0..writers {
                let rec = rec.clone();
                s.spawn(move || {
                    for i in 0..per {
                        rec.record(&small_event(w * per + i)).expect("record");
                    }
                });
            }
        });
        let secs = t.elapsed().as_secs_f64();
        let count = rec.event_count() - 1;
        drop(rec);
        let _ = std::fs::remove_dir_all(&dir);
        count as f64 / secs
    }

    /// Events/s with `runs` separate runs (one recorder and one writer each).
    fn runs(&self, name: &str, durability: Durability, runs: usize, per: usize) -> f64 {
        let recs: Vec<Recorder> = (0..runs)
            .map(|r| {
                Recorder::create(
                    self.dir(&format!("{name}-{r}")),
                    "bench",
                    durability,
                    &started(),
                )
                .expect("create")
            })
            .collect();
        let t = Instant::now();
        std::thread::scope(|s| {
            for rec in &recs {
                s.spawn(move || {
                    for i in 0..per {
                        rec.record(&small_event(i)).expect("record");
                    }
                });
            }
        });
        let secs = t.elapsed().as_secs_f64();
        for r in recs {
            let dir = r.bundle_dir().to_path_buf();
            drop(r);
            let _ = std::fs::remove_dir_all(dir);
        }
        (runs * per) as f64 / secs
    }
}

fn emit(v: serde_json::Value) {
    println!("{v}");
}

fn round(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let base = std::env::var_os("PROVRUN_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_TARGET_TMPDIR")).join("evidence-bench"));
    std::fs::create_dir_all(&base).expect("bench dir");
    let bench = Bench {
        base: base.clone(),
        n: if quick { 300 } else { 3000 },
    };
    let n_flush = bench.n * 10;
    let n_sync = bench.n;

    // Warm up the directory and the disk.
    let _ = bench.raw(200, 50);

    let (flush, len) = bench.single("flush", Durability::Flush, n_flush);
    emit(
        json!({"bench": "flush_per_event", "events": n_flush, "events_per_s": round(flush), "line_bytes": len}),
    );

    // Interleave the fsync measurements so drift hits both alike.
    let raw1 = bench.raw(len, n_sync);
    let (fsync1, _) = bench.single("fsync", Durability::PerEvent, n_sync);
    let raw2 = bench.raw(len, n_sync);
    let (fsync2, _) = bench.single("fsync", Durability::PerEvent, n_sync);
    let raw = (raw1 + raw2) / 2.0;
    let fsync = (fsync1 + fsync2) / 2.0;
    emit(
        json!({"bench": "raw_write_fdatasync", "ops": n_sync * 2, "ops_per_s": round(raw), "line_bytes": len, "dir": base.display().to_string()}),
    );
    emit(json!({"bench": "fsync_per_event", "events": n_sync * 2, "events_per_s": round(fsync)}));
    emit(
        json!({"bench": "fsync_per_event_vs_raw", "ratio": round(fsync / raw), "goal": 0.8, "met": fsync / raw >= 0.8}),
    );

    let writers = 100;
    let per = if quick { 10 } else { 60 };
    let group = bench.shared("group", Durability::GroupCommit, writers, per);
    let per_event_shared = bench.shared("perevent", Durability::PerEvent, writers, per);
    emit(
        json!({"bench": "group_commit_100_writers", "events": writers * per, "events_per_s": round(group)}),
    );
    emit(
        json!({"bench": "fsync_per_event_100_writers", "events": writers * per, "events_per_s": round(per_event_shared)}),
    );
    emit(
        json!({"bench": "group_commit_vs_fsync_per_event", "ratio": round(group / fsync), "goal": 5.0, "met": group / fsync >= 5.0}),
    );

    let runs_group = bench.runs("runs-group", Durability::GroupCommit, writers, per);
    let runs_per_event = bench.runs("runs-perevent", Durability::PerEvent, writers, per);
    emit(
        json!({"bench": "group_commit_100_runs", "events": writers * per, "events_per_s": round(runs_group)}),
    );
    emit(
        json!({"bench": "fsync_per_event_100_runs", "events": writers * per, "events_per_s": round(runs_per_event)}),
    );
}

//! The disk's baselines beside provrun's figures: raw `write` + `fdatasync` of event
//! lines, and `verify` of a big bundle timed next to `sha256sum`.

use std::process::Command;
use std::time::Instant;

use provrun_agent::{Durability, RunStatus};
use provrun_evidence::verify;
use serde_json::{Value, json};

use crate::figure::Figure;
use crate::harness::{discard_tree, work_dir};

/// Raw `write` + `fdatasync` of event-sized lines in one file: what one fsync per event
/// allows on this disk.
pub(crate) fn fsync_baseline(quick: bool) -> Figure {
    use std::io::Write;
    let dir = work_dir();
    let path = dir.path().join("raw.jsonl");
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .expect("open");
    let line = vec![b'x'; 400];
    let n = if quick { 200 } else { 2000 };
    let mut lat = Vec::with_capacity(n);
    let started = Instant::now();
    for _ in 0..n {
        let t = Instant::now();
        f.write_all(&line).expect("write");
        f.sync_data().expect("fdatasync");
        lat.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let mut fig = Figure::new(
        "fsync_per_event_baseline",
        n as u64,
        started.elapsed().as_secs_f64(),
    );
    fig.events = Some(n as u64);
    fig.latencies_ms = lat;
    fig
}

/// A finished bundle holding `files` outputs of `file_mib` MiB each; `verify` is timed
/// next to `sha256sum` of the same files (both from the page cache, after one untimed
/// read).
pub(crate) fn verify_big(name: &str, files: usize, file_mib: usize) -> Vec<Figure> {
    use provrun_evidence::{Recorder, RunEnd, RunStarted};
    let dir = work_dir();
    let bundle = dir.path().join("bundle");
    let started = RunStarted {
        builder: "provrun-bench".into(),
        agent_spec_digest: "0".repeat(64),
        agent: "bench".into(),
        model: "script".into(),
        tools: vec![],
        limits: json!({}),
        details: Value::Null,
    };
    let rec =
        Recorder::create(&bundle, "bench-verify", Durability::Flush, &started).expect("create");
    let mut block = vec![0u8; file_mib << 20];
    let mut paths = Vec::new();
    for i in 0..files {
        // Different bytes in every file (a cheap xorshift), so no two digests match.
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15 ^ (i as u64 + 1);
        for chunk in block.chunks_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            chunk.copy_from_slice(&x.to_le_bytes()[..chunk.len()]);
        }
        let p = rec.output_dir().join(format!("out-{i:03}.bin"));
        std::fs::write(&p, &block).expect("write output");
        paths.push(p);
    }
    drop(block);
    rec.finish(RunEnd {
        status: RunStatus::Finished,
        usage: json!({}),
        error: None,
    })
    .expect("finish");
    drop(rec);
    let total = (files * file_mib) as u64;
    eprintln!("{name}: bundle of {total} MiB outputs written");
    let sha = || {
        let t = Instant::now();
        let out = Command::new("sha256sum").args(&paths).output();
        let secs = t.elapsed().as_secs_f64();
        match out {
            Ok(o) if o.status.success() => Some(secs),
            _ => None,
        }
    };
    sha(); // warm the page cache
    let t = Instant::now();
    let report = verify(&bundle);
    let verify_s = t.elapsed().as_secs_f64();
    assert_eq!(report.exit_code(), 0, "the big bundle does not verify");
    let sha_s = sha();
    let mut ours = Figure::new(name, 1, verify_s);
    ours.latencies_ms = vec![verify_s * 1e3];
    eprintln!(
        "{name}: verify {:.0} MiB/s, sha256sum {}",
        total as f64 / verify_s,
        sha_s.map_or("unavailable".into(), |s| format!(
            "{:.0} MiB/s",
            total as f64 / s
        ))
    );
    let mut base = Figure::new(&format!("{name}_sha256sum"), 1, sha_s.unwrap_or(0.0));
    match sha_s {
        Some(s) => base.latencies_ms = vec![s * 1e3],
        None => base.skipped = Some("sha256sum did not run".into()),
    }
    discard_tree(dir.path());
    vec![ours, base]
}

/// Other dirty data on the disk while the fsync figures are measured: a thread that
/// rewrites a 256 MiB file in the bench folder, 1 MiB at a time, never syncing, at
/// `$PROVRUN_BENCH_DIRTY_MBPS` MB/s (50 unless set; 0: none). A `syncfs` would wait for
/// it; an `fdatasync` of our own files should not.
pub(crate) struct Dirtier {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    _dir: tempfile::TempDir,
    /// The rate asked for, MB/s.
    pub(crate) mb_per_s: u64,
}

impl Dirtier {
    pub(crate) fn start() -> Dirtier {
        use std::io::{Seek, SeekFrom, Write};
        use std::sync::atomic::Ordering;
        let mb_per_s: u64 = std::env::var("PROVRUN_BENCH_DIRTY_MBPS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(50);
        let dir = work_dir();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let thread = (mb_per_s > 0).then(|| {
            let path = dir.path().join("dirty.bin");
            let stop = std::sync::Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut f = std::fs::File::create(&path).expect("create the dirty file");
                let block = vec![0x5a_u8; 1 << 20];
                let pause = std::time::Duration::from_secs_f64(1.0 / mb_per_s as f64);
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let _ = f.seek(SeekFrom::Start((i % 256) << 20));
                    let _ = f.write_all(&block);
                    i += 1;
                    std::thread::sleep(pause);
                }
            })
        });
        Dirtier {
            stop,
            thread,
            _dir: dir,
            mb_per_s,
        }
    }
}

impl Drop for Dirtier {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

//! The scripted scenarios: many runs of `k` steps at a given concurrency and durability,
//! and one long run whose history grows with every step.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use provrun_agent::{Backend, BlobLayout, Durability, RunControl, RunSpec, RunStatus};
use provrun_evidence::{read_events, verify};
use provrun_model::{Model, ScriptModel};
use provrun_tools::ToolRegistry;
use serde_json::{Value, json};

use crate::figure::{Figure, round};
use crate::harness::{Bench, agent, bundle_size, discard_tree, runtime, script, work_dir};

/// `runs` runs, `concurrency` at a time, on a multi-threaded runtime.
pub(crate) fn scripted(
    name: &str,
    runs: usize,
    concurrency: usize,
    durability: Durability,
) -> Figure {
    let dir = work_dir();
    let k = 10;
    let model: Arc<dyn Model> = Arc::new(ScriptModel::from_value(&script(k)).expect("script"));
    let bench = Arc::new(Bench::new(dir.path(), model, durability, k));
    let rt = runtime();
    // One warm-up run (page cache, lazy statics), not counted.
    rt.block_on(bench.run(usize::MAX / 2));
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let latencies = rt.block_on(async {
        let workers = (0..concurrency.min(runs)).map(|_| {
            let bench = Arc::clone(&bench);
            let next = Arc::clone(&next);
            tokio::spawn(async move {
                let mut lat = Vec::new();
                loop {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    if n >= runs {
                        break lat;
                    }
                    lat.push(bench.run(n).await);
                }
            })
        });
        let mut all = Vec::with_capacity(runs);
        for w in workers.collect::<Vec<_>>() {
            all.extend(w.await.expect("worker"));
        }
        all
    });
    let seconds = started.elapsed().as_secs_f64();
    let per_run = bench.check(0);
    assert_eq!(per_run, bench.check(runs - 1));
    let mut fig = Figure::new(name, runs as u64, seconds);
    fig.events = Some(per_run * runs as u64);
    fig.latencies_ms = latencies;
    let (files, bytes) = bundle_size(&bench.bundle(0));
    fig.extra.push(("files_per_run", json!(files)));
    fig.extra.push(("bundle_bytes_per_run", json!(bytes)));
    discard_tree(dir.path());
    fig
}

/// Bytes of each distinct input of a long run.
const LONG_FILE_BYTES: usize = 10 * 1024;

/// One long run: `k` sequential steps, step `i` reading `/input/f{i}.txt`, a distinct
/// 10 KB file of text-like bytes (so each request resends a history that grows by one
/// tool result), in blob `layout`. Reports the run's time, the bundle's size and files
/// (inputs excluded), the distinct tool-result content, and how long `verify` takes.
pub(crate) fn long_run(name: &str, k: usize, layout: BlobLayout) -> Figure {
    let dir = work_dir();
    let input = dir.path().join("input");
    std::fs::create_dir_all(&input).expect("create input");
    // Words of random letters, so that the content compresses like text, not like a
    // repeated pattern.
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    for i in 0..k {
        let mut text = Vec::with_capacity(LONG_FILE_BYTES);
        while text.len() < LONG_FILE_BYTES {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let c = match x % 32 {
                0..=25 => b'a' + (x % 32) as u8,
                26..=29 => b' ',
                30 => b'\n',
                _ => b'.',
            };
            text.push(c);
        }
        std::fs::write(input.join(format!("f{i}.txt")), text).expect("write input");
    }
    let steps: Vec<Value> = (0..k)
        .map(|i| {
            json!({"tool_calls": [{
                "id": format!("call_{i}"),
                "name": "read_file",
                "arguments": {"path": format!("/input/f{i}.txt")}
            }]})
        })
        .chain(std::iter::once(json!({"text": format!("read {k} files")})))
        .collect();
    let model: Arc<dyn Model> =
        Arc::new(ScriptModel::from_value(&Value::Array(steps)).expect("script"));
    let backend = Backend::new()
        .with_model(model)
        .with_registry(ToolRegistry::linked())
        .with_blob_layout(layout);
    let bundle = dir.path().join("bundle");
    let spec = RunSpec::new("Read the files and report.", &bundle)
        .input(&input)
        .durability(Durability::Flush)
        .run_id(format!("{name}-run"));
    let rt = runtime();
    let started = Instant::now();
    let result = rt
        .block_on(backend.execute(&RunControl::new(), &agent(), &spec))
        .expect("run");
    let seconds = started.elapsed().as_secs_f64();
    assert_eq!(result.status(), RunStatus::Finished, "{:?}", result.error());
    assert_eq!(result.usage.tool_calls, k as u64);
    let (files, bytes) = bundle_size(&bundle);
    let t = Instant::now();
    let report = verify(&bundle);
    let verify_s = t.elapsed().as_secs_f64();
    assert_eq!(report.exit_code(), 0, "{name}: the bundle does not verify");
    let events = read_events(&bundle).expect("read events").len() as u64;
    let distinct = (k * LONG_FILE_BYTES) as u64;
    eprintln!(
        "{name}: {k} steps in {seconds:.2} s, bundle {:.2} MiB in {files} files ({:.2}x the {:.2} MiB of distinct tool results), verify {verify_s:.3} s",
        bytes as f64 / 1048576.0,
        bytes as f64 / distinct as f64,
        distinct as f64 / 1048576.0
    );
    let mut fig = Figure::new(name, 1, seconds);
    fig.events = Some(events);
    fig.latencies_ms = vec![seconds * 1e3];
    fig.extra = vec![
        ("steps", json!(k)),
        ("layout", json!(layout.as_str())),
        ("bundle_bytes", json!(bytes)),
        ("files", json!(files)),
        ("distinct_bytes", json!(distinct)),
        (
            "size_vs_distinct",
            json!(round(bytes as f64 / distinct as f64, 3)),
        ),
        ("verify_seconds", json!(round(verify_s, 4))),
    ];
    drop(rt);
    discard_tree(dir.path());
    fig
}

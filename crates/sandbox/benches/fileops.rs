//! Latency of `read_file` and `write_file` on small files, next to a plain `std::fs` read or
//! write of the same file, as one JSON object per line.
//!
//! Run: `cargo bench -p provrun-sandbox --bench fileops [-- --quick]`. The two sides are
//! measured alternately, call by call, on the same file, so drift hits both equally. Neither
//! side syncs to disk. The goal is a ratio (sandbox / std) of at most 2.

use std::hint::black_box;
use std::time::Instant;

use provrun_sandbox::{Limits, Sandbox};

struct Stats {
    p50_us: f64,
    mean_us: f64,
}

fn stats(mut ns: Vec<u128>) -> Stats {
    ns.sort_unstable();
    let p50 = ns[ns.len() / 2] as f64 / 1000.0;
    let mean = ns.iter().sum::<u128>() as f64 / ns.len() as f64 / 1000.0;
    Stats {
        p50_us: p50,
        mean_us: mean,
    }
}

fn time<T>(f: impl FnOnce() -> T) -> u128 {
    let start = Instant::now();
    black_box(f());
    start.elapsed().as_nanos()
}

fn report(op: &str, size: usize, iters: usize, sandbox: Stats, std: Stats) {
    let ratio_p50 = sandbox.p50_us / std.p50_us;
    let ratio_mean = sandbox.mean_us / std.mean_us;
    println!(
        "{{\"bench\":\"{op}\",\"size_bytes\":{size},\"iters\":{iters},\
         \"sandbox_p50_us\":{:.2},\"sandbox_mean_us\":{:.2},\
         \"std_p50_us\":{:.2},\"std_mean_us\":{:.2},\
         \"ratio_p50\":{ratio_p50:.2},\"ratio_mean\":{ratio_mean:.2},\"within_2x\":{}}}",
        sandbox.p50_us,
        sandbox.mean_us,
        std.p50_us,
        std.mean_us,
        ratio_p50 <= 2.0
    );
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let iters = if quick { 500 } else { 5_000 };
    let tmp = tempfile::tempdir().expect("temporary directory");
    let input = tmp.path().join("input");
    std::fs::create_dir_all(&input).expect("input dir");
    let output = tmp.path().join("output");
    let scratch = tmp.path().join("scratch");
    let sandbox = Sandbox::new(&input, &output, &scratch, Limits::default()).expect("sandbox");

    for size in [64usize, 1024, 4096] {
        let body: String = "provrun bench line\n".chars().cycle().take(size).collect();
        let name = format!("bench-{size}.txt");
        let virtual_path = format!("/scratch/{name}");
        let host_path = scratch.join(&name);
        std::fs::write(&host_path, &body).expect("seed file");

        // Warm up caches and code paths.
        for _ in 0..iters / 10 {
            black_box(sandbox.read_file(&virtual_path, None, None).expect("read"));
            black_box(std::fs::read_to_string(&host_path).expect("read"));
        }
        let mut ours = Vec::with_capacity(iters);
        let mut plain = Vec::with_capacity(iters);
        for _ in 0..iters {
            ours.push(time(|| {
                sandbox.read_file(&virtual_path, None, None).expect("read")
            }));
            plain.push(time(|| std::fs::read_to_string(&host_path).expect("read")));
        }
        report("read_file", size, iters, stats(ours), stats(plain));

        for _ in 0..iters / 10 {
            black_box(sandbox.write_file(&virtual_path, &body).expect("write"));
            std::fs::write(&host_path, &body).expect("write");
        }
        let mut ours = Vec::with_capacity(iters);
        let mut plain = Vec::with_capacity(iters);
        for _ in 0..iters {
            ours.push(time(|| {
                sandbox.write_file(&virtual_path, &body).expect("write")
            }));
            plain.push(time(|| std::fs::write(&host_path, &body).expect("write")));
        }
        report("write_file", size, iters, stats(ours), stats(plain));
    }
}

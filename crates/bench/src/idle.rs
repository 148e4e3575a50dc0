//! `concurrent_10k_idle`: thousands of runs in flight at once, all waiting on a slow
//! model, with the descriptor limit raised for them.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use provrun_agent::Durability;
use provrun_model::{Model, ModelError, ModelRequest, ModelResponse, ScriptModel, StreamDelta};

use crate::figure::Figure;
use crate::harness::{Bench, discard_tree, runtime, script, work_dir};

/// A model that makes its first request wait until every run is waiting on it (so all
/// runs are in flight at once), then holds them `hold` longer; later requests answer
/// after `hold`. Answers come from a [`ScriptModel`].
struct SlowModel {
    inner: ScriptModel,
    expected: usize,
    hold: Duration,
    waiting: AtomicUsize,
    max_waiting: AtomicUsize,
    all_in: tokio::sync::watch::Sender<bool>,
    /// Why a run failed, when one did: the waiting runs are then let go at once.
    failed: std::sync::Mutex<Option<String>>,
}

impl SlowModel {
    /// A run failed: not every run can be in flight at once, so let the waiting ones go
    /// now instead of at the timeout.
    fn give_up(&self, why: String) {
        self.failed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert(why);
        self.all_in.send_replace(true);
    }

    async fn wait(&self, request: &ModelRequest) {
        let first = !request
            .messages
            .iter()
            .any(|m| matches!(m, provrun_model::Message::Assistant { .. }));
        if first {
            let now = self.waiting.fetch_add(1, Ordering::SeqCst) + 1;
            self.max_waiting.fetch_max(now, Ordering::SeqCst);
            if now >= self.expected {
                self.all_in.send_replace(true);
            }
            let mut rx = self.all_in.subscribe();
            let _ = tokio::time::timeout(Duration::from_secs(600), rx.wait_for(|v| *v)).await;
            tokio::time::sleep(self.hold).await;
            self.waiting.fetch_sub(1, Ordering::SeqCst);
        } else {
            tokio::time::sleep(self.hold).await;
        }
    }
}

#[async_trait]
impl Model for SlowModel {
    fn name(&self) -> &str {
        "slow"
    }

    async fn request(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        self.wait(request).await;
        self.inner.request(request).await
    }

    async fn request_stream(
        &self,
        request: &ModelRequest,
        on_delta: &(dyn Fn(StreamDelta) + Send + Sync),
    ) -> Result<ModelResponse, ModelError> {
        self.wait(request).await;
        self.inner.request_stream(request, on_delta).await
    }
}

/// The open-files limit the scenario runs under (issue 43: 10,000 runs in flight inside
/// 20,000), unless the hard limit is lower.
const FD_LIMIT: u64 = 20_000;

/// `runs` runs started at once, each with one tool call, all waiting on a slow model
/// together; reports the process's peak RSS. A run that fails (the open-files limit
/// reached, say) lets every waiting run go at once and the figure says why it failed.
pub(crate) fn concurrent_idle(name: &str, runs: usize) -> Figure {
    let limit = set_fd_limit(FD_LIMIT);
    // A run waiting on its model holds one descriptor, its locked log (the sandbox gives
    // its folder handles and the recorder its pack's back while it waits); the rest is
    // headroom for the runs that are between two requests and the runtime's own.
    let need = runs as u64 + 1024;
    if limit < need {
        let mut f = Figure::new(name, runs as u64, 0.0);
        f.skipped = Some(format!(
            "the open-files limit is {limit} and cannot be raised here; {runs} runs in flight need about {need}"
        ));
        return f;
    }
    let dir = work_dir();
    let k = 1;
    let model = Arc::new(SlowModel {
        inner: ScriptModel::from_value(&script(k)).expect("script"),
        expected: runs,
        hold: Duration::from_millis(500),
        waiting: AtomicUsize::new(0),
        max_waiting: AtomicUsize::new(0),
        all_in: tokio::sync::watch::channel(false).0,
        failed: std::sync::Mutex::new(None),
    });
    let bench = Arc::new(Bench::new(
        dir.path(),
        Arc::clone(&model) as Arc<dyn Model>,
        Durability::Flush,
        k,
    ));
    // What one waiting run's task holds before any of its own allocations: the size of
    // its future (made, never polled).
    let future_bytes = std::mem::size_of_val(&bench.try_run(0));
    let rt = runtime();
    let started = Instant::now();
    let latencies = rt.block_on(async {
        let tasks: Vec<_> = (0..runs)
            .map(|n| {
                let bench = Arc::clone(&bench);
                let model = Arc::clone(&model);
                tokio::spawn(async move {
                    let r = bench.try_run(n).await;
                    if let Err(e) = &r {
                        model.give_up(e.clone());
                    }
                    r
                })
            })
            .collect();
        let mut all = Vec::with_capacity(runs);
        let mut failures = 0usize;
        for t in tasks {
            match t.await {
                Ok(Ok(ms)) => all.push(ms),
                Ok(Err(_)) => failures += 1,
                Err(e) => {
                    failures += 1;
                    model.give_up(format!("a run panicked: {e}"));
                }
            }
        }
        (all, failures)
    });
    let (latencies, failures) = latencies;
    let seconds = started.elapsed().as_secs_f64();
    let in_flight = model.max_waiting.load(Ordering::SeqCst);
    eprintln!(
        "{name}: {in_flight} runs were waiting on the model at once; one run's future is {future_bytes} bytes"
    );
    let mut fig = Figure::new(name, runs as u64, seconds);
    fig.extra.push(("fd_limit", limit.into()));
    fig.extra.push(("in_flight", in_flight.into()));
    fig.extra.push(("run_future_bytes", future_bytes.into()));
    let failed = model
        .failed
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take();
    if let Some(first) = failed {
        fig.failed = Some(format!(
            "{failures} of {runs} runs failed ({in_flight} were in flight at most); the first: {first}"
        ));
    } else if in_flight != runs {
        fig.failed = Some(format!(
            "only {in_flight} of {runs} runs were in flight at once"
        ));
    } else {
        let per_run = bench.check(0);
        fig.events = Some(per_run * runs as u64);
        fig.latencies_ms = latencies;
    }
    drop(rt);
    discard_tree(dir.path());
    fig
}

/// Set the open-files soft limit to `want` (at most the hard limit; raising the hard
/// limit where allowed). Returns the soft limit in force afterwards.
#[allow(unsafe_code)]
fn set_fd_limit(want: u64) -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain syscalls on a valid, owned struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 {
            let raised = libc::rlimit {
                rlim_cur: want,
                rlim_max: lim.rlim_max.max(want),
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) != 0 {
                lim.rlim_cur = lim.rlim_max.min(want);
                let _ = libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
            }
        }
        let _ = libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
    }
    lim.rlim_cur
}

//! The batch's progress on stderr: counts shared by the runs ([`Tally`]), shown as a bar
//! on a terminal or as a plain line now and then otherwise.

use std::io::IsTerminal as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How often the plain progress line is printed when stderr is not a terminal.
const PLAIN_PROGRESS_EVERY: Duration = Duration::from_secs(10);
/// Counts shared by the runs, the progress display and the summary.
#[derive(Default)]
pub(super) struct Tally {
    pub(super) done: AtomicU64,
    pub(super) failed: AtomicU64,
    pub(super) skipped: AtomicU64,
    pub(super) running: AtomicU64,
}

/// The progress display: a bar on a terminal, a plain line now and then otherwise.
pub(super) struct Progress {
    bar: Option<indicatif::ProgressBar>,
    ticker: Option<tokio::task::AbortHandle>,
}

fn plain_line(tally: &Tally, total: u64, started: Instant) -> String {
    let done = tally.done.load(Ordering::Relaxed);
    let failed = tally.failed.load(Ordering::Relaxed);
    let running = tally.running.load(Ordering::Relaxed);
    let secs = started.elapsed().as_secs_f64();
    let rate = if secs > 0.0 { done as f64 / secs } else { 0.0 };
    let eta = if rate > 0.0 {
        format!("{:.0} s", total.saturating_sub(done) as f64 / rate)
    } else {
        "unknown".to_string()
    };
    format!(
        "provrun: batch: {done}/{total} done ({failed} failed), {running} running, {rate:.1} runs/s, ETA {eta}"
    )
}

impl Progress {
    pub(super) fn start(tally: &Arc<Tally>, total: u64, started: Instant) -> Self {
        if crate::logging::quiet() {
            // `-q`: nothing on stderr but errors.
            return Progress {
                bar: None,
                ticker: None,
            };
        }
        if std::io::stderr().is_terminal() {
            let bar = indicatif::ProgressBar::with_draw_target(
                Some(total),
                indicatif::ProgressDrawTarget::stderr(),
            );
            if let Ok(style) = indicatif::ProgressStyle::with_template(
                "{bar:30} {pos}/{len} done · {msg} · {per_sec} · ETA {eta}",
            ) {
                bar.set_style(style);
            }
            bar.set_message("0 failed · 0 running");
            bar.enable_steady_tick(Duration::from_millis(200));
            Progress {
                bar: Some(bar),
                ticker: None,
            }
        } else {
            let tally = Arc::clone(tally);
            let ticker = tokio::spawn(async move {
                let mut every = tokio::time::interval(PLAIN_PROGRESS_EVERY);
                every.tick().await;
                loop {
                    every.tick().await;
                    eprintln!("{}", plain_line(&tally, total, started));
                }
            });
            Progress {
                bar: None,
                ticker: Some(ticker.abort_handle()),
            }
        }
    }

    pub(super) fn update(&self, tally: &Tally) {
        if let Some(bar) = &self.bar {
            bar.set_position(tally.done.load(Ordering::Relaxed));
            bar.set_message(format!(
                "{} failed · {} running",
                tally.failed.load(Ordering::Relaxed),
                tally.running.load(Ordering::Relaxed)
            ));
        }
    }

    pub(super) fn stop(&self, tally: &Tally, total: u64, started: Instant) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
        if let Some(t) = &self.ticker {
            t.abort();
        }
        if !crate::logging::quiet() {
            eprintln!("{}", plain_line(tally, total, started));
        }
    }
}

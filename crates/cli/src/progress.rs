//! A one-line progress display on stderr while a run goes on: a spinner, the step, the
//! tool calls, the tokens and the time, fed by [`RunControl::subscribe`]. Silent when
//! stderr is not a terminal.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use provrun_agent::{RunControl, RunEvent};
use tokio::task::JoinHandle;

/// How long a run goes before the line appears.
const QUIET: Duration = Duration::from_millis(150);

const FRAMES: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

#[derive(Debug, Default)]
struct State {
    step: u32,
    tokens: u64,
    calls: u64,
    failed: u64,
    doing: String,
}

/// The running display; [`Progress::stop`] clears it.
pub(crate) struct Progress {
    task: Option<JoinHandle<()>>,
}

impl Progress {
    /// Start showing `control`'s run on stderr, if stderr is a terminal.
    pub(crate) fn start(control: &RunControl) -> Self {
        if !std::io::stderr().is_terminal() || crate::logging::quiet() {
            return Self { task: None };
        }
        let mut events = control.subscribe();
        let task = tokio::spawn(async move {
            let started = Instant::now();
            let mut state = State::default();
            let mut tick = tokio::time::interval(Duration::from_millis(120));
            let mut frame = 0usize;
            loop {
                tokio::select! {
                    event = events.recv() => match event {
                        Some(e) => state.apply(e),
                        None => break,
                    },
                    _ = tick.tick() => frame = frame.wrapping_add(1),
                }
                // A run that ends at once leaves no flicker behind.
                if started.elapsed() >= QUIET {
                    draw(&state, FRAMES[frame % FRAMES.len()], started.elapsed());
                }
            }
        });
        Self { task: Some(task) }
    }

    /// Stop and clear the line.
    pub(crate) fn stop(mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
        }
    }
}

impl State {
    fn apply(&mut self, event: RunEvent) {
        match event {
            RunEvent::ModelRequest { step } => {
                self.step = step;
                self.doing = "waiting for the model".into();
            }
            RunEvent::ModelResponse { usage, .. } => {
                self.tokens += usage.input_tokens + usage.output_tokens;
                self.doing.clear();
            }
            RunEvent::CallBegin { name, summary, .. } => {
                self.doing = match summary {
                    Some(summary) => summary,
                    None => format!("calling {name}"),
                }
            }
            RunEvent::ToolResult { ok, .. } => {
                self.calls += 1;
                if !ok {
                    self.failed += 1;
                }
                self.doing.clear();
            }
            RunEvent::Deferred { name, confirm, .. } => {
                self.doing = match confirm {
                    Some(confirm) => format!("waits: {confirm}"),
                    None => format!("{name} waits"),
                }
            }
            RunEvent::Steered { text, .. } => self.doing = format!("steered: {text}"),
            RunEvent::ModelDelta(_) => self.doing = "receiving".into(),
            RunEvent::Finished { status } => self.doing = status.as_str().to_string(),
            _ => {}
        }
    }
}

fn draw(state: &State, frame: char, elapsed: Duration) {
    // Coloured as `--color` says for stderr (failed calls red, what it does dimmed).
    let paint = crate::style::Painter::stderr();
    let failed = if state.failed > 0 {
        format!(" ({})", paint.bad(&format!("{} failed", state.failed)))
    } else {
        String::new()
    };
    let doing = if state.doing.is_empty() {
        String::new()
    } else {
        format!(" · {}", paint.dim(&crate::inert::inert(&state.doing)))
    };
    let mut err = std::io::stderr().lock();
    let _ = write!(
        err,
        "\r\x1b[2K{frame} step {} · {} tool calls{failed} · {} tokens · {:.1}s{doing}",
        state.step,
        state.calls,
        state.tokens,
        elapsed.as_secs_f64()
    );
    let _ = err.flush();
}

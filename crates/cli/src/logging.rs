//! The log lines every crate writes through `tracing`, made visible on stderr: the
//! subscriber `provrun` installs once at start, chosen by the global flags `-v`/`-vv`/`-vvv`,
//! `-q` and `--log-format text|json`, or by `RUST_LOG`, which wins over the flags.
//!
//! Every line is one line on stderr (stdout stays the command's output) and goes through
//! [`crate::inert`]: a log field may quote untrusted text (an output's file name, a server's
//! message), so a text line shows controls and invisible characters as escapes, and a JSON
//! line writes them as `\uXXXX`. On a terminal a text line first clears the line it lands
//! on, so a progress display it interrupts is not left mixed into it.
//!
//! `provrun wrap` and `provrun serve` call [`init_logging`] the same way as every other
//! command (`main_with_args` does it for all of them).

use std::io::{IsTerminal as _, Write as _};
use std::sync::atomic::{AtomicBool, Ordering};

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;

/// How log lines are written (`--log-format`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// `provrun: LEVEL message key=value…`, one line each, for people.
    #[default]
    Text,
    /// One JSON object per line (`timestamp`, `level`, `target`, `fields`, `span`), for
    /// machines.
    Json,
}

/// What the global flags ask of the log.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LogSettings {
    /// `-v` repeated: 0 warnings, 1 info, 2 debug, 3 or more trace (provrun's own crates;
    /// other crates stay at warnings unless `RUST_LOG` opens them).
    pub verbose: u8,
    /// `-q`: errors only, and no progress display.
    pub quiet: bool,
    /// `--log-format`.
    pub format: LogFormat,
}

impl LogSettings {
    /// The filter these flags choose when `RUST_LOG` is not set: `warn` for every crate,
    /// and the level asked for provrun's own crates (all their targets start with
    /// `provrun`).
    pub fn default_filter(&self) -> String {
        if self.quiet {
            return "error".to_string();
        }
        match self.verbose {
            0 => "warn".to_string(),
            1 => "warn,provrun=info".to_string(),
            2 => "warn,provrun=debug".to_string(),
            _ => "warn,provrun=trace".to_string(),
        }
    }
}

/// The global flags that choose what reaches stderr: `-v`, `-q`, `--log-format`; flatten
/// it into a command line (`provrun` does) and pass [`LogArgs::settings`] to
/// [`init_logging`].
#[derive(Debug, clap::Args)]
pub struct LogArgs {
    /// Say more on stderr: -v info, -vv debug, -vvv trace (provrun's own log lines;
    /// RUST_LOG, when set, wins over -v and -q).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    /// Say nothing on stderr but errors: no warnings and no progress display.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,
    /// How log lines on stderr are written: text (for people) or json (one object a line).
    #[arg(
        long = "log-format",
        value_enum,
        value_name = "FORMAT",
        default_value = "text",
        global = true
    )]
    pub log_format: LogFormat,
}

impl LogArgs {
    /// What these flags ask for.
    pub fn settings(&self) -> LogSettings {
        LogSettings {
            verbose: self.verbose,
            quiet: self.quiet,
            format: self.log_format,
        }
    }
}

/// Set when `-q` was given: progress displays stay silent too.
static QUIET: AtomicBool = AtomicBool::new(false);

/// Whether `-q` was given (progress displays check it).
pub fn quiet() -> bool {
    QUIET.load(Ordering::Relaxed)
}

/// Installs the process's log subscriber on stderr, once: `RUST_LOG` when it is set and
/// not empty (it wins over `-v` and `-q`; a value that does not parse is reported and the
/// flags are used instead), else [`LogSettings::default_filter`]. A second call does
/// nothing (the first subscriber stays).
pub fn init_logging(settings: &LogSettings) {
    QUIET.store(settings.quiet, Ordering::Relaxed);
    let from_env = std::env::var("RUST_LOG")
        .ok()
        .filter(|v| !v.trim().is_empty());
    let filter = match from_env.as_deref().map(EnvFilter::try_new) {
        Some(Ok(filter)) => filter,
        Some(Err(e)) => {
            eprintln!(
                "provrun: RUST_LOG is not a filter ({}); using the flags' level instead",
                crate::inert::inert(&e.to_string())
            );
            EnvFilter::new(settings.default_filter())
        }
        None => EnvFilter::new(settings.default_filter()),
    };
    let writer = StderrLines {
        json: settings.format == LogFormat::Json,
        terminal: std::io::stderr().is_terminal(),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer)
        .with_ansi(false);
    let installed = match settings.format {
        LogFormat::Text => builder
            .without_time()
            .with_target(settings.verbose > 0 || from_env.is_some())
            .try_init(),
        LogFormat::Json => builder
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .try_init(),
    };
    // Already installed (a test calling `main_with_args` twice in one process): keep it.
    drop(installed);
}

/// Makes the writer of each log line: [`LineWriter`] on stderr.
#[derive(Debug, Clone, Copy)]
struct StderrLines {
    json: bool,
    terminal: bool,
}

impl<'a> MakeWriter<'a> for StderrLines {
    type Writer = LineWriter;

    fn make_writer(&'a self) -> Self::Writer {
        LineWriter {
            json: self.json,
            terminal: self.terminal,
            buf: Vec::new(),
        }
    }
}

/// Collects one formatted event and writes it to stderr when dropped, made inert, as one
/// write: lines of threads logging at once never interleave.
struct LineWriter {
    json: bool,
    terminal: bool,
    buf: Vec<u8>,
}

impl std::io::Write for LineWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for LineWriter {
    fn drop(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        let text = String::from_utf8_lossy(&self.buf);
        let line = render_line(text.trim_end_matches('\n'), self.json, self.terminal);
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
    }
}

/// One formatted event as it goes to stderr: a JSON object with every unsafe character
/// escaped, or `provrun: ` and the text line made inert (after a line clear on a
/// terminal); with its newline.
fn render_line(event: &str, json: bool, terminal: bool) -> String {
    if json {
        return format!("{}\n", crate::inert::inert_json(event));
    }
    let clear = if terminal { "\r\x1b[2K" } else { "" };
    format!(
        "{clear}provrun: {}\n",
        crate::inert::inert(event.trim_start())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flags_choose_the_level_of_provruns_crates_only() {
        let at = |verbose, quiet| {
            LogSettings {
                verbose,
                quiet,
                format: LogFormat::Text,
            }
            .default_filter()
        };
        assert_eq!(at(0, false), "warn");
        assert_eq!(at(1, false), "warn,provrun=info");
        assert_eq!(at(2, false), "warn,provrun=debug");
        assert_eq!(at(5, false), "warn,provrun=trace");
        assert_eq!(at(0, true), "error");
        for f in [at(0, false), at(2, false), at(0, true)] {
            assert!(EnvFilter::try_new(&f).is_ok(), "{f}");
        }
    }

    #[test]
    fn a_line_is_one_line_with_nothing_a_terminal_acts_on() {
        let line = render_line(
            " WARN left out path=a\u{1b}]0;x\u{7}\nb\u{202e}",
            false,
            false,
        );
        assert_eq!(
            line,
            "provrun: WARN left out path=a\\x1b]0;x\\x07\\nb\\u{202e}\n"
        );
        assert_eq!(line.matches('\n').count(), 1);
        let on_terminal = render_line("INFO x", false, true);
        assert!(on_terminal.starts_with("\r\x1b[2Kprovrun: INFO x"));
        let json = render_line(r#"{"fields":{"message":"a\u001b b\u202e"}}"#, true, true);
        let value: serde_json::Value = serde_json::from_str(json.trim_end()).unwrap();
        assert_eq!(value["fields"]["message"], "a\u{1b} b\u{202e}");
        assert!(!json.contains('\u{202e}'), "{json}");
    }
}

//! Colour on a terminal, plain text when piped: the one decision and the few styles the
//! CLI uses.
//!
//! `--color always` and `--color never` decide alone. Under `--color auto` (the default)
//! colour is on when the stream is a terminal, `TERM` is not `dumb` and `NO_COLOR` is
//! unset or empty; `CLICOLOR_FORCE` (non-empty, not `0`) turns it on for a pipe too, and
//! `NO_COLOR` wins over it.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicU8, Ordering};

use anstyle::{AnsiColor, Style};

/// `--color`: when to colour what the CLI writes for a person.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub(crate) enum ColorChoice {
    /// On a terminal, unless NO_COLOR is set (CLICOLOR_FORCE=1: on a pipe too).
    #[default]
    Auto,
    /// Always, on a terminal or not.
    Always,
    /// Never.
    Never,
}

/// The `--color` of this invocation (set once per `main_with_args`).
static CHOICE: AtomicU8 = AtomicU8::new(0);

/// Use `choice` for every painter made from now on.
pub(crate) fn set_choice(choice: ColorChoice) {
    CHOICE.store(choice as u8, Ordering::Relaxed);
}

fn choice() -> ColorChoice {
    match CHOICE.load(Ordering::Relaxed) {
        1 => ColorChoice::Always,
        2 => ColorChoice::Never,
        _ => ColorChoice::Auto,
    }
}

fn env_set(name: &str) -> bool {
    std::env::var_os(name).is_some_and(|v| !v.is_empty() && v != "0")
}

/// Whether to colour a stream that is (or is not) a terminal.
fn colour_for(is_terminal: bool) -> bool {
    match choice() {
        ColorChoice::Always => return true,
        ColorChoice::Never => return false,
        ColorChoice::Auto => {}
    }
    if env_set("NO_COLOR") {
        return false;
    }
    if env_set("CLICOLOR_FORCE") {
        return true;
    }
    is_terminal && std::env::var_os("TERM").is_none_or(|t| t != "dumb")
}

/// Paints text in a style, or leaves it plain.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Painter {
    on: bool,
}

impl Painter {
    /// A painter for stdout.
    pub(crate) fn stdout() -> Self {
        Self {
            on: colour_for(std::io::stdout().is_terminal()),
        }
    }

    /// A painter for stderr.
    pub(crate) fn stderr() -> Self {
        Self {
            on: colour_for(std::io::stderr().is_terminal()),
        }
    }

    fn paint(self, style: Style, text: &str) -> String {
        if self.on {
            format!("{style}{text}{style:#}")
        } else {
            text.to_string()
        }
    }

    /// Success.
    pub(crate) fn good(self, text: &str) -> String {
        self.paint(AnsiColor::Green.on_default(), text)
    }

    /// Failure.
    pub(crate) fn bad(self, text: &str) -> String {
        self.paint(AnsiColor::Red.on_default().bold(), text)
    }

    /// Worth a look.
    pub(crate) fn warn(self, text: &str) -> String {
        self.paint(AnsiColor::Yellow.on_default(), text)
    }

    /// A heading.
    pub(crate) fn strong(self, text: &str) -> String {
        self.paint(Style::new().bold(), text)
    }

    /// Detail that matters less.
    pub(crate) fn dim(self, text: &str) -> String {
        self.paint(Style::new().dimmed(), text)
    }
}

//! `provrun replay`: a recorded run executed again from its bundle alone (a folder, a
//! `.tar` or a bucket object), and compared with the recording.

use std::path::{Path, PathBuf};

use provrun_agent::{AgentError, Backend, RunControl};
use provrun_evidence::{Event, EventPayload};

use crate::drive::drive;
use crate::inert::inert;
use crate::style::Painter;
use crate::{EXIT_FAILED, EXIT_OK, EXIT_USAGE, check_new_bundle, fail, registry};

/// Arguments of `provrun replay`.
#[derive(Debug, clap::Args)]
pub(crate) struct ReplayArgs {
    /// The recorded bundle, which must verify and be finished: a folder, a .tar of one,
    /// or its URL (s3://BUCKET/PREFIX/ID.tar, file:///…/ID.tar).
    bundle: PathBuf,
    /// The new bundle folder; it must not exist or be empty.
    #[arg(long, value_name = "NEW")]
    out: PathBuf,
    /// Load the tool manifests (*.toml) of this folder as well; repeatable.
    #[arg(long = "tools-dir", value_name = "DIR")]
    tools_dirs: Vec<PathBuf>,
    /// Print one JSON object on stdout instead of the verdict line: {"matches",
    /// "difference", "tool_calls", "outputs", "answered_from_recording", "bundle",
    /// "run_id", "status"}.
    #[arg(long)]
    json: bool,
}

pub(crate) fn replay(args: ReplayArgs) -> u8 {
    // Read from any source: a .tar or a bucket object is unpacked to a temporary folder
    // first; one that cannot be read or unpacked does not verify (exit 1).
    let source = match crate::open::for_reading(&args.bundle, "", EXIT_FAILED) {
        Ok(s) => s,
        Err(code) => return code,
    };
    if let Some(why) = not_replayable(source.dir()) {
        return fail(
            EXIT_USAGE,
            format!("`{}` cannot be replayed: {why}", args.bundle.display()),
        );
    }
    if let Err(code) = check_new_bundle(&args.out) {
        return code;
    }
    let registry = match registry(&args.tools_dirs) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let backend = Backend::new().with_registry(registry);
    let control = RunControl::new();
    let report = match drive(
        &control,
        provrun_agent::replay(&backend, &control, source.dir(), &args.out),
    )
    .map(|d| d.out)
    {
        Ok(Ok(r)) => r,
        Ok(Err(e @ (AgentError::Bundle { .. } | AgentError::Evidence(_)))) => {
            return fail(EXIT_FAILED, e);
        }
        Ok(Err(e)) => return fail(EXIT_USAGE, format!("cannot replay: {e}")),
        Err(code) => return code,
    };
    let paint = Painter::stdout();
    if report.answered_from_recording > 0 {
        // Said on stderr so that stdout's one line stays the verdict scripts read.
        eprintln!(
            "provrun: {} tool call{} stopped in the recording (timed out, or the run was \
             cancelled) {} answered from the recording, not run again",
            report.answered_from_recording,
            if report.answered_from_recording == 1 {
                ""
            } else {
                "s"
            },
            if report.answered_from_recording == 1 {
                "was"
            } else {
                "were"
            },
        );
    }
    let code = if report.matches() {
        EXIT_OK
    } else {
        EXIT_FAILED
    };
    if args.json {
        let value = serde_json::json!({
            "matches": report.matches(),
            "difference": report.difference,
            "tool_calls": report.tool_calls,
            "outputs": report.outputs,
            "answered_from_recording": report.answered_from_recording,
            "bundle": args.out.display().to_string(),
            "run_id": report.result.run_id,
            "status": report.result.status().as_str(),
        });
        out!("{}", crate::inert::inert_json(&value.to_string()));
        return code;
    }
    match &report.difference {
        None => {
            out!(
                "{}: {} tool calls and {} output files are the same as recorded (new bundle: {})",
                paint.good("replay matches"),
                report.tool_calls,
                report.outputs,
                inert(&args.out.display().to_string())
            );
            EXIT_OK
        }
        Some(difference) => {
            out!(
                "{}: {} (new bundle: {})",
                paint.bad("replay differs"),
                inert(&difference.to_string()),
                inert(&args.out.display().to_string())
            );
            EXIT_FAILED
        }
    }
}

/// Why the bundle in `dir` cannot be replayed, when it is plain from its first event: a
/// run provrun did not run (imported, a program `provrun wrap` ran, or captured from
/// another loop) records no agent spec to run again. `None` when it may be replayed, or
/// the log cannot tell (the replay itself then says what is wrong).
fn not_replayable(dir: &Path) -> Option<String> {
    let events = provrun_evidence::read_events(dir).ok()?;
    let first = events.first().map(Event::typed)?.ok()?;
    let EventPayload::RunStarted(started) = first else {
        return None;
    };
    let details = &started.details;
    if details["agent_spec"].is_string() {
        return None;
    }
    if started.builder.starts_with("provrun-wrap/") || details["wrap"].is_object() {
        return Some(format!(
            "it records `{}`, a program `provrun wrap` ran, and replay re-executes provrun's \
             own agent loop from a bundle: it cannot run another program again. Its exchanges \
             are in the bundle byte for byte (show, view, cat read them) and verify checks it",
            inert(&started.agent)
        ));
    }
    let from = details["import"]["from"].as_str();
    Some(match from {
        Some(from) => format!(
            "it was imported from {from}, and imported runs cannot be replayed: provrun did \
             not run it, so the bundle holds no agent spec to run again (verify, show and view \
             read it)"
        ),
        None if details["capture"].is_object() => "it was captured from a loop provrun does not \
             run, and such runs cannot be replayed: the bundle holds no agent spec to run again \
             (verify, show and view read it)"
            .to_owned(),
        None => "its run_started records no agent spec to run again".to_owned(),
    })
}

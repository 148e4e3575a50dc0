//! `provrun diff A B [--json]`: two runs compared step by step (the view crate's
//! `compare`): exit 0 when they behaved the same (the same calls, results and outputs),
//! 1 when they differ (each difference named), 2 when either is no bundle.

use std::path::{Path, PathBuf};

use provrun_store::Location;
use provrun_view::{BundleSource, RunDiff};
use serde_json::Value;

use crate::inert::{inert, inert_block};
use crate::{EXIT_FAILED, EXIT_OK, EXIT_USAGE, fail};

/// Arguments of `provrun diff`.
#[derive(Debug, clap::Args)]
pub(crate) struct DiffArgs {
    /// Run A: a bundle folder, a .tar of one, or its URL.
    a: PathBuf,
    /// Run B, named the same ways.
    b: PathBuf,
    /// Print one JSON object: {same, a, b, differences, steps, outputs}.
    #[arg(long)]
    json: bool,
}

/// A bundle opened to be read (kept open while its source is used).
pub(crate) fn open(arg: &Path) -> Result<(provrun_store::OpenBundle, String), String> {
    let location = Location::parse(arg).map_err(|e| e.to_string())?;
    let opened = provrun_store::open_blocking(&location).map_err(|e| e.to_string())?;
    opened.require_log().map_err(|e| e.to_string())?;
    Ok((opened, location.name()))
}

/// Both runs compared, or a usage error.
pub(crate) fn compare(a: &Path, b: &Path) -> Result<RunDiff, String> {
    let (oa, na) = open(a)?;
    let (ob, nb) = open(b)?;
    let sa = BundleSource::folder(oa.dir()).with_label(na);
    let sb = BundleSource::folder(ob.dir()).with_label(nb);
    for s in [&sa, &sb] {
        if let Err(e) = &s.events {
            return Err(format!("`{}`: the log cannot be read: {e}", s.label));
        }
    }
    Ok(provrun_view::compare(&sa, &sb))
}

fn short(v: &Value) -> String {
    let text = match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let one: String = text.chars().take(200).collect();
    let more = if text.chars().count() > 200 {
        "…"
    } else {
        ""
    };
    format!("{}{more}", inert(&one))
}

fn side(name: &str, h: &Value) -> String {
    format!(
        "{name}: {} ({}, {} steps, {} tool calls, {} tokens, {} ms)",
        inert(h["bundle"].as_str().unwrap_or("")),
        inert(h["status"].as_str().unwrap_or("")),
        h["steps"],
        h["tool_calls"],
        h["tokens"],
        h["duration_ms"]
    )
}

pub(crate) fn diff(args: &DiffArgs) -> u8 {
    let d = match compare(&args.a, &args.b) {
        Ok(d) => d,
        Err(e) => return fail(EXIT_USAGE, format!("diff: {e}")),
    };
    if args.json {
        match serde_json::to_string(&d) {
            Ok(text) => out!("{text}"),
            Err(e) => return fail(EXIT_FAILED, format!("diff: {e}")),
        }
    } else {
        out!("{}", side("A", &d.a));
        out!("{}", side("B", &d.b));
        if d.same {
            out!("the same behaviour: the same calls, results and outputs");
        } else {
            out!("{} differences:", d.differences.len());
            for x in &d.differences {
                let mut place = String::new();
                if let Some(n) = x.step {
                    place.push_str(&format!("step {n}, "));
                }
                if let Some(at) = &x.at {
                    place.push_str(&format!("{}, ", inert(at)));
                }
                out!("  {place}{}:", x.kind);
                out!("    A: {}", short(&x.a));
                out!("    B: {}", short(&x.b));
            }
            for o in d.outputs.iter().filter(|o| o["diff"].is_string()) {
                out!("{}", inert_block(o["diff"].as_str().unwrap_or("")));
            }
        }
    }
    if d.same { EXIT_OK } else { EXIT_FAILED }
}

//! `provrun export inspect BUNDLE…|DIR --out LOG.eval`: runs as an Inspect `.eval` log,
//! one sample per run (the provrun-inspect crate's format); a folder of bundles gives
//! every bundle it holds, in id order.

use std::path::{Path, PathBuf};

use provrun_store::{Location, OpenBundle, Store};

use crate::{EXIT_FAILED, EXIT_OK, EXIT_USAGE, fail};

/// `provrun export inspect`'s arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct InspectArgs {
    /// The bundles (folders, .tar files or their URLs), or one folder of bundles.
    #[arg(required = true, value_name = "BUNDLE|DIR")]
    bundles: Vec<PathBuf>,
    /// The log to write (replaced if it exists), e.g. `runs.eval`.
    #[arg(long, value_name = "LOG.eval")]
    out: PathBuf,
}

/// Each bundle named, or each bundle of one folder of bundles.
fn locations(args: &InspectArgs) -> Result<Vec<Location>, String> {
    if let [one] = args.bundles.as_slice()
        && one.is_dir()
        && !one.join(provrun_store::EVENTS_FILE).exists()
    {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        let listed = runtime
            .block_on(Store::folder(one).list())
            .map_err(|e| e.to_string())?;
        return Ok(listed.into_iter().map(|l| l.location).collect());
    }
    args.bundles
        .iter()
        .map(|b| Location::parse(b).map_err(|e| e.to_string()))
        .collect()
}

pub(crate) fn export(args: &InspectArgs) -> u8 {
    let locations = match locations(args) {
        Ok(l) if !l.is_empty() => l,
        Ok(_) => return fail(EXIT_USAGE, "export inspect: no bundle to export"),
        Err(e) => return fail(EXIT_USAGE, format!("export inspect: {e}")),
    };
    let mut opened: Vec<(OpenBundle, String)> = Vec::new();
    for location in &locations {
        match provrun_store::open_blocking(location) {
            Ok(o) if o.has_log() => opened.push((o, location.name())),
            Ok(_) => {
                return fail(
                    EXIT_USAGE,
                    format!(
                        "export inspect: `{}` is no bundle (no events.jsonl)",
                        location.name()
                    ),
                );
            }
            Err(e) => return fail(EXIT_USAGE, format!("export inspect: {e}")),
        }
    }
    let runs: Vec<provrun_inspect::Run<'_>> = opened
        .iter()
        .map(|(o, name)| provrun_inspect::Run {
            dir: o.dir(),
            label: name.clone(),
        })
        .collect();
    match provrun_inspect::export_eval(&runs, Path::new(&args.out), &provrun_inspect::now()) {
        Ok(n) => {
            out!("{n} samples written to {}", args.out.display());
            EXIT_OK
        }
        Err(e) => fail(EXIT_FAILED, format!("export inspect: {e}")),
    }
}

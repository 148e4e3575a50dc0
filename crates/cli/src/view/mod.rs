//! `provrun view BUNDLE [-o FILE.html]`: a bundle as one self-contained web page — the
//! run's header and verification verdict, its timeline of model steps and tool calls, its
//! inputs and outputs, and the raw bytes of every exchange — written to a file, or served
//! on a loopback port until Ctrl-C.
//!
//! The page is the provrun-view crate's (how it keeps bundle text inert is described
//! there); this command opens the bundle (a folder, a `.tar` or its URL, through the
//! store crate), writes the file, or serves it.

use std::path::{Path, PathBuf};

use provrun_store::{Location, StoreError};
use provrun_view::BundleSource;

use crate::{EXIT_FAILED, EXIT_OK, EXIT_USAGE, fail};

mod list;
mod serve;

/// Arguments of `provrun view`.
#[derive(Debug, clap::Args)]
pub(crate) struct ViewArgs {
    /// The bundle: a folder, a .tar of one (as `batch` uploads), or its URL
    /// (s3://BUCKET/PREFIX/ID.tar, file:///…/ID.tar). A folder of bundles (a batch's
    /// --out, a serve store), a bucket prefix (s3://BUCKET/PREFIX), or three or more
    /// bundles give a listing of the runs instead; two bundles, the runs side by side.
    #[arg(required = true, value_name = "BUNDLE")]
    bundles: Vec<PathBuf>,
    /// Write the page to this file (replaced if it exists) instead of serving it; the
    /// file opens offline in any browser. For a listing, a folder: its `index.html` and
    /// each run's page under `runs/`.
    #[arg(short = 'o', long = "out", value_name = "FILE.html|DIR")]
    out: Option<PathBuf>,
    /// Without --out: the loopback port to serve the page on (0, the default, picks a
    /// free one).
    #[arg(long, value_name = "PORT", default_value_t = 0)]
    port: u16,
}

/// Whether `out` would land inside the bundle folder (which must hold nothing else).
fn inside(out: &Path, folder: &Path) -> bool {
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    match (parent.canonicalize(), folder.canonicalize()) {
        (Ok(parent), Ok(folder)) => parent.starts_with(folder),
        _ => false,
    }
}

/// Many bundles, when the arguments name more than one bundle (or a place of many).
fn many(args: &ViewArgs) -> Result<Option<list::Many>, u8> {
    if let [one] = args.bundles.as_slice() {
        let text = one.to_string_lossy();
        if provrun_store::is_url(&text) && !text.ends_with(".tar") {
            return provrun_store::Store::open(text.trim_end_matches('/'))
                .map(|s| Some(list::Many::Store(s)))
                .map_err(|e| fail(EXIT_USAGE, format!("view: {e}")));
        }
        if list::is_store_folder(one) {
            return Ok(Some(list::Many::Store(provrun_store::Store::folder(one))));
        }
        return Ok(None);
    }
    let mut named = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (n, arg) in args.bundles.iter().enumerate() {
        let location = Location::parse(arg).map_err(|e| fail(EXIT_USAGE, format!("view: {e}")))?;
        let mut id = list::id_of(&location);
        if provrun_store::check_id(&id).is_err() || !seen.insert(id.clone()) {
            id = format!("run-{}", n + 1);
            seen.insert(id.clone());
        }
        named.push((id, location));
    }
    Ok(Some(list::Many::Named(named)))
}

/// `view A B`: the two runs side by side, written to `--out` or served.
fn side_by_side(args: &ViewArgs, a: &Path, b: &Path) -> u8 {
    if let Some(out) = &args.out
        && out.is_dir()
    {
        return fail(
            EXIT_USAGE,
            format!(
                "view: --out `{}` is a folder; give a file name",
                out.display()
            ),
        );
    }
    let diff = match crate::diff::compare(a, b) {
        Ok(d) => d,
        Err(e) => return fail(EXIT_USAGE, format!("view: {e}")),
    };
    let page = match provrun_view::render_comparison(&diff) {
        Ok(p) => p,
        Err(e) => return fail(EXIT_FAILED, format!("view: {e}")),
    };
    write_or_serve(
        page,
        &provrun_view::comparison_security_policy(),
        args.out.as_deref(),
        args.port,
    )
}

pub(crate) fn view(args: &ViewArgs) -> u8 {
    if let [a, b] = args.bundles.as_slice() {
        return side_by_side(args, a, b);
    }
    match many(args) {
        Err(code) => return code,
        Ok(Some(many)) => {
            if let Some(out) = &args.out
                && out.exists()
                && !out.is_dir()
            {
                return fail(
                    EXIT_USAGE,
                    format!(
                        "view: --out `{}` is a file; a listing is written to a folder",
                        out.display()
                    ),
                );
            }
            return list::listing(many, args.out.as_deref(), args.port);
        }
        Ok(None) => {}
    }
    let bundle = &args.bundles[0];
    let location = match Location::parse(bundle) {
        Ok(l) => l,
        Err(StoreError::NotFound(_)) => {
            return fail(
                EXIT_USAGE,
                format!("view: no bundle folder or .tar at `{}`", bundle.display()),
            );
        }
        Err(e) => return fail(EXIT_USAGE, format!("view: {e}")),
    };
    if let Some(out) = &args.out
        && let Err(code) = check_out(out, &location)
    {
        return code;
    }
    let opened = match provrun_store::open_blocking(&location) {
        Ok(o) => o,
        Err(e @ (StoreError::NotFound(_) | StoreError::BadUrl { .. })) => {
            return fail(EXIT_USAGE, format!("view: {e}"));
        }
        Err(e) => return fail(EXIT_FAILED, format!("view: {e}")),
    };
    // A folder without a log is no bundle: no page (a log that does not parse still
    // gives one, which says so).
    if let Err(e) = opened.require_log() {
        return fail(EXIT_USAGE, format!("view: {e}"));
    }
    let source = BundleSource::folder(opened.dir()).with_label(location.name());
    if let Err(e) = &source.events {
        eprintln!(
            "provrun: view: the log cannot be read ({}); the page shows the verdict only",
            crate::inert::inert(e)
        );
    }
    let page = match provrun_view::render_page(&source) {
        Ok(p) => p,
        Err(e) => return fail(EXIT_FAILED, format!("view: {e}")),
    };
    write_or_serve(
        page,
        &provrun_view::content_security_policy(),
        args.out.as_deref(),
        args.port,
    )
}

/// `--out` must be a file name, and not inside a bundle folder (which must hold nothing
/// but its evidence); a usage error otherwise.
fn check_out(out: &Path, location: &Location) -> Result<(), u8> {
    if out.is_dir() {
        return Err(fail(
            EXIT_USAGE,
            format!(
                "view: --out `{}` is a folder; give a file name",
                out.display()
            ),
        ));
    }
    if let Location::Folder(folder) = location
        && inside(out, folder)
    {
        return Err(fail(
            EXIT_USAGE,
            format!(
                "view: --out `{}` is inside the bundle, which must hold nothing but its evidence; write the page elsewhere",
                out.display()
            ),
        ));
    }
    Ok(())
}

/// A page written to `out`, or served on `port` until Ctrl-C with its security policy.
fn write_or_serve(page: String, csp: &str, out: Option<&std::path::Path>, port: u16) -> u8 {
    match out {
        Some(out) => match std::fs::write(out, page.as_bytes()) {
            Ok(()) => {
                out!("page written to {}", out.display());
                EXIT_OK
            }
            Err(e) => fail(
                EXIT_FAILED,
                format!("view: cannot write `{}`: {e}", out.display()),
            ),
        },
        None => serve::serve(page, csp, port, None),
    }
}

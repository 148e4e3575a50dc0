//! `provrun view BUNDLE [-o FILE.html]`: a bundle as one self-contained web page — the
//! run's header and verification verdict, its timeline of model steps and tool calls, its
//! inputs and outputs, and the raw bytes of every exchange — written to a file, or served
//! on a loopback port until Ctrl-C.
//!
//! Everything in a bundle is untrusted. The page carries it only as JSON inside a
//! `<script type="application/json">` element (with `<`, `>`, `&`, U+2028 and U+2029
//! escaped, so no text can close the element), and its one inline script puts it into the
//! page with `textContent` alone. A Content-Security-Policy allows nothing but that
//! script and the inline style, by their SHA-256 hashes: no network, no images, no
//! other script.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use sha2::{Digest as _, Sha256};

use crate::{EXIT_FAILED, EXIT_OK, EXIT_USAGE, fail};

mod data;
mod serve;
pub(crate) mod source;
mod wrapped;

use source::BundleSource;

const TEMPLATE: &str = include_str!("page.html");
const SCRIPT: &str = include_str!("page.js");
const STYLE: &str = include_str!("page.css");

/// Arguments of `provrun view`.
#[derive(Debug, clap::Args)]
pub(crate) struct ViewArgs {
    /// The bundle folder.
    bundle: PathBuf,
    /// Write the page to this file (replaced if it exists) instead of serving it; the
    /// file opens offline in any browser.
    #[arg(short = 'o', long = "out", value_name = "FILE.html")]
    out: Option<PathBuf>,
    /// Without --out: the loopback port to serve the page on (0, the default, picks a
    /// free one).
    #[arg(long, value_name = "PORT", default_value_t = 0)]
    port: u16,
}

/// The Content-Security-Policy of the page: nothing from anywhere, except its own inline
/// script and style, named by hash.
pub(crate) fn content_security_policy() -> String {
    let hash = |text: &str| base64::engine::general_purpose::STANDARD.encode(Sha256::digest(text));
    format!(
        "default-src 'none'; script-src 'sha256-{}'; style-src 'sha256-{}'; img-src 'none'; \
         connect-src 'none'; font-src 'none'; media-src 'none'; object-src 'none'; \
         frame-src 'none'; base-uri 'none'; form-action 'none'",
        hash(SCRIPT),
        hash(STYLE)
    )
}

/// JSON safe to put inside a `<script type="application/json">` element: the characters
/// that could end the element or start markup are written as `\uXXXX` escapes (they can
/// only occur inside JSON strings, where an escape means the same), and so are the line
/// separators older JavaScript parsers choke on.
pub(crate) fn json_for_script(value: &serde_json::Value) -> String {
    let text = serde_json::to_string(value).unwrap_or_else(|_| "null".to_owned());
    let mut out = String::with_capacity(text.len() + text.len() / 16);
    for c in text.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

/// The whole page for a bundle.
pub(crate) fn render_page(source: &BundleSource) -> Result<String, String> {
    let data = data::page_data(source);
    let mut env = minijinja::Environment::new();
    env.add_template("page.html", TEMPLATE)
        .map_err(|e| format!("the page template is broken: {e}"))?;
    let template = env
        .get_template("page.html")
        .map_err(|e| format!("the page template is missing: {e}"))?;
    let safe = minijinja::Value::from_safe_string;
    template
        .render(minijinja::context! {
            csp => content_security_policy(),
            style => safe(STYLE.to_owned()),
            script => safe(SCRIPT.to_owned()),
            data => safe(json_for_script(&data)),
        })
        .map_err(|e| format!("cannot render the page: {e}"))
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

pub(crate) fn view(args: &ViewArgs) -> u8 {
    if !args.bundle.is_dir() {
        return fail(
            EXIT_USAGE,
            format!("view: no bundle folder at `{}`", args.bundle.display()),
        );
    }
    if let Some(out) = &args.out {
        if out.is_dir() {
            return fail(
                EXIT_USAGE,
                format!(
                    "view: --out `{}` is a folder; give a file name",
                    out.display()
                ),
            );
        }
        if inside(out, &args.bundle) {
            return fail(
                EXIT_USAGE,
                format!(
                    "view: --out `{}` is inside the bundle, which must hold nothing but its evidence; write the page elsewhere",
                    out.display()
                ),
            );
        }
    }
    let source = BundleSource::folder(&args.bundle);
    if let Err(e) = &source.events {
        eprintln!(
            "provrun: view: the log cannot be read ({}); the page shows the verdict only",
            crate::inert::inert(e)
        );
    }
    let page = match render_page(&source) {
        Ok(p) => p,
        Err(e) => return fail(EXIT_FAILED, format!("view: {e}")),
    };
    match &args.out {
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
        None => serve::serve(page, args.port),
    }
}

#[cfg(test)]
mod tests {
    use super::json_for_script;

    #[test]
    fn json_for_a_script_element_escapes_what_could_end_it_and_means_the_same() {
        let value = serde_json::json!({
            "a": "</script><!-- <script> & \u{2028}\u{2029} -->",
            "</b>": [1, "x>y"]
        });
        let text = json_for_script(&value);
        for c in ['<', '>', '&', '\u{2028}', '\u{2029}'] {
            assert!(!text.contains(c), "{c:?} in {text}");
        }
        assert!(text.contains("\\u003c/script\\u003e"));
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, value);
    }
}

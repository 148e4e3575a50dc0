//! A provrun bundle as one self-contained web page: the run's header and verification
//! verdict, its timeline of model steps and tool calls, its inputs and outputs, and the
//! raw bytes of every exchange. `provrun view` writes or serves it; a server renders it
//! per request with the same call.
//!
//! Many runs make a listing ([`render_listing`] of [`ListingRow`]s, each a bundle's
//! [`RunSummary`]), fed from the run index ([`RunIndex`]) that `provrun
//! batch` and `provrun serve` write as runs end, so a listing need not verify every
//! bundle again.
//!
//! Build a [`BundleSource`] from a bundle folder ([`BundleSource::folder`]; open a `.tar`
//! or a bucket object as a folder with the store crate first), then [`render_page`].
//! Serve the page with [`content_security_policy`] as its `Content-Security-Policy`
//! header too.
//!
//! Everything in a bundle is untrusted. The page carries it only as JSON inside a
//! `<script type="application/json">` element ([`json_for_script`]: `<`, `>`, `&`, U+2028
//! and U+2029 escaped, so no text can close the element), and its one inline script puts
//! it into the page with `textContent` alone. The policy allows nothing but that script
//! and the inline style, by their SHA-256 hashes: no network, no images, no other script.
//!
//! ```
//! let dir = tempfile::tempdir().unwrap();
//! // Not a bundle at all: the page still renders, and says the bundle does not verify.
//! let source = provrun_view::BundleSource::folder(dir.path()).with_label("example");
//! let page = provrun_view::render_page(&source).unwrap();
//! assert!(page.starts_with("<!doctype html>") && page.contains("Content-Security-Policy"));
//! assert!(page.contains(r#""verdict":"fails""#));
//! ```

use base64::Engine as _;
use sha2::{Digest as _, Sha256};

mod compare;
mod data;
mod error;
mod index;
mod listing;
mod observed;
mod source;
mod steps;
mod summary;
mod wrapped;

pub use compare::{Difference, RunDiff, compare, comparison_security_policy, render_comparison};
pub use data::{BLOB_EMBED_LIMIT, BLOBS_TOTAL_LIMIT, TEXT_SHOW_LIMIT, page_data};
pub use error::ViewError;
pub use index::{BATCH_INDEX_FILE, INDEX_FILE, IndexEntry, RunIndex, statement_sha256};
pub use listing::{
    LISTING_PAGE_SIZE, LinkStyle, ListingRow, listing_data, listing_security_policy,
    render_listing, row_for_folder,
};
pub use source::{BlobFn, BundleSource, FILE_READ_LIMIT, FileFn};
pub use summary::{RunSummary, SEARCH_TEXT_LIMIT, summarize, summarize_events, verdict_word};

const TEMPLATE: &str = include_str!("page.html");
const SCRIPT: &str = include_str!("page.js");
const STYLE: &str = include_str!("page.css");

/// The Content-Security-Policy of the page: nothing from anywhere, except its own inline
/// script and style, named by hash. The page carries it in a `<meta>` element; a server
/// sends it as a header as well.
pub fn content_security_policy() -> String {
    policy_for(SCRIPT, STYLE)
}

/// A policy that allows only the inline `script` and `style`, by their SHA-256 hashes.
pub(crate) fn policy_for(script: &str, style: &str) -> String {
    let hash = |text: &str| base64::engine::general_purpose::STANDARD.encode(Sha256::digest(text));
    format!(
        "default-src 'none'; script-src 'sha256-{}'; style-src 'sha256-{}'; img-src 'none'; \
         connect-src 'none'; font-src 'none'; media-src 'none'; object-src 'none'; \
         frame-src 'none'; base-uri 'none'; form-action 'none'",
        hash(script),
        hash(style)
    )
}

/// JSON safe to put inside a `<script type="application/json">` element: the characters
/// that could end the element or start markup are written as `\uXXXX` escapes (they can
/// only occur inside JSON strings, where an escape means the same), and so are the line
/// separators older JavaScript parsers choke on.
pub fn json_for_script(value: &serde_json::Value) -> String {
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

/// The whole page for a bundle: one HTML document with no outside references. A bundle
/// that does not verify, or whose log cannot be read, still gives a page that says so.
///
/// # Errors
///
/// [`ViewError::Template`] when the template does not render (a defect of this crate, never
/// of the bundle).
pub fn render_page(source: &BundleSource) -> Result<String, ViewError> {
    let data = page_data(source);
    render_template(TEMPLATE, content_security_policy(), STYLE, SCRIPT, &data)
}

/// A page template rendered with its policy, style, script and data.
pub(crate) fn render_template(
    template: &str,
    csp: String,
    style: &str,
    script: &str,
    data: &serde_json::Value,
) -> Result<String, ViewError> {
    let mut env = minijinja::Environment::new();
    env.add_template("page.html", template)
        .map_err(|e| ViewError::Template(format!("the page template is broken: {e}")))?;
    let template = env
        .get_template("page.html")
        .map_err(|e| ViewError::Template(format!("the page template is missing: {e}")))?;
    let safe = minijinja::Value::from_safe_string;
    template
        .render(minijinja::context! {
            csp => csp,
            style => safe(style.to_owned()),
            script => safe(script.to_owned()),
            data => safe(json_for_script(data)),
        })
        .map_err(|e| ViewError::Template(e.to_string()))
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

//! Many runs on one page: the listing's rows ([`ListingRow`]: a bundle's id and its
//! [`RunSummary`], taken from the run index when its statement digest still matches, else
//! read and verified again — [`row_for_folder`]) and the page itself
//! ([`render_listing`]: a table to sort, filter, search and page through, each row a
//! link to `runs/ID` or `runs/ID.html`).
//!
//! The page keeps bundle text inert the same way the run page does: the rows travel as
//! JSON in a `<script type="application/json">` element and enter the page by
//! `textContent` only, under a policy that allows only the page's own inline script and
//! style. The one thing made from bundle text that is not text is each row's link, made
//! from the bundle's id, which a store lists only when it is a plain name
//! (`provrun_store::check_id`) and which the script percent-encodes besides.

use std::collections::HashMap;
use std::path::Path;

use serde_json::{Value, json};

use crate::ViewError;
use crate::index::{IndexEntry, statement_sha256};
use crate::summary::RunSummary;

const TEMPLATE: &str = include_str!("list.html");
const SCRIPT: &str = include_str!("list.js");
const STYLE: &str = include_str!("list.css");

/// Rows on a page of the listing.
pub const LISTING_PAGE_SIZE: usize = 100;

/// One run of a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListingRow {
    /// The bundle's id in its store (the link's target).
    pub id: String,
    /// What the row shows.
    pub summary: RunSummary,
    /// Whether the summary came from the run index (not verified again).
    pub cached: bool,
}

/// The row of the bundle folder `dir` stored as `id`: the index's summary when the entry
/// of `id` is for the same `statement.json` (by SHA-256), else the bundle read and
/// verified now.
pub fn row_for_folder(dir: &Path, id: &str, index: &HashMap<String, IndexEntry>) -> ListingRow {
    if let Some(entry) = index.get(id)
        && let Some(summary) = &entry.summary
        && !entry.statement_sha256.is_empty()
        && statement_sha256(dir).as_deref() == Some(entry.statement_sha256.as_str())
    {
        return ListingRow {
            id: id.to_owned(),
            summary: summary.clone(),
            cached: true,
        };
    }
    ListingRow {
        id: id.to_owned(),
        summary: crate::summary::summarize(dir),
        cached: false,
    }
}

/// The Content-Security-Policy of the listing page (its own script and style by hash).
pub fn listing_security_policy() -> String {
    crate::policy_for(SCRIPT, STYLE)
}

/// How the listing's links end: `""` when a server answers `runs/ID`, `".html"` for a
/// folder of static pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkStyle {
    /// `runs/ID`, served.
    Served,
    /// `runs/ID.html`, files beside the listing.
    Files,
}

/// The listing's data: the title, a note, and each run as an array (the order the
/// script reads: id, agent, model, status, verdict, failed checks, started, duration,
/// steps, tool calls, tokens, tools, search text).
pub fn listing_data(title: &str, note: &str, rows: &[ListingRow], links: LinkStyle) -> Value {
    let runs: Vec<Value> = rows
        .iter()
        .map(|r| {
            let s = &r.summary;
            json!([
                r.id,
                s.agent,
                s.model,
                s.status,
                s.verdict,
                s.failed_checks.join("\n"),
                s.started,
                s.duration_ms,
                s.steps,
                s.tool_calls,
                s.tokens,
                s.tools.join("\n"),
                s.text,
            ])
        })
        .collect();
    json!({
        "title": title,
        "note": note,
        "suffix": match links { LinkStyle::Served => "", LinkStyle::Files => ".html" },
        "page_size": LISTING_PAGE_SIZE,
        "runs": runs,
    })
}

/// The listing page: one HTML document with no outside references.
///
/// # Errors
///
/// [`ViewError::Template`] when the template does not render (a defect of this crate).
pub fn render_listing(
    title: &str,
    note: &str,
    rows: &[ListingRow],
    links: LinkStyle,
) -> Result<String, ViewError> {
    let data = listing_data(title, note, rows, links);
    crate::render_template(TEMPLATE, listing_security_policy(), STYLE, SCRIPT, &data)
}

//! `provrun view DIR` (a listing of many runs) in a real headless browser: a batch's
//! folder with a hostile run and a bundle changed after it was indexed — rows, verdicts,
//! links to each run's page, hostile text shown as text, filters and search — and a
//! 10,000-run listing that renders its first page and filters (the times it took are
//! printed, not asserted: speed is measured by `cargo xtask bench-view`, docs/view.md).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::view_browser::{browse, chromium, cli, count, s};

/// The listing's DOM after its script ran.
fn dom(browser: &Path, page: &Path, fragment: &str) -> String {
    let dom = browse(browser, page, fragment, &["--dump-dom".to_owned()]);
    assert!(
        dom.contains("data-ready=\"1\""),
        "the listing's script did not finish: {}",
        &dom[..dom.len().min(2000)]
    );
    dom
}

/// The text of `<span id="count">`: "N of M runs".
fn shown(dom: &str) -> &str {
    let at = dom.find("<span id=\"count\">").expect("a count") + "<span id=\"count\">".len();
    &dom[at..at + dom[at..].find('<').unwrap()]
}

/// Rows of the table body.
fn rows(dom: &str) -> usize {
    let body = &dom[dom.find("<tbody id=\"rows\">").expect("a table body")..];
    count(&body[..body.find("</tbody>").unwrap()], "<tr>")
}

/// A batch of three scripted runs into `out` (which writes the run index), and a fourth
/// run whose agent name and tool arguments are hostile, run on its own (not indexed).
fn runs(dir: &Path) -> PathBuf {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/scripted");
    let lines: Vec<String> = (1..=3)
        .map(|i| {
            serde_json::json!({"id": format!("case-{i}"), "agent": example.join("agent.toml"),
                "input": [example.join("input")]})
            .to_string()
        })
        .collect();
    let jsonl = dir.join("runs.jsonl");
    std::fs::write(&jsonl, lines.join("\n")).unwrap();
    let out = dir.join("out");
    assert_eq!(
        cli(&["batch", s(&jsonl), "--out", s(&out)]),
        ExitCode::SUCCESS
    );
    let hostile = dir.join("hostile");
    std::fs::create_dir_all(&hostile).unwrap();
    let script = serde_json::json!([
        {"text": "x", "tool_calls": [{"id": "w", "name": "write_file", "arguments":
            {"path": "/output/x.html", "content": "NEEDLE-7 </script><img src=x onerror=alert(1)>"}}]},
        {"text": "done"}
    ]);
    std::fs::write(hostile.join("script.json"), script.to_string()).unwrap();
    std::fs::write(
        hostile.join("agent.toml"),
        "name = \"<img src=x onerror=document.title='PWNED'>\"\nmodel = \"script:script.json\"\ntools = [\"write_file\"]\n",
    )
    .unwrap();
    let spec = hostile.join("agent.toml");
    assert_eq!(
        cli(&["run", s(&spec), "--out", s(&out.join("hostile"))]),
        ExitCode::SUCCESS
    );
    out
}

#[test]
fn a_folder_of_bundles_is_listed_with_verdicts_links_and_inert_text_and_filters() {
    let Some(browser) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let out = runs(dir.path());
    // case-2 changed after the batch indexed it: its statement no longer matches the
    // index, so it is verified again (and fails).
    let statement = out.join("case-2/statement.json");
    let text = std::fs::read_to_string(&statement).unwrap();
    std::fs::write(&statement, text.replacen("\"", "\" ", 1)).unwrap();

    let site = dir.path().join("site");
    assert_eq!(cli(&["view", s(&out), "-o", s(&site)]), ExitCode::SUCCESS);
    for id in ["case-1", "case-2", "case-3", "hostile"] {
        assert!(site.join(format!("runs/{id}.html")).is_file(), "{id}");
    }
    let page = site.join("index.html");
    let all = dom(&browser, &page, "");
    assert_eq!(shown(&all), "4 of 4 runs");
    assert_eq!(rows(&all), 4);
    assert!(
        all.contains("2 verified now, 2 from the run index"),
        "{all}"
    );
    assert!(all.contains("href=\"runs/case-1.html\""));
    assert!(all.contains("href=\"runs/hostile.html\""));
    // The hostile agent name is text; nothing of it became markup or ran.
    assert!(all.contains("&lt;img src=x onerror=document.title='PWNED'&gt;"));
    assert!(!all.contains("<img"));
    assert_eq!(count(&all, "<script"), 2);
    assert!(all.contains("<title>provrun view: runs</title>"));
    // The changed bundle fails, and the failing check is named.
    let changed = &all[all.find("runs/case-2.html").unwrap()..];
    let changed = &changed[..changed.find("</tr>").unwrap()];
    assert!(changed.contains("class=\"fails\""), "{changed}");
    assert!(changed.contains("class=\"checks\""), "{changed}");

    // Filters and search, as a link carries them.
    let tool = dom(&browser, &page, "#tool=read_file");
    assert_eq!(shown(&tool), "3 of 4 runs");
    let found = dom(&browser, &page, "#q=needle-7");
    assert_eq!(shown(&found), "1 of 4 runs");
    assert!(found.contains("runs/hostile.html") && !found.contains("runs/case-1.html"));
    let failing = dom(&browser, &page, "#verdict=fails");
    assert_eq!(shown(&failing), "1 of 4 runs");
    assert!(failing.contains("runs/case-2.html"));
    let none = dom(&browser, &page, "#q=no-such-text&status=finished");
    assert_eq!(shown(&none), "0 of 4 runs");
    assert!(none.contains("No run matches."));

    // A row's page is the run's own page.
    let run = browse(
        &browser,
        &site.join("runs/hostile.html"),
        "",
        &["--dump-dom".to_owned()],
    );
    assert!(run.contains("data-rendered=\"yes\""));
    assert!(!run.contains("<img") && !run.contains("<title>PWNED"));
}

#[test]
fn ten_thousand_runs_render_their_first_page_and_filter() {
    let Some(browser) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let out = runs(dir.path());
    let base = provrun_view::summarize(&out.join("case-1"));
    let rows: Vec<provrun_view::ListingRow> = (0..10_000)
        .map(|i| {
            let mut summary = base.clone();
            summary.agent = format!("agent-{}", i % 7);
            summary.model = format!("model-{}", i % 3);
            summary.status = ["finished", "failed", "paused"][i % 3 / 2].to_owned();
            summary.started = format!(
                "2026-01-01T00:{:02}:{:02}.{:03}Z",
                i / 600 % 60,
                i / 10 % 60,
                i % 1000
            );
            summary.tokens = i as u64;
            summary.text.push_str(&format!("\nmarker-{i:05}"));
            provrun_view::ListingRow {
                id: format!("run-{i:05}"),
                summary,
                cached: true,
            }
        })
        .collect();
    let html =
        provrun_view::render_listing("10,000 runs", "", &rows, provrun_view::LinkStyle::Files)
            .unwrap();
    let page = dir.path().join("many.html");
    std::fs::write(&page, html).unwrap();

    let first = dom(&browser, &page, "");
    assert_eq!(shown(&first), "10000 of 10000 runs");
    assert_eq!(rows_of(&first), 100);
    assert!(first.contains("page 1 of 100"));
    // agent-3 is every 7th run (1429 of them); search then narrows to one.
    let agent = dom(&browser, &page, "#agent=agent-3");
    assert_eq!(shown(&agent), "1429 of 10000 runs");
    let one = dom(&browser, &page, "#agent=agent-3&q=marker-09999");
    assert_eq!(shown(&one), "1 of 10000 runs");
    assert!(one.contains("runs/run-09999.html"));
    let figure = |d: &str, attr: &str| {
        let at = d.find(attr).map(|i| i + attr.len() + 2).unwrap();
        d[at..at + d[at..].find('"').unwrap()].to_owned()
    };
    eprintln!(
        "10,000 runs: first render at {} ms; a filter took {} ms (headless chromium)",
        figure(&first, "data-render-ms"),
        figure(&one, "data-filter-ms")
    );
}

fn rows_of(dom: &str) -> usize {
    rows(dom)
}

#[test]
fn two_runs_side_by_side_name_their_differences_and_keep_hostile_text_inert() {
    let Some(browser) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let out = runs(dir.path());
    let same = dir.path().join("same.html");
    let (one, three) = (out.join("case-1"), out.join("case-3"));
    assert_eq!(
        cli(&["view", s(&one), s(&three), "-o", s(&same)]),
        ExitCode::SUCCESS
    );
    let same = dom(&browser, &same, "");
    assert!(same.contains("The same behaviour"), "{same}");
    assert_eq!(count(&same, "class=\"differs\""), 0);

    let page = dir.path().join("differs.html");
    let hostile = out.join("hostile");
    assert_eq!(
        cli(&["view", s(&one), s(&hostile), "-o", s(&page)]),
        ExitCode::SUCCESS
    );
    let differs = dom(&browser, &page, "");
    assert!(differs.contains("class=\"differs\""), "{differs}");
    assert!(differs.contains("tool_calls") && differs.contains("step 1"));
    assert!(differs.contains("NEEDLE-7 &lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;"));
    assert!(!differs.contains("<img"));
    assert_eq!(count(&differs, "<script"), 2);
    assert!(differs.contains("<title>provrun view: two runs</title>"));
}

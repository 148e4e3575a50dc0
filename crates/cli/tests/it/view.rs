//! `provrun view` as a script sees it, without a browser (tests/tests/view_browser.rs loads
//! the pages in one): the page file and what it may contain, its policy naming its own
//! script and style, usage errors, and the loopback server answering until Ctrl-C.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::support::cli::{assert_exit, command, provrun, s};
use base64::Engine as _;
use sha2::{Digest as _, Sha256};

fn example(rel: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(rel)
        .display()
        .to_string()
}

/// A finished run of the hostile agent: its answer, a call's arguments, an output and an
/// input all carry markup and `</script>`.
fn hostile_bundle(dir: &Path) -> PathBuf {
    let hostile =
        "</script><script>document.title='PWNED'</script><img src=x onerror=alert(1)>\u{2028}&amp;";
    std::fs::create_dir_all(dir.join("input")).unwrap();
    std::fs::write(dir.join("input/notes.txt"), hostile).unwrap();
    let script = serde_json::json!([
        {"text": hostile, "tool_calls": [{"id": "w", "name": "write_file",
            "arguments": {"path": "/output/x.html", "content": hostile}}]},
        {"text": hostile}
    ]);
    std::fs::write(dir.join("script.json"), script.to_string()).unwrap();
    std::fs::write(
        dir.join("agent.toml"),
        "name = \"hostile\"\nmodel = \"script:script.json\"\ntools = [\"write_file\"]\n",
    )
    .unwrap();
    let bundle = dir.join("bundle");
    let out = provrun(&[
        "run",
        &s(&dir.join("agent.toml")),
        "--input",
        &s(&dir.join("input")),
        "--out",
        &s(&bundle),
    ]);
    assert_exit(&out, 0);
    bundle
}

/// The text between `open` and the next `</script>` or `</style>`.
fn element<'a>(page: &'a str, open: &str, close: &str) -> &'a str {
    let start = page.find(open).unwrap() + open.len();
    let end = start + page[start..].find(close).unwrap();
    &page[start..end]
}

/// `provrun view SOURCE` serving on loopback: the child, and the address (`127.0.0.1:PORT`)
/// it printed first on stdout.
fn serve(source: &str, stderr: Stdio) -> (Child, String) {
    let mut child = command(&["view", source])
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .split_whitespace()
        .find(|w| w.starts_with("http://127.0.0.1:"))
        .unwrap_or_else(|| panic!("no URL in {line:?}"))
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned();
    (child, addr)
}

#[test]
fn the_page_holds_bundle_text_only_as_escaped_json_under_a_policy_naming_its_own_script() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = hostile_bundle(dir.path());
    let page_path = dir.path().join("page.html");
    let out = provrun(&["view", &s(&bundle), "-o", &s(&page_path)]);
    assert_exit(&out, 0);
    assert!(String::from_utf8_lossy(&out.stdout).contains("page written to"));
    let page = std::fs::read_to_string(&page_path).unwrap();
    // The page's own two scripts and one style, nothing more: the data cannot close its
    // element, and no bundle text is markup.
    assert_eq!(page.matches("<script").count(), 2);
    assert_eq!(page.matches("</script>").count(), 2);
    assert_eq!(page.matches("<style>").count(), 1);
    assert!(!page.contains("<img"));
    assert!(!page.contains('\u{2028}'));
    let data = element(
        &page,
        "<script type=\"application/json\" id=\"bundle-data\">",
        "</script>",
    );
    assert!(!data.contains('<') && !data.contains('>') && !data.contains('&'));
    // The escapes mean the same text: the hostile string is in the data, whole.
    let value: serde_json::Value = serde_json::from_str(data).unwrap();
    assert!(value.to_string().contains("document.title='PWNED'"));
    assert_eq!(value["run"]["status"], "finished");
    assert_eq!(value["verify"]["verdict"], "verifies");
    assert_eq!(value["steps"].as_array().unwrap().len(), 2);
    assert!(
        value["inputs"][0]["text"]
            .as_str()
            .unwrap()
            .contains("</script>")
    );
    assert_eq!(value["outputs"][0]["matches"], true);

    // The policy allows exactly the page's inline script and style, by hash.
    let hash = |t: &str| base64::engine::general_purpose::STANDARD.encode(Sha256::digest(t));
    let script = element(&page, "<script>", "</script>");
    let style = element(&page, "<style>", "</style>");
    let csp = element(
        &page,
        "http-equiv=\"Content-Security-Policy\" content=\"",
        "\"",
    );
    let csp = csp.replace("&#x27;", "'").replace("&#x2f;", "/");
    assert!(csp.starts_with("default-src 'none';"), "{csp}");
    assert!(
        csp.contains(&format!("script-src 'sha256-{}'", hash(script))),
        "{csp}"
    );
    assert!(
        csp.contains(&format!("style-src 'sha256-{}'", hash(style))),
        "{csp}"
    );
    assert!(csp.contains("connect-src 'none'") && csp.contains("img-src 'none'"));
    // The script itself never turns text into markup.
    assert!(!script.contains("innerHTML") && !script.contains("insertAdjacentHTML"));
    assert!(!script.contains("eval(") && !script.contains("document.write"));
}

#[test]
fn usage_errors_exit_2_and_the_page_is_never_written_into_the_bundle() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("bundle");
    let out = provrun(&[
        "run",
        &example("scripted/agent.toml"),
        "--input",
        &example("scripted/input"),
        "--out",
        &s(&bundle),
    ]);
    assert_exit(&out, 0);
    let missing = provrun(&["view", &s(&dir.path().join("nope")), "-o", "x.html"]);
    assert_exit(&missing, 2);
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no bundle folder"));
    assert_exit(&provrun(&["view", &s(&bundle), "-o", &s(dir.path())]), 2);
    let inside = provrun(&["view", &s(&bundle), "-o", &s(&bundle.join("page.html"))]);
    assert_exit(&inside, 2);
    assert!(String::from_utf8_lossy(&inside.stderr).contains("inside the bundle"));
    assert!(!bundle.join("page.html").exists());
    assert_exit(&provrun(&["verify", &s(&bundle)]), 0);
    // A log that does not parse still gives a page: the verdict, no timeline.
    std::fs::write(bundle.join("events.jsonl"), "not json\n").unwrap();
    let page = dir.path().join("broken.html");
    let out = provrun(&["view", &s(&bundle), "-o", &s(&page)]);
    assert_exit(&out, 0);
    assert!(String::from_utf8_lossy(&out.stderr).contains("the log cannot be read"));
    let text = std::fs::read_to_string(&page).unwrap();
    assert!(text.contains("\"verdict\":\"fails\""));
}

fn get(addr: &str, path: &str) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}

#[test]
fn without_out_the_page_is_served_on_loopback_until_ctrl_c() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = hostile_bundle(dir.path());
    let file = dir.path().join("page.html");
    assert_exit(&provrun(&["view", &s(&bundle), "-o", &s(&file)]), 0);
    let (mut child, addr) = serve(&s(&bundle), Stdio::piped());
    let page = get(&addr, "/");
    assert!(page.starts_with("HTTP/1.1 200"), "{page}");
    let (head, body) = page.split_once("\r\n\r\n").unwrap();
    let head = head.to_ascii_lowercase();
    assert!(
        head.contains("content-security-policy: default-src 'none';"),
        "{head}"
    );
    assert!(head.contains("content-type: text/html; charset=utf-8"));
    assert!(head.contains("x-content-type-options: nosniff"));
    // The same page as the file.
    assert_eq!(body, std::fs::read_to_string(&file).unwrap());
    assert!(get(&addr, "/../events.jsonl").starts_with("HTTP/1.1 404"));
    assert!(get(&addr, "/blobs/pack").starts_with("HTTP/1.1 404"));

    let killed = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(err.contains("stopped"), "{err}");
}

/// The page's JSON data, parsed back from a page file.
fn page_data(page: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(page).unwrap();
    let data = element(
        &text,
        "<script type=\"application/json\" id=\"bundle-data\">",
        "</script>",
    );
    serde_json::from_str(data).unwrap()
}

#[test]
fn a_bundle_of_the_first_layout_gives_its_raw_bytes_and_readable_steps_too() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bundle-v1-hello");
    let page = dir.path().join("v1.html");
    assert_exit(&provrun(&["view", &s(&fixture), "-o", &s(&page)]), 0);
    let data = page_data(&page);
    assert_eq!(data["verify"]["verdict"], "verifies");
    assert_eq!(data["run"]["blob_store"], "loose");
    let steps = data["steps"].as_array().unwrap();
    assert!(!steps.is_empty());
    let model = &steps[0]["model"];
    // The request's bytes, from blobs/sha256/, are embedded whole under their digest.
    let hex = model["request"].as_str().unwrap();
    let on_disk = std::fs::read(fixture.join("blobs/sha256").join(hex)).unwrap();
    assert_eq!(
        data["blobs"][hex]["text"].as_str().unwrap().as_bytes(),
        on_disk.as_slice()
    );
    assert!(model["parse_error"].is_null(), "{model}");
}

#[test]
fn raw_bytes_of_a_large_request_keep_its_head_and_tail_and_name_the_cat_command() {
    // A 78 KiB input read back by the model makes the second request large.
    let dir = tempfile::tempdir().unwrap();
    let big: String = (0..3000)
        .map(|i| format!("line {i:05} of the report\n"))
        .collect();
    std::fs::create_dir_all(dir.path().join("input")).unwrap();
    std::fs::write(dir.path().join("input/big.txt"), &big).unwrap();
    let script = serde_json::json!([
        {"tool_calls": [{"id": "r", "name": "read_file", "arguments": {"path": "/input/big.txt"}}]},
        {"text": "read it"}
    ]);
    std::fs::write(dir.path().join("script.json"), script.to_string()).unwrap();
    std::fs::write(
        dir.path().join("agent.toml"),
        "name = \"big\"\nmodel = \"script:script.json\"\ntools = [\"read_file\"]\n",
    )
    .unwrap();
    let bundle = dir.path().join("bundle");
    assert_exit(
        &provrun(&[
            "run",
            &s(&dir.path().join("agent.toml")),
            "--input",
            &s(&dir.path().join("input")),
            "--out",
            &s(&bundle),
        ]),
        0,
    );
    let page = dir.path().join("big.html");
    assert_exit(&provrun(&["view", &s(&bundle), "-o", &s(&page)]), 0);
    let data = page_data(&page);
    let hex = data["steps"][1]["model"]["request"].as_str().unwrap();
    let blob = &data["blobs"][hex];
    let full = provrun(&["cat", &s(&bundle), hex]).stdout;
    let text = blob["text"].as_str().unwrap();
    assert!(blob["omitted"].as_u64().unwrap() > 0);
    assert_eq!(blob["size"].as_u64().unwrap(), full.len() as u64);
    assert!(text.starts_with(&String::from_utf8_lossy(&full[..1000]).into_owned()));
    assert!(text.ends_with(&String::from_utf8_lossy(&full[full.len() - 1000..]).into_owned()));
    assert!(text.contains("`provrun cat` prints them all"));
    // The input file is shown cut, with the note, and its digest matches.
    assert_eq!(data["inputs"][0]["truncated"], true);
    assert_eq!(data["inputs"][0]["matches"], true);
}

#[test]
fn a_folder_of_bundles_is_served_as_a_listing_whose_runs_open_when_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    std::fs::create_dir(&store).unwrap();
    for id in ["one", "two"] {
        let out = provrun(&[
            "run",
            &example("scripted/agent.toml"),
            "--input",
            &example("scripted/input"),
            "--out",
            &s(&store.join(id)),
        ]);
        assert_exit(&out, 0);
    }
    // A folder with no bundle is no listing.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let none = provrun(&["view", &s(&empty), "-o", &s(&dir.path().join("x"))]);
    assert_exit(&none, 2);
    assert!(
        String::from_utf8_lossy(&none.stderr).contains("holds no bundle")
            && String::from_utf8_lossy(&none.stderr).contains("is not a bundle")
    );

    let (mut child, addr) = serve(&s(&store), Stdio::null());
    let listing = get(&addr, "/");
    assert!(listing.starts_with("HTTP/1.1 200"), "{listing}");
    assert!(listing.contains("listing-data") && listing.contains("[\"one\","));
    let run = get(&addr, "/runs/two");
    assert!(run.starts_with("HTTP/1.1 200"), "{run}");
    assert!(run.contains("bundle-data") && run.contains("\"run_id\""));
    for missing in ["/runs/three", "/runs/..%2Fone", "/runs/", "/one"] {
        assert!(get(&addr, missing).starts_with("HTTP/1.1 404"), "{missing}");
    }
    let killed = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

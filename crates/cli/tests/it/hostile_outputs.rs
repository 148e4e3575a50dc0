//! Nothing an agent leaves in /output can cost the run its evidence: symlinks, FIFOs,
//! names that are not UTF-8, set-uid files, sticky folders and files over the output
//! quota are left out of the outputs (each recorded by an `output_skipped` event) or
//! cleaned, and the run still finishes with a bundle that verifies — driven through the
//! `provrun` binary as a user would.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;

use crate::support::cli::{command, events};
use serde_json::Value;

fn provrun(args: &[&str]) -> Output {
    command(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("the provrun binary runs")
}

/// Run an agent whose one command is `command`, with `limits` as its `[limits]` table.
fn run(dir: &Path, command: &str, limits: &str) -> (Output, PathBuf) {
    std::fs::write(
        dir.join("agent.toml"),
        format!(
            "name = \"hostile\"\nmodel = \"script:script.json\"\ntools = [\"run_command\"]\n\
             allow_degraded_sandbox = true\n[limits]\n{limits}\n"
        ),
    )
    .unwrap();
    let script = serde_json::json!([
        {"tool_calls": [{"id": "c1", "name": "run_command", "arguments": {"command": command}}]},
        {"text": "done"}
    ]);
    std::fs::write(dir.join("script.json"), script.to_string()).unwrap();
    let bundle = dir.join("bundle");
    let out = provrun(&[
        "run",
        &dir.join("agent.toml").display().to_string(),
        "--out",
        &bundle.display().to_string(),
    ]);
    (out, bundle)
}

fn skipped(bundle: &Path) -> Vec<Value> {
    events(bundle)
        .into_iter()
        .filter(|e| e["type"] == "output_skipped")
        .map(|e| e["payload"].clone())
        .collect()
}

fn produced(bundle: &Path) -> Vec<String> {
    events(bundle)
        .into_iter()
        .filter(|e| e["type"] == "output_produced")
        .map(|e| e["payload"]["path"].as_str().unwrap().to_owned())
        .collect()
}

/// Every entry under `dir`, as (relative path, is a regular file or folder, mode).
fn tree(dir: &Path, prefix: &str, out: &mut Vec<(String, bool, u32)>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let meta = std::fs::symlink_metadata(e.path()).unwrap();
        let rel = format!("{prefix}{}", e.file_name().to_string_lossy());
        out.push((
            rel.clone(),
            meta.is_file() || meta.is_dir(),
            meta.permissions().mode(),
        ));
        if meta.is_dir() {
            tree(&e.path(), &format!("{rel}/"), out);
        }
    }
}

fn verify_ok(bundle: &Path, host_path: &Path) {
    let out = provrun(&["verify", &bundle.display().to_string()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        !text.contains(&host_path.display().to_string()),
        "verify names a host path: {text}"
    );
}

#[test]
fn links_fifos_bad_names_and_special_bits_never_cost_the_run_its_evidence() {
    let dir = tempfile::tempdir().unwrap();
    let command = "cd /output && echo hi > ok.txt && ln -s /etc/passwd link \
        && mkdir d && ln -s .. d/up && mkfifo d/fifo \
        && printf x > \"$(printf 'bad\\377name')\" && mkdir \"$(printf 'dir\\376')\" \
        && echo y > \"$(printf 'dir\\376')/inner.txt\" \
        && echo s > suid && chmod 6755 suid && mkdir sticky && chmod 1777 sticky \
        && echo t > sticky/in.txt";
    let (out, bundle) = run(dir.path(), command, "");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    verify_ok(&bundle, dir.path());

    let mut got: Vec<(String, String, String, String)> = skipped(&bundle)
        .iter()
        .map(|p| {
            (
                p["path"].as_str().unwrap().to_owned(),
                p["path_hex"].as_str().unwrap().to_owned(),
                p["kind"].as_str().unwrap().to_owned(),
                p["reason"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    got.sort();
    let row = |path: &str, raw: &[u8], kind: &str, reason: &str| {
        (
            path.to_owned(),
            hex::encode(raw),
            kind.to_owned(),
            reason.to_owned(),
        )
    };
    assert_eq!(
        got,
        vec![
            row("bad\\xffname", b"bad\xffname", "file", "name_not_utf8"),
            row("d/fifo", b"d/fifo", "fifo", "not_regular"),
            row("d/up", b"d/up", "symlink", "not_regular"),
            row("dir\\xfe", b"dir\xfe", "directory", "name_not_utf8"),
            row("link", b"link", "symlink", "not_regular"),
        ]
    );
    assert_eq!(
        produced(&bundle),
        ["ok.txt", "response.txt", "sticky/in.txt", "suid"]
    );
    // The bundle holds regular files and folders only, with no set-uid, set-gid or
    // sticky bit anywhere.
    let mut entries = Vec::new();
    tree(&bundle, "", &mut entries);
    for (rel, plain, mode) in &entries {
        assert!(plain, "{rel} is neither a file nor a folder");
        assert_eq!(mode & 0o7000, 0, "{rel} keeps mode {mode:o}");
    }
    // `show` prints what was left out, escaped.
    let show = provrun(&["show", &bundle.display().to_string()]);
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(
        text.contains("left out link (symlink: not_regular)"),
        "{text}"
    );
}

#[test]
fn files_over_the_output_quota_are_left_out_by_apparent_size() {
    let dir = tempfile::tempdir().unwrap();
    // Two sparse files that each fit in the 1 MiB quota, but not together: the first (in
    // path order) is an output, the second is left out without being read.
    let (out, bundle) = run(
        dir.path(),
        "cd /output && truncate -s 900K a.bin && truncate -s 900K b.bin && echo small > c.txt",
        "max_total_bytes = 1048576",
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    verify_ok(&bundle, dir.path());
    let left = skipped(&bundle);
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(left[0]["path"], "b.bin");
    assert_eq!(left[0]["kind"], "file");
    assert_eq!(left[0]["reason"], "over_quota");
    assert_eq!(left[0]["size"], 900 * 1024);
    // (The sandbox's quota, which counts b.bin, left no room for response.txt.)
    assert_eq!(produced(&bundle), ["a.bin", "c.txt"]);
    assert!(!bundle.join("output/b.bin").exists());
}

#[test]
fn verify_names_no_host_path_for_a_bad_entry() {
    let dir = tempfile::tempdir().unwrap();
    let (out, bundle) = run(dir.path(), "echo hi > /output/ok.txt", "");
    assert_eq!(out.status.code(), Some(0));
    // Tamper: a file whose name is not UTF-8, placed after the run.
    use std::os::unix::ffi::OsStrExt;
    let name = std::ffi::OsStr::from_bytes(b"evil\xff");
    std::fs::write(bundle.join("output").join(name), b"x").unwrap();
    let out = provrun(&["verify", &bundle.display().to_string()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("output/evil\\xff: name is not UTF-8"),
        "{text}"
    );
    assert!(
        !text.contains(&dir.path().display().to_string()),
        "verify names a host path: {text}"
    );
}

/// Run a script of tool calls (one turn) with the file tools and `run_command`.
fn run_calls(dir: &Path, calls: Value) -> (Output, PathBuf) {
    std::fs::write(
        dir.join("agent.toml"),
        "name = \"paths\"\nmodel = \"script:script.json\"\n\
         tools = [\"run_command\", \"write_file\", \"read_file\"]\nallow_degraded_sandbox = true\n",
    )
    .unwrap();
    let script = serde_json::json!([{"tool_calls": calls}, {"text": "done"}]);
    std::fs::write(dir.join("script.json"), script.to_string()).unwrap();
    let bundle = dir.join("bundle");
    let out = provrun(&[
        "run",
        &dir.join("agent.toml").display().to_string(),
        "--out",
        &bundle.display().to_string(),
    ]);
    (out, bundle)
}

/// (call id, ok, result text) of every completed tool call.
fn results(bundle: &Path) -> Vec<(String, bool, String)> {
    events(bundle)
        .into_iter()
        .filter(|e| e["type"] == "tool_called" && e["payload"]["deferred"] != true)
        .map(|e| {
            let p = &e["payload"];
            (
                p["call_id"].as_str().unwrap().to_owned(),
                p["ok"] == true,
                p["result"].to_string(),
            )
        })
        .collect()
}

#[test]
fn dotted_and_doubled_slashes_are_one_path_and_a_trailing_slash_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let (out, bundle) = run_calls(
        dir.path(),
        serde_json::json!([
            {"id": "a", "name": "write_file", "arguments": {"path": "//output//a.txt", "content": "a"}},
            {"id": "b", "name": "write_file", "arguments": {"path": "/./output/./b.txt", "content": "b"}},
            {"id": "c", "name": "write_file", "arguments": {"path": "/output/x.txt/", "content": "x"}},
            {"id": "d", "name": "read_file", "arguments": {"path": "/./output//a.txt"}}
        ]),
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    verify_ok(&bundle, dir.path());
    let r = results(&bundle);
    assert!(r[0].1 && r[0].2.contains("/output/a.txt"), "{r:?}");
    assert!(r[1].1 && r[1].2.contains("/output/b.txt"), "{r:?}");
    assert!(!r[2].1 && r[2].2.contains("ends with `/`"), "{r:?}");
    assert!(r[3].1 && r[3].2.contains("\"a\""), "{r:?}");
    assert_eq!(produced(&bundle), ["a.txt", "b.txt", "response.txt"]);
}

#[test]
fn a_nul_byte_in_a_command_is_refused_before_it_runs_naming_no_host_path() {
    let dir = tempfile::tempdir().unwrap();
    let (out, bundle) = run_calls(
        dir.path(),
        serde_json::json!([
            {"id": "n", "name": "run_command", "arguments": {"command": "echo a\u{0}b > /output/nul.txt"}}
        ]),
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    verify_ok(&bundle, dir.path());
    let r = results(&bundle);
    assert!(!r[0].1, "{r:?}");
    assert!(r[0].2.contains("NUL byte"), "{r:?}");
    for host in ["/usr/bin", "bwrap", &dir.path().display().to_string()] {
        assert!(!r[0].2.contains(host), "names {host}: {r:?}");
    }
    assert!(!bundle.join("output/nul.txt").exists());
}

#[test]
fn read_file_of_a_binary_file_is_bounded_by_what_the_model_receives() {
    let dir = tempfile::tempdir().unwrap();
    let (out, bundle) = run_calls(
        dir.path(),
        serde_json::json!([
            {"id": "w", "name": "run_command", "arguments": {"command": "head -c 1048576 /dev/zero > /output/zeros.bin"}},
            {"id": "r", "name": "read_file", "arguments": {"path": "/output/zeros.bin"}},
        ]),
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    verify_ok(&bundle, dir.path());
    let r = results(&bundle);
    // 1 MiB of NULs once cost 6 MB of escapes; now it is described in a few hundred bytes.
    assert!(r[1].1 && r[1].2.len() < 500, "{}", r[1].2.len());
    let zeros = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(vec![0u8; 1 << 20]));
    assert!(
        r[1].2.contains("binary") && r[1].2.contains(&zeros),
        "{}",
        r[1].2
    );
}

#[test]
fn inputs_over_the_input_limit_exit_2_with_nothing_written_and_sparse_inputs_stay_sparse() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let inputs = dir.path().join("in");
    std::fs::create_dir(&inputs).unwrap();
    std::fs::write(inputs.join("a.txt"), b"hello").unwrap();
    let sparse = std::fs::File::create(inputs.join("sparse.bin")).unwrap();
    sparse.set_len(16 << 20).unwrap();
    drop(sparse);
    std::fs::write(
        dir.path().join("agent.toml"),
        "name = \"in\"\nmodel = \"test\"\ntools = [\"list_dir\"]\n",
    )
    .unwrap();
    let agent = dir.path().join("agent.toml").display().to_string();
    let bundle = dir.path().join("bundle");
    let run = |extra: &[&str]| {
        let mut args = vec![
            "run",
            agent.as_str(),
            "--input",
            inputs.to_str().unwrap(),
            "--out",
            bundle.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        provrun(&args)
    };
    // Over the limit (the sparse file counts by its length): refused at the start.
    let out = run(&["--max-input-bytes", "1048576"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("over the input limit of 1048576 bytes"),
        "{err}"
    );
    assert!(!bundle.exists(), "a refused run wrote its bundle");
    // The spec's key does the same.
    std::fs::write(
        dir.path().join("agent.toml"),
        "name = \"in\"\nmodel = \"test\"\ntools = [\"list_dir\"]\n[limits]\nmax_input_bytes = 1000\n",
    )
    .unwrap();
    assert_eq!(run(&[]).status.code(), Some(2));
    assert!(!bundle.exists());
    // Within the limit: staged, and the sparse file takes (almost) no blocks where the
    // file system keeps holes.
    let out = run(&["--max-input-bytes", "20000000"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    verify_ok(&bundle, dir.path());
    let src_blocks = std::fs::metadata(inputs.join("sparse.bin"))
        .unwrap()
        .blocks();
    let staged = std::fs::metadata(bundle.join("input/sparse.bin")).unwrap();
    assert_eq!(staged.len(), 16 << 20);
    assert!(
        staged.blocks() <= src_blocks + 8,
        "staged {} blocks, the source {src_blocks}",
        staged.blocks()
    );
}

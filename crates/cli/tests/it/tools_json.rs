//! `provrun tools` as scripts see it: the built binary, its stdout, stderr and exit code.

use std::path::Path;
use std::process::Output;

use serde_json::Value;

use crate::support::cli::provrun;

/// The eight built-in tools of docs/contract.md §5, sorted by name.
const BUILTINS: [&str; 8] = [
    "copy_from_host",
    "copy_to_host",
    "list_dir",
    "list_host_files",
    "read_file",
    "run_command",
    "str_replace",
    "write_file",
];

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).expect("stdout is UTF-8")
}

fn stderr(out: &Output) -> String {
    String::from_utf8(out.stderr.clone()).expect("stderr is UTF-8")
}

/// Write a tools folder with these files.
fn folder(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    dir
}

fn tools_json(args: &[&str]) -> Vec<Value> {
    let out = provrun(args);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    assert!(out.stderr.is_empty(), "stderr: {}", stderr(&out));
    let listing: Value = serde_json::from_str(&stdout(&out)).expect("stdout is one JSON value");
    listing.as_array().expect("a JSON list").clone()
}

fn dir_arg(dir: &Path) -> &str {
    dir.to_str().expect("temp paths are UTF-8")
}

#[test]
fn tools_json_lists_exactly_the_builtins_with_object_schemas() {
    let listing = tools_json(&["tools", "--json"]);
    let names: Vec<&str> = listing
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, BUILTINS);
    for tool in &listing {
        let name = tool["name"].as_str().unwrap();
        let entry = tool.as_object().unwrap();
        let mut keys: Vec<&str> = entry.keys().map(String::as_str).collect();
        keys.sort();
        assert_eq!(keys, ["description", "mode", "name", "schema"], "{name}");
        assert!(
            !tool["description"].as_str().unwrap().is_empty(),
            "{name} has no description"
        );
        assert_eq!(tool["mode"], "in_process", "{name}");
        let schema = &tool["schema"];
        assert_eq!(schema["type"], "object", "{name}");
        assert!(schema["properties"].is_object(), "{name}");
        assert!(schema["x-destructive"].is_boolean(), "{name}");
        assert!(schema["x-category"].is_string(), "{name}");
        // The run context a tool takes is never an argument the model can send.
        let properties = schema["properties"].as_object().unwrap();
        for hidden in ["ctx", "context", "__ctx"] {
            assert!(!properties.contains_key(hidden), "{name} shows `{hidden}`");
        }
        assert!(
            !schema.to_string().contains("RunContext"),
            "{name}: {schema}"
        );
    }
    let by_name = |n: &str| listing.iter().find(|t| t["name"] == n).unwrap();
    assert_eq!(by_name("write_file")["schema"]["x-destructive"], true);
    assert_eq!(by_name("read_file")["schema"]["x-destructive"], false);
    assert_eq!(
        by_name("read_file")["schema"]["required"],
        serde_json::json!(["path"])
    );
}

#[test]
fn tools_without_json_prints_one_line_per_tool() {
    let out = provrun(&["tools"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), BUILTINS.len(), "{text}");
    for (line, name) in lines.iter().zip(BUILTINS) {
        assert!(line.starts_with(name), "{line}");
    }
    let write = lines.iter().find(|l| l.starts_with("write_file")).unwrap();
    assert!(write.ends_with("(destructive)"), "{write}");
    let read = lines.iter().find(|l| l.starts_with("read_file")).unwrap();
    assert!(!read.contains("(destructive)"), "{read}");
}

#[test]
fn a_tools_dir_adds_its_manifests_tools() {
    let dir = folder(&[(
        "extra.toml",
        r#"
        [[tools]]
        name = "ask_human"
        description = "Ask the person at the keyboard."
        mode = "client_round_trip"
        [tools.parameters]
        type = "object"
        properties.question = { type = "string" }
        required = ["question"]
        "#,
    )]);
    let listing = tools_json(&["tools", "--json", "--tools-dir", dir_arg(dir.path())]);
    assert_eq!(listing.len(), BUILTINS.len() + 1);
    let added = listing.iter().find(|t| t["name"] == "ask_human").unwrap();
    assert_eq!(added["mode"], "client_round_trip");
    assert_eq!(added["description"], "Ask the person at the keyboard.");
    assert_eq!(added["schema"]["required"][0], "question");
    // Still sorted by name.
    let names: Vec<&str> = listing
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(names, sorted);
}

/// Run `provrun tools --tools-dir DIR`, expect exit 2, nothing on stdout, and one line on
/// stderr; return that line.
fn usage_error(dir: &Path) -> String {
    let out = provrun(&["tools", "--json", "--tools-dir", dir_arg(dir)]);
    assert_eq!(out.status.code(), Some(2), "stdout: {}", stdout(&out));
    assert!(out.stdout.is_empty(), "stdout: {}", stdout(&out));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "not one line: {err}");
    err.trim_end().to_string()
}

#[test]
fn a_bad_manifest_exits_2_with_one_line_naming_the_file() {
    for (text, what) in [
        ("[[tools]\nname = \"x\"\n", "line 1"),
        (
            "[[tools]]\nname = \"x\"\ndescription = \"d\"\nmode = \"elsewhere\"\n",
            "in_process, client_round_trip, remote_mcp",
        ),
        (
            "[[tools]]\nname = \"x\"\ndescription = \"d\"\ncomand = [\"ls\"]\n",
            "unknown field `comand`",
        ),
        ("# no tools\n", "declares no tools"),
    ] {
        let dir = folder(&[
            (
                "good.toml",
                "[[tools]]\nname = \"fine\"\ndescription = \"d\"\nmode = \"client_round_trip\"\n",
            ),
            ("broken.toml", text),
        ]);
        let line = usage_error(dir.path());
        assert!(line.starts_with("provrun: "), "{line}");
        assert!(line.contains("broken.toml"), "{line}");
        assert!(line.contains(what), "want `{what}` in: {line}");
    }
}

#[test]
fn a_missing_tools_dir_exits_2_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-tools-here");
    let line = usage_error(&missing);
    assert!(line.contains("no-tools-here"), "{line}");
}

#[test]
fn usage_errors_exit_2_and_help_exits_0() {
    for args in [
        &["frobnicate"][..],
        &[],
        &["tools", "--jsn"],
        &["tools", "--tools-dir"],
    ] {
        let out = provrun(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}: {}", stdout(&out));
        assert!(!out.stderr.is_empty(), "{args:?}");
    }
    let err = stderr(&provrun(&["frobnicate"]));
    assert!(err.contains("frobnicate"), "{err}");
    for args in [&["--help"][..], &["tools", "--help"], &["--version"]] {
        let out = provrun(args);
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        assert!(!out.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn a_tools_dirs_mcp_servers_are_listed_after_the_tools() {
    let dir = folder(&[(
        "servers.toml",
        r#"
        [[mcp]]
        name = "notes"
        command = "bin/notes-server"
        args = ["--db", "my notes.db"]
        env = { NOTES_SECRET = "s3cret" }

        [[mcp]]
        name = "search"
        url = "https://example.invalid/mcp"
        bearer_token_env = "SEARCH_TOKEN"
        prefix = ""
        tools = ["find"]
        destructive = true
        "#,
    )]);
    let listing = tools_json(&["tools", "--json", "--tools-dir", dir_arg(dir.path())]);
    assert_eq!(listing.len(), BUILTINS.len() + 2);
    // The tools first, as before, with their four keys; then the servers.
    let names: Vec<&str> = listing
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names[..BUILTINS.len()], BUILTINS);
    assert_eq!(names[BUILTINS.len()..], ["notes", "search"]);
    let notes = &listing[BUILTINS.len()];
    let keys: Vec<&str> = notes
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        ["description", "mcp_server", "mode", "name", "schema"]
    );
    assert_eq!(notes["mode"], "remote_mcp");
    assert!(notes["schema"].is_null());
    let server = &notes["mcp_server"];
    assert_eq!(server["transport"], "stdio");
    assert!(
        server["command"]
            .as_str()
            .unwrap()
            .ends_with("bin/notes-server"),
        "{server}"
    );
    assert_eq!(server["args"], serde_json::json!(["--db", "my notes.db"]));
    assert_eq!(server["prefix"], "notes");
    assert_eq!(server["destructive"], false);
    // Environment names only: a value may be a secret.
    assert_eq!(server["env"], serde_json::json!(["NOTES_SECRET"]));
    assert!(
        !stdout(&provrun(&[
            "tools",
            "--json",
            "--tools-dir",
            dir_arg(dir.path())
        ]))
        .contains("s3cret")
    );
    let search = &listing[BUILTINS.len() + 1]["mcp_server"];
    assert_eq!(search["transport"], "http");
    assert_eq!(search["url"], "https://example.invalid/mcp");
    assert_eq!(search["bearer_token_env"], "SEARCH_TOKEN");
    assert_eq!(search["prefix"], "");
    assert_eq!(search["tools"], serde_json::json!(["find"]));
    assert_eq!(search["destructive"], true);

    // The text listing: one line per server too.
    let out = provrun(&["tools", "--tools-dir", dir_arg(dir.path())]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), BUILTINS.len() + 2, "{text}");
    assert!(lines[BUILTINS.len()].starts_with("notes "), "{text}");
    assert!(
        lines[BUILTINS.len()].contains("MCP server (stdio: "),
        "{text}"
    );
    assert!(lines[BUILTINS.len()].contains("'my notes.db'"), "{text}");
    assert!(lines[BUILTINS.len()].contains("notes_TOOL"), "{text}");
    assert!(!text.contains("s3cret"));
    assert!(lines[BUILTINS.len() + 1].starts_with("search "), "{text}");
    assert!(
        lines[BUILTINS.len() + 1].contains("http: https://example.invalid/mcp")
            && lines[BUILTINS.len() + 1].ends_with("(destructive)"),
        "{text}"
    );
}

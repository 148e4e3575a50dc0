//! The seed behaviours as a script sees them through the `provrun` binary: approval by
//! category and tool name, the tools' confirmation and summary texts in the pause message
//! and `provrun show`, the sandbox tool set.

use crate::support::cli::{command, s};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn provrun(args: &[&str]) -> Output {
    command(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("the provrun binary runs")
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).expect("stdout is UTF-8")
}

fn stderr(out: &Output) -> String {
    String::from_utf8(out.stderr.clone()).expect("stderr is UTF-8")
}

#[track_caller]
fn assert_exit(out: &Output, code: i32) {
    assert_eq!(
        out.status.code(),
        Some(code),
        "stdout: {}\nstderr: {}",
        stdout(out),
        stderr(out)
    );
}

/// A folder with `agent.toml` (the given text), `script.json` and an input `a.txt`.
fn setup(toml: &str, script: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("agent.toml"), toml).unwrap();
    std::fs::write(dir.path().join("script.json"), script).unwrap();
    std::fs::write(dir.path().join("a.txt"), "alpha\n").unwrap();
    let bundle = dir.path().join("bundle");
    (dir, bundle)
}

fn run(dir: &Path, bundle: &Path) -> Output {
    provrun(&[
        "run",
        &s(&dir.join("agent.toml")),
        "--input",
        &s(&dir.join("a.txt")),
        "--out",
        &s(bundle),
    ])
}

const READ_AND_WRITE: &str = r#"[
  {"tool_calls": [
    {"id": "r1", "name": "read_file", "arguments": {"path": "/input/a.txt"}},
    {"id": "w1", "name": "write_file", "arguments": {"path": "/output/b.txt", "content": "b"}}
  ]},
  {"text": "done"}
]"#;

#[test]
fn a_category_policy_pauses_on_writes_and_asks_the_tools_question() {
    let (dir, bundle) = setup(
        "name = \"cat\"\nmodel = \"script:script.json\"\n\
         tools = [\"read_file\", \"write_file\"]\napprove = [\"write\", \"execute\"]\n",
        READ_AND_WRITE,
    );
    let out = run(dir.path(), &bundle);
    assert_exit(&out, 4);
    let err = stderr(&out);
    // Only the write waits, and the message asks the tool's question about this file.
    assert!(err.contains("1 call waits"), "{err}");
    assert!(
        err.contains("(model id \"w1\")  write_file")
            && err.contains("(Write /output/b.txt, replacing any existing file?)"),
        "{err}"
    );
    assert!(!err.contains("(model id \"r1\")  read_file"), "{err}");
    // `show` gives each call's label and the waiting call's question.
    let shown = stdout(&provrun(&["show", &s(&bundle)]));
    assert!(shown.contains("Read /input/a.txt"), "{shown}");
    assert!(
        shown.contains("Write /output/b.txt  (Write /output/b.txt, replacing any existing file?)"),
        "{shown}"
    );
    let out = provrun(&["resume", &s(&bundle), "--approve", "w1"]);
    assert_exit(&out, 0);
    assert_eq!(
        std::fs::read_to_string(bundle.join("output/b.txt")).unwrap(),
        "b"
    );
    assert_exit(&provrun(&["verify", &s(&bundle)]), 0);
    let replayed = dir.path().join("replayed");
    assert_exit(
        &provrun(&["replay", &s(&bundle), "--out", &s(&replayed)]),
        0,
    );

    // A tool name in the list: the read waits too, and a name that is neither is refused.
    let (dir, bundle) = setup(
        "name = \"cat\"\nmodel = \"script:script.json\"\n\
         tools = [\"read_file\", \"write_file\"]\napprove = [\"read_file\"]\n",
        READ_AND_WRITE,
    );
    let out = run(dir.path(), &bundle);
    assert_exit(&out, 4);
    assert!(
        stderr(&out).contains("(model id \"r1\")  read_file"),
        "{}",
        stderr(&out)
    );
    let (dir, bundle) = setup(
        "name = \"cat\"\nmodel = \"script:script.json\"\n\
         tools = [\"read_file\"]\napprove = [\"delete_everything\"]\n",
        READ_AND_WRITE,
    );
    let out = run(dir.path(), &bundle);
    assert_exit(&out, 2);
    assert!(
        stderr(&out).contains("`delete_everything`"),
        "{}",
        stderr(&out)
    );
    assert!(!bundle.exists());
}

#[test]
fn hostile_arguments_in_a_question_are_shown_inert() {
    let script = r#"[
      {"tool_calls": [
        {"id": "w1", "name": "write_file",
         "arguments": {"path": "/output/x\u001b[2J\nInjected line\u202e.txt", "content": "b"}}
      ]},
      {"text": "done"}
    ]"#;
    let (dir, bundle) = setup(
        "name = \"h\"\nmodel = \"script:script.json\"\ntools = [\"write_file\"]\napprove = \"destructive\"\n",
        script,
    );
    let out = run(dir.path(), &bundle);
    assert_exit(&out, 4);
    let err = stderr(&out);
    assert!(
        !err.contains('\u{1b}') && !err.contains('\u{202e}'),
        "{err:?}"
    );
    assert!(!err.lines().any(|l| l.starts_with("Injected")), "{err}");
    assert!(err.contains("(Write /output/x"), "{err}");
    let shown = stdout(&provrun(&["show", &s(&bundle)]));
    assert!(
        !shown.contains('\u{1b}') && !shown.contains('\u{202e}'),
        "{shown:?}"
    );
    assert!(!shown.lines().any(|l| l.starts_with("Injected")), "{shown}");
}

/// The names of the tools a bundle's run was given (`run_started.tools`).
fn offered(bundle: &Path) -> Vec<String> {
    let log = std::fs::read_to_string(bundle.join("events.jsonl")).unwrap();
    let first: serde_json::Value = serde_json::from_str(log.lines().next().unwrap()).unwrap();
    first["payload"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn sandbox_names_the_file_tools_and_run_command_and_no_host_tool() {
    let script = r#"[
      {"tool_calls": [
        {"id": "w1", "name": "write_file", "arguments": {"path": "/output/b.txt", "content": "b"}},
        {"id": "h1", "name": "copy_to_host", "arguments": {"path": "/output/b.txt", "host_path": "b.txt"}}
      ]},
      {"text": "done"}
    ]"#;
    let sandbox_set = [
        "list_dir",
        "read_file",
        "run_command",
        "str_replace",
        "write_file",
    ];
    for spec in [
        "tools = [\"sandbox\"]",
        "sandbox = true",
        "sandbox = true\ntools = [\"sandbox\", \"read_file\"]",
    ] {
        let (dir, bundle) = setup(
            &format!("name = \"sb\"\nmodel = \"script:script.json\"\n{spec}\n"),
            script,
        );
        let out = run(dir.path(), &bundle);
        assert_exit(&out, 0);
        let mut names = offered(&bundle);
        names.sort();
        assert_eq!(names, sandbox_set, "{spec}");
        assert_eq!(
            std::fs::read_to_string(bundle.join("output/b.txt")).unwrap(),
            "b"
        );
        // A host tool is not in the set: the model is told it has no such tool.
        let shown = stdout(&provrun(&["show", &s(&bundle)]));
        assert!(shown.contains("unknown tool `copy_to_host`"), "{shown}");
    }
    // A host tool named beside the set is given too.
    let (dir, bundle) = setup(
        "name = \"sb\"\nmodel = \"script:script.json\"\ntools = [\"sandbox\", \"copy_to_host\"]\n",
        script,
    );
    assert_exit(&run(dir.path(), &bundle), 0);
    assert_eq!(offered(&bundle).len(), 6);
}

/// A one-request OpenAI-compatible server on loopback: answers `YES` and hands back the
/// request's head (its request line and headers) through the join handle.
fn one_answer_server() -> (String, std::thread::JoinHandle<String>) {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    let handle = std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut head = String::new();
        let mut length = 0usize;
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                length = v.trim().parse().unwrap();
            }
            if line == "\r\n" || line.is_empty() {
                break;
            }
            head.push_str(&line);
        }
        let mut body = vec![0u8; length];
        reader.read_exact(&mut body).unwrap();
        let answer = r#"{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"YES"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}"#;
        let mut stream = stream;
        write!(
            stream,
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
            answer.len()
        )
        .unwrap();
        head
    });
    (base, handle)
}

/// Every byte under `dir`, for looking for a secret.
fn all_bytes(dir: &Path) -> Vec<u8> {
    let mut all = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            all.extend(all_bytes(&path));
        } else {
            all.extend(std::fs::read(&path).unwrap());
        }
    }
    all
}

#[test]
fn the_spec_names_the_key_variable_and_the_base_url_and_the_key_stays_out() {
    let (base, server) = one_answer_server();
    let (dir, bundle) = setup(
        &format!(
            "name = \"m\"\nmodel = \"openai:m\"\nbase_url = \"{base}\"\napi_key_env = \"SEEDS_TEST_KEY\"\n"
        ),
        "[]",
    );
    let key = "sk-seeds-not-a-real-key-4711";
    let out = Command::new(env!("CARGO_BIN_EXE_provrun"))
        .args([
            "run",
            &s(&dir.path().join("agent.toml")),
            "--out",
            &s(&bundle),
        ])
        .env_remove("OPENAI_API_KEY")
        .env("OPENAI_BASE_URL", "http://127.0.0.1:9/never-used")
        .env("SEEDS_TEST_KEY", key)
        .output()
        .unwrap();
    assert_exit(&out, 0);
    assert_eq!(stdout(&out), "YES\n");
    let head = server.join().unwrap();
    // The spec's base URL won over OPENAI_BASE_URL, and the named variable's key was sent.
    assert!(head.starts_with("POST /v1/chat/completions "), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains(&format!("authorization: bearer {key}")),
        "{head}"
    );
    // The key is nowhere in the bundle.
    let all = all_bytes(&bundle);
    assert!(!all.windows(key.len()).any(|w| w == key.as_bytes()));
    assert_exit(&provrun(&["verify", &s(&bundle)]), 0);

    // A variable that is not set, a key put where the name goes, a URL with credentials:
    // each refused before anything is written.
    for (extra, needle) in [
        (
            "api_key_env = \"SEEDS_UNSET_VARIABLE\"",
            "SEEDS_UNSET_VARIABLE, which is not set",
        ),
        (
            "api_key_env = \"sk-abc-123\"",
            "the key itself never goes in the spec",
        ),
        ("base_url = \"https://me:pw@example.com/v1\"", "credentials"),
        (
            "base_url = \"ftp://example.com\"",
            "not an http:// or https:// URL",
        ),
    ] {
        let (dir, bundle) = setup(
            &format!("name = \"m\"\nmodel = \"openai:m\"\n{extra}\n"),
            "[]",
        );
        let out = Command::new(env!("CARGO_BIN_EXE_provrun"))
            .args([
                "run",
                &s(&dir.path().join("agent.toml")),
                "--out",
                &s(&bundle),
            ])
            .env_remove("SEEDS_UNSET_VARIABLE")
            .env("OPENAI_API_KEY", "unused")
            .output()
            .unwrap();
        assert_exit(&out, 2);
        assert!(stderr(&out).contains(needle), "{extra}: {}", stderr(&out));
        assert!(!bundle.exists());
    }
}

fn skill(folder: &Path, name: &str, description: &str) {
    std::fs::create_dir_all(folder.join(name)).unwrap();
    std::fs::write(
        folder.join(name).join("SKILL.md"),
        format!("---\nname: {name}\ndescription: {description}\n---\nDo {name} things.\n"),
    )
    .unwrap();
}

#[test]
fn skills_come_from_the_spec_then_the_project_then_the_users_config() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    skill(&root.join("own"), "own", "from the spec's folder");
    skill(&root.join(".provrun/skills"), "local", "from the project");
    skill(&root.join(".provrun/skills"), "shadow", "the project's");
    skill(
        &root.join("xdg/provrun/skills"),
        "global",
        "from the user's config",
    );
    skill(&root.join("xdg/provrun/skills"), "shadow", "the user's");
    std::fs::write(
        root.join("agent.toml"),
        "name = \"sk\"\nmodel = \"script:script.json\"\nskills = [\"own\"]\n",
    )
    .unwrap();
    std::fs::write(
        root.join("script.json"),
        r#"[{"tool_calls": [{"id": "u1", "name": "use_skill", "arguments": {"name": "global"}}]},
            {"text": "done"}]"#,
    )
    .unwrap();
    let provrun_in = |cwd: &Path, xdg: Option<&Path>, args: &[&str]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_provrun"));
        cmd.args(args).current_dir(cwd).env("NO_COLOR", "1");
        match xdg {
            Some(x) => cmd.env("XDG_CONFIG_HOME", x),
            None => cmd.env("XDG_CONFIG_HOME", cwd.join("no-config")),
        };
        cmd.output().unwrap()
    };
    let xdg = root.join("xdg");
    let out = provrun_in(root, Some(&xdg), &["skills", "agent.toml", "--json"]);
    assert_exit(&out, 0);
    let listed: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let pairs: Vec<(String, String)> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_string(),
                s["description"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let expected = [
        ("global", "from the user's config"),
        ("local", "from the project"),
        ("own", "from the spec's folder"),
        ("shadow", "the project's"),
    ]
    .map(|(a, b)| (a.to_string(), b.to_string()));
    assert_eq!(pairs, expected);
    let plain = stdout(&provrun_in(root, Some(&xdg), &["skills"]));
    assert!(
        plain.contains("local") && plain.contains("global") && !plain.contains("own "),
        "{plain}"
    );

    // The defaults turned off: the spec's own skill alone.
    std::fs::write(
        root.join("off.toml"),
        "name = \"sk\"\nmodel = \"test\"\nskills = [\"own\"]\ndefault_skills = false\n",
    )
    .unwrap();
    let plain = stdout(&provrun_in(root, Some(&xdg), &["skills", "off.toml"]));
    assert_eq!(plain.lines().count(), 1, "{plain}");
    assert!(plain.starts_with("own "), "{plain}");

    // A run loads a skill of the user's config; its replay from another folder, where no
    // default folder exists, searches the folders the run recorded and matches.
    let out = provrun_in(root, Some(&xdg), &["run", "agent.toml", "--out", "bundle"]);
    assert_exit(&out, 0);
    let log = std::fs::read_to_string(root.join("bundle/events.jsonl")).unwrap();
    assert!(log.contains("Do global things."), "{log}");
    let elsewhere = tempfile::tempdir().unwrap();
    let out = provrun_in(
        elsewhere.path(),
        None,
        &["replay", &s(&root.join("bundle")), "--out", "again"],
    );
    assert_exit(&out, 0);
}

//! The process trail through the `provrun` binary, with provrun as root and as an
//! ordinary user (uid 1000, through `setpriv`, as `locked_folders.rs` does): a
//! `run_command`'s `sh -c` children recorded against its call; a hostile program under
//! `provrun wrap` that starts `/usr/bin/true` by every route there is, each start recorded
//! with the SHA-256 of the bytes that ran; and a forged session log whose claimed command
//! never ran, beside a process no log mentions — both listed by `verify` (a warning, exit
//! 0), `show` and `show --json`.

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::{Command, Output};

use serde_json::{Value, json};
use sha2::Digest as _;

use crate::support::cli::{events, s};
use crate::support::wrap::wrap_ready;

/// The ordinary user the tests also run provrun as.
const USER: u32 = 1000;

/// The hostile program (shared with the sandbox crate's own test of the tracer).
const HOSTILE: &str = include_str!("../../../sandbox/tests/it/hostile_execs.py");

/// The routes it takes; each `true` gets its route as its argument.
const ROUTES: &[&str] = &[
    "fork-exec",
    "posix-spawn",
    "vfork",
    "thread-exec",
    "execveat",
    "memfd-fexecve",
    "memfd-proc",
    "orphan",
];

fn am_root() -> bool {
    rustix::process::getuid().is_root()
}

/// `provrun ARGS` as root (`as_user` false; only when this test runs as root) or as
/// [`USER`] (dropping to it when root), with TMPDIR and HOME in `dir`, which that user
/// then owns.
fn provrun_in(dir: &Path, as_user: bool, args: &[&str]) -> Output {
    provrun_with(dir, as_user, args, &[])
}

/// [`provrun_in`] with the variables `env` set too.
fn provrun_with(dir: &Path, as_user: bool, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = if as_user && am_root() {
        // A copy of the binary in `dir`: the checkout may sit where that user cannot go.
        let binary = dir.join("provrun");
        if !binary.exists() {
            std::fs::copy(env!("CARGO_BIN_EXE_provrun"), &binary).unwrap();
            std::fs::set_permissions(&binary, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let owner = format!("{USER}:{USER}");
        let chowned = Command::new("chown")
            .args(["-R", &owner, &s(dir)])
            .status()
            .unwrap();
        assert!(chowned.success());
        let mut c = Command::new("setpriv");
        c.args([
            &format!("--reuid={USER}"),
            &format!("--regid={USER}"),
            "--clear-groups",
        ]);
        c.arg(&binary);
        c
    } else {
        Command::new(env!("CARGO_BIN_EXE_provrun"))
    };
    cmd.args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("TMPDIR", dir)
        .env("HOME", dir)
        .env("NO_COLOR", "1")
        .env("LANG", "C.UTF-8")
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
}

/// The users to run as: root (when this runs as root) and the ordinary user.
fn users() -> Vec<bool> {
    if am_root() {
        vec![false, true]
    } else {
        vec![true]
    }
}

fn who(as_user: bool) -> &'static str {
    if as_user && am_root() {
        "as uid 1000"
    } else if am_root() {
        "as root"
    } else {
        "as this user"
    }
}

/// A folder the ordinary user may enter (a test's temporary folder is 0700).
fn open_tempdir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

fn show_json(dir: &Path, as_user: bool, bundle: &Path) -> Value {
    let out = provrun_in(dir, as_user, &["show", "--json", &s(bundle)]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn sha256_of(path: &str) -> String {
    hex::encode(sha2::Sha256::digest(std::fs::read(path).unwrap()))
}

fn ok(out: &Output, what: &str) {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{what}\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_run_commands_sh_children_are_recorded_against_its_call() {
    if !wrap_ready("a_run_commands_sh_children_are_recorded_against_its_call") {
        return;
    }
    for as_user in users() {
        let dir = open_tempdir();
        std::fs::write(
            dir.path().join("agent.toml"),
            "name = \"trail\"\nmodel = \"script:script.json\"\ntools = [\"run_command\"]\n",
        )
        .unwrap();
        let script = json!([
            {"tool_calls": [{"id": "c1", "name": "run_command", "arguments": {"command":
                "/usr/bin/true && ls /input > /dev/null && (cd /scratch && /usr/bin/env true; /usr/bin/true sub)"}}]},
            {"text": "done"}
        ]);
        std::fs::write(dir.path().join("script.json"), script.to_string()).unwrap();
        let bundle = dir.path().join("bundle");
        let out = provrun_in(
            dir.path(),
            as_user,
            &[
                "run",
                &s(&dir.path().join("agent.toml")),
                "--out",
                &s(&bundle),
                "--verify",
            ],
        );
        ok(&out, who(as_user));
        let shown = show_json(dir.path(), as_user, &bundle);
        let procs = shown["processes"].as_array().unwrap();
        assert!(procs.len() >= 4, "{}: {procs:#?}", who(as_user));
        for p in procs {
            assert_eq!(p["belongs_to"]["kind"], "command", "{p}");
            assert_eq!(p["call_id"], "c1", "{p}");
            assert_eq!(p["run_call_id"], "1.1", "{p}");
        }
        let root = &procs[0];
        assert_eq!(root["parent"], Value::Null);
        assert_eq!(root["argv"][0], "/bin/sh");
        assert_eq!(root["argv"][1], "-c");
        assert_eq!(root["exit_code"], 0);
        let truth = procs
            .iter()
            .find(|p| p["argv"] == json!(["/usr/bin/true"]))
            .unwrap_or_else(|| panic!("{procs:#?}"));
        assert_eq!(truth["parent"], root["id"]);
        assert_eq!(truth["exe_sha256"], sha256_of("/usr/bin/true"));
        assert_eq!(truth["cwd"], "/scratch");
        // The subshell is a fork of the shell (its image, not an exec of its own); it
        // forks `env`, then execs its last command in place.
        let env = procs
            .iter()
            .find(|p| p["argv"] == json!(["/usr/bin/env", "true"]))
            .unwrap();
        let subshell = procs.iter().find(|p| p["id"] == env["parent"]).unwrap();
        assert_eq!(subshell["parent"], root["id"], "{subshell}");
        assert_eq!(subshell["exec"], false, "{subshell}");
        assert_eq!(subshell["argv"], root["argv"], "{subshell}");
        assert_eq!(subshell["replaced"], true, "{subshell}");
        let last = procs
            .iter()
            .find(|p| p["argv"] == json!(["/usr/bin/true", "sub"]))
            .unwrap();
        assert_eq!(last["parent"], subshell["id"]);
        assert_eq!(last["pid"], subshell["pid"]);
        assert!(
            procs
                .iter()
                .any(|p| p["argv"] == json!(["true"]) && p["parent"] == env["id"]),
            "env execs true in place: {procs:#?}"
        );
        // In the log, the trail comes before the call's own event.
        let log = events(&bundle);
        let call = log
            .iter()
            .position(|e| e["type"] == "tool_called" && e["payload"]["call_id"] == "c1")
            .unwrap();
        let trail = log
            .iter()
            .position(|e| e["type"] == "trail_recorded")
            .unwrap();
        assert!(trail < call);
        assert_eq!(log[trail]["payload"]["complete"], true);
        assert_eq!(log[trail]["confidence"], "observed");
        // No claims to match in a run of provrun's own.
        assert!(shown["claims"].is_null());
    }
}

#[test]
fn a_hostile_wrapped_program_cannot_hide_an_exec() {
    if !wrap_ready("a_hostile_wrapped_program_cannot_hide_an_exec") {
        return;
    }
    let truth = sha256_of("/usr/bin/true");
    for as_user in users() {
        let dir = open_tempdir();
        let ws = dir.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        std::fs::write(ws.join("hostile.py"), HOSTILE).unwrap();
        let bundle = dir.path().join("bundle");
        let out = provrun_in(
            dir.path(),
            as_user,
            &[
                "wrap",
                "--out",
                &s(&bundle),
                "--workspace",
                &s(&ws),
                "--",
                "/usr/bin/python3",
                "hostile.py",
            ],
        );
        ok(&out, who(as_user));
        let shown = show_json(dir.path(), as_user, &bundle);
        let procs = shown["processes"].as_array().unwrap();
        let runs_of = |arg: &str| {
            procs
                .iter()
                .filter(|p| p["exec"] == true && p["argv"][1] == arg)
                .collect::<Vec<_>>()
        };
        for route in ROUTES {
            let runs = runs_of(route);
            assert_eq!(runs.len(), 1, "{} {route}: {procs:#?}", who(as_user));
            assert_eq!(runs[0]["exe_sha256"], truth, "{route}: {}", runs[0]);
            assert_eq!(runs[0]["exit_code"], 0, "{route}");
            assert_eq!(runs[0]["belongs_to"]["kind"], "program");
        }
        for i in 0..50 {
            let runs = runs_of(&format!("loop-{i}"));
            assert_eq!(runs.len(), 1, "loop-{i}");
            assert_eq!(runs[0]["exe_sha256"], truth);
        }
        // The program itself heads the trail.
        assert_eq!(procs.iter().filter(|p| p["parent"].is_null()).count(), 1);
        let root = procs.iter().find(|p| p["parent"].is_null()).unwrap();
        // (wrap names the program by its real path: `python3` is a link.)
        assert_eq!(root["argv"][1], "hostile.py", "{root}");
        assert_eq!(root["exe_sha256"], sha256_of("/usr/bin/python3"));
        // The run wrote nothing in its workspace; and without a session log, no claims.
        assert_eq!(shown["file_changes"], json!([]));
        assert!(shown["claims"].is_null(), "{}", shown["claims"]);
        let verify = provrun_in(dir.path(), as_user, &["verify", &s(&bundle)]);
        ok(&verify, "verify");
    }
}

/// A program that leaves a forged Claude Code session: it claims two Bash calls, runs
/// one of them, never runs the other, and runs `id`, which no call mentions.
const FORGER: &str = r#"
import json, os, subprocess
subprocess.run(["/bin/bash", "-c", "echo claimed-and-run"], check=True)
subprocess.run(["/usr/bin/id", "-u"], check=True)
folder = os.path.expanduser("~/.claude/projects/-workspace")
os.makedirs(folder, exist_ok=True)
def line(kind, content):
    return {"type": kind, "sessionId": "s1", "timestamp": "2026-01-01T00:00:00Z",
            "message": {"role": kind, "content": content}}
lines = [
    line("assistant", [{"type": "tool_use", "id": "toolu_ran", "name": "Bash",
                        "input": {"command": "echo claimed-and-run"}}]),
    line("user", [{"type": "tool_result", "tool_use_id": "toolu_ran", "content": "claimed-and-run"}]),
    line("assistant", [{"type": "tool_use", "id": "toolu_never", "name": "Bash",
                        "input": {"command": "rm -rf /workspace/precious"}}]),
    line("user", [{"type": "tool_result", "tool_use_id": "toolu_never", "content": ""}]),
]
with open(os.path.join(folder, "forged.jsonl"), "w") as f:
    f.write("".join(json.dumps(l) + "\n" for l in lines))
with open("notes.md", "a") as f:
    f.write("edited\n")
"#;

#[test]
fn a_forged_claim_and_an_unclaimed_process_are_both_listed() {
    if !wrap_ready("a_forged_claim_and_an_unclaimed_process_are_both_listed") {
        return;
    }
    for as_user in users() {
        let dir = open_tempdir();
        let ws = dir.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        std::fs::write(ws.join("forger.py"), FORGER).unwrap();
        std::fs::write(ws.join("notes.md"), "first\n").unwrap();
        // A git repository, so that the change is kept as a diff too.
        for args in [
            &["init", "-q"][..],
            &["add", "notes.md", "forger.py"],
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "-qm",
                "start",
            ],
        ] {
            let git = Command::new("git")
                .args(args)
                .current_dir(&ws)
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .output()
                .unwrap();
            assert!(git.status.success(), "{git:?}");
        }
        let bundle = dir.path().join("bundle");
        let out = provrun_in(
            dir.path(),
            as_user,
            &[
                "wrap",
                "--out",
                &s(&bundle),
                "--workspace",
                &s(&ws),
                "--",
                "/usr/bin/python3",
                "forger.py",
            ],
        );
        ok(&out, who(as_user));
        // verify: every check passes but `claims`, which warns; the exit code is 0.
        let verify = provrun_in(dir.path(), as_user, &["verify", "--json", &s(&bundle)]);
        ok(&verify, "verify");
        let report: Value = serde_json::from_slice(&verify.stdout).unwrap();
        let claims = report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["code"] == "claims")
            .unwrap_or_else(|| panic!("{report:#}"));
        assert_eq!(claims["status"], "warn", "{claims}");
        let detail = claims["detail"].as_str().unwrap();
        assert!(detail.contains("toolu_never"), "{detail}");
        assert!(detail.contains("rm -rf /workspace/precious"), "{detail}");
        assert!(detail.contains("/usr/bin/id -u"), "{detail}");
        assert!(!detail.contains("claimed-and-run"), "{detail}");
        assert_eq!(report["ok"], true);

        let shown = show_json(dir.path(), as_user, &bundle);
        let c = &shown["claims"];
        assert_eq!(c["claims"], 2, "{c:#}");
        let unobserved = c["unobserved"].as_array().unwrap();
        assert_eq!(unobserved.len(), 1, "{c:#}");
        assert_eq!(unobserved[0]["call_id"], "toolu_never");
        assert_eq!(unobserved[0]["name"], "Bash");
        assert_eq!(unobserved[0]["command"], "rm -rf /workspace/precious");
        let unclaimed: Vec<&Value> = c["unclaimed"].as_array().unwrap().iter().collect();
        assert_eq!(unclaimed.len(), 1, "{c:#}");
        assert_eq!(unclaimed[0]["argv"], json!(["/usr/bin/id", "-u"]));
        assert_eq!(c["matched"].as_array().unwrap().len(), 1);
        assert_eq!(c["matched"][0]["call"], "toolu_ran");
        // The workspace's change: one file modified, its digests before and after.
        let changes = shown["file_changes"].as_array().unwrap();
        let notes = changes.iter().find(|f| f["path"] == "notes.md").unwrap();
        assert_eq!(notes["change"], "modified");
        assert_eq!(
            notes["before_sha256"],
            hex::encode(sha2::Sha256::digest(b"first\n"))
        );
        assert_eq!(
            notes["after_sha256"],
            hex::encode(sha2::Sha256::digest(b"first\nedited\n"))
        );
        // The repository's change as `git diff` prints it, kept as a blob.
        let log = events(&bundle);
        let whole = log
            .iter()
            .find(|e| e["type"] == "workspace_changed")
            .unwrap();
        assert_eq!(whole["payload"]["git"], true, "{whole}");
        assert_eq!(whole["payload"]["modified"], 1, "{whole}");
        let hex = whole["payload"]["diff"]["digest"]["sha256"]
            .as_str()
            .unwrap();
        let diff = String::from_utf8(provrun_evidence::read_blob_by_digest(&bundle, hex).unwrap())
            .unwrap();
        assert!(diff.contains("diff --git a/notes.md b/notes.md"), "{diff}");
        assert!(diff.contains(" first\n+edited\n"), "{diff}");
        // `show` says the same to a person.
        let text = provrun_in(dir.path(), as_user, &["show", &s(&bundle)]);
        ok(&text, "show");
        let text = String::from_utf8_lossy(&text.stdout);
        assert!(text.contains("claimed, not observed"), "{text}");
        assert!(text.contains("observed, not claimed"), "{text}");
        assert!(text.contains("rm -rf /workspace/precious"), "{text}");
    }
}

/// The real Codex CLI and Claude Code, wrapped with provrun running as an ordinary user
/// (uid 1000, when this test runs as root; as root they are `wrap_programs.rs`'s own
/// tests): each runs the shell command the loopback upstream asks for through its own
/// tool loop, and the command shows among the observed processes, matched to its claim.
#[test]
fn codex_and_claude_code_run_a_shell_command_as_an_ordinary_user() {
    use crate::support::upstream::Upstream;
    use crate::wrap_programs as w;
    const TEST: &str = "codex_and_claude_code_run_a_shell_command_as_an_ordinary_user";
    if !am_root() || !wrap_ready(TEST) {
        return;
    }
    let programs = [
        (
            w::CODEX,
            "codex",
            "OPENAI_API_KEY",
            "sk-test-REAL-codex-key-as-user-1",
        ),
        (
            w::CLAUDE_CODE,
            "claude",
            "ANTHROPIC_API_KEY",
            "sk-ant-test-REAL-claude-as-user-2",
        ),
    ];
    for (package, bin, key_var, key) in programs {
        let Some(installed) = crate::support::wrap::npm_package(TEST, &w::folder(package), bin)
        else {
            return;
        };
        let dir = open_tempdir();
        // The installation, linked (not copied) where the ordinary user can read it: the
        // cache sits under /root.
        let prefix = dir.path().join(bin);
        let linked = Command::new("cp")
            .arg("-al")
            .arg(&installed)
            .arg(&prefix)
            .status()
            .unwrap();
        assert!(linked.success());
        let notes = dir.path().join("notes.txt");
        std::fs::write(&notes, w::NOTES).unwrap();
        let bundle = dir.path().join("bundle");
        let (upstream, flag, url, argv, call, command) = if bin == "codex" {
            let upstream = Upstream::start(w::codex_upstream);
            let url = format!("{}/v1", upstream.origin);
            let argv = w::codex_command(&prefix, "uppercase the notes");
            (
                upstream,
                "--upstream-openai",
                url,
                argv,
                "call_task_1",
                w::TASK,
            )
        } else {
            let upstream = Upstream::start(w::claude_upstream);
            let url = upstream.origin.clone();
            let argv = w::claude_command(&prefix, "uppercase the notes");
            (
                upstream,
                "--upstream-anthropic",
                url,
                argv,
                "toolu_env",
                "env > /workspace/env.txt",
            )
        };
        let (bundle_s, notes_s, prefix_s) = (s(&bundle), s(&notes), s(&prefix));
        let mut args = vec![
            "wrap",
            "--out",
            &bundle_s,
            "--input",
            &notes_s,
            "--read-only",
            &prefix_s,
            flag,
            &url,
            "--",
        ];
        args.extend(argv.iter().map(String::as_str));
        let out = provrun_with(
            dir.path(),
            true,
            &args,
            &[
                (key_var, key),
                ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
            ],
        );
        ok(&out, bin);
        assert!(!upstream.log().is_empty());
        w::assert_command_observed(&bundle, call, command);
        let shown = show_json(dir.path(), true, &bundle);
        let uids: std::collections::BTreeSet<u64> = shown["processes"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|p| p["uid"].as_u64())
            .collect();
        assert_eq!(
            uids,
            [u64::from(USER)].into(),
            "{bin}: every process ran as uid 1000"
        );
        crate::support::wrap::assert_no_secret(&bundle, key);
    }
}

/// A program on an SDK-like client (Python's standard library), with no session log: its
/// model asks for a tool call, it answers it in its next request, and both are seen on
/// the wire — counted in `usage.tool_calls` and listed in `tool_calls_seen`.
const SDK_PROGRAM: &str = r#"
import json, os, subprocess, urllib.request
base = os.environ["OPENAI_BASE_URL"]
def ask(messages):
    req = urllib.request.Request(base + "/chat/completions", method="POST",
        data=json.dumps({"model": "gpt-test", "messages": messages,
                         "tools": [{"type": "function", "function": {"name": "shell",
                                    "parameters": {"type": "object"}}}]}).encode(),
        headers={"content-type": "application/json",
                 "authorization": "Bearer " + os.environ["OPENAI_API_KEY"]})
    return json.load(urllib.request.urlopen(req))
messages = [{"role": "user", "content": "how many files?"}]
first = ask(messages)["choices"][0]["message"]
call = first["tool_calls"][0]
out = subprocess.run(json.loads(call["function"]["arguments"])["argv"], capture_output=True, text=True).stdout
messages += [first, {"role": "tool", "tool_call_id": call["id"], "content": out}]
print(ask(messages)["choices"][0]["message"]["content"])
"#;

#[test]
fn an_sdk_programs_tool_calls_are_seen_on_the_wire_without_a_session_log() {
    use crate::support::upstream::{Reply, Request, Upstream, chat_tool_call};
    if !wrap_ready("an_sdk_programs_tool_calls_are_seen_on_the_wire_without_a_session_log") {
        return;
    }
    let upstream = Upstream::start(|req: &Request| {
        let body = req.json();
        let answered = body["messages"]
            .as_array()
            .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"));
        if answered {
            Reply::json(
                200,
                &json!({"id": "c2", "object": "chat.completion", "model": "gpt-test",
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": "counted"}}],
                    "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}}),
            )
        } else {
            chat_tool_call(
                "gpt-test",
                "call_ls",
                "shell",
                &json!({"argv": ["/usr/bin/echo", "three files"]}),
            )
        }
    });
    for as_user in users() {
        let dir = open_tempdir();
        let ws = dir.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        std::fs::write(ws.join("sdk.py"), SDK_PROGRAM).unwrap();
        let bundle = dir.path().join("bundle");
        let url = format!("{}/v1", upstream.origin);
        let out = provrun_in(
            dir.path(),
            as_user,
            &[
                "wrap",
                "--out",
                &s(&bundle),
                "--workspace",
                &s(&ws),
                "--upstream-openai",
                &url,
                "--",
                "/usr/bin/python3",
                "sdk.py",
            ],
        );
        ok(&out, who(as_user));
        assert!(String::from_utf8_lossy(&out.stdout).contains("counted"));
        let shown = show_json(dir.path(), as_user, &bundle);
        assert_eq!(shown["usage"]["tool_calls"], 1, "{}", shown["usage"]);
        let seen = shown["tool_calls_seen"].as_array().unwrap();
        assert_eq!(seen.len(), 1, "{seen:#?}");
        assert_eq!(seen[0]["call_id"], "call_ls");
        assert_eq!(seen[0]["name"], "shell");
        assert_eq!(seen[0]["run_call_id"], "1.1");
        assert_eq!(seen[0]["answered_in"], 2);
        assert_eq!(seen[0]["result"], "three files\n");
        // The command the program ran for it is observed too; with no session log there
        // are no claims to match.
        assert!(
            shown["processes"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["argv"] == json!(["/usr/bin/echo", "three files"])),
            "{:#?}",
            shown["processes"]
        );
        assert!(shown["claims"].is_null());
        let text = provrun_in(dir.path(), as_user, &["show", &s(&bundle)]);
        let text = String::from_utf8_lossy(&text.stdout);
        assert!(text.contains("1 tool calls"), "{text}");
        assert!(text.contains("result in request 2"), "{text}");
    }
}

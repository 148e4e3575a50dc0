//! Published MCP servers, run as installed through `provrun run`, `verify` and `replay`:
//! `mcp-server-time` from PyPI in a throwaway virtualenv (a console script whose first
//! line names the virtualenv's Python), and `@modelcontextprotocol/server-memory` and
//! `@modelcontextprotocol/server-filesystem` from npm, installed with `npm install
//! --prefix` into folders under target/ (Node programs that load their packages from
//! `node_modules`). Each is granted its installation folder with `read_only`, nothing
//! else, and no network; the filesystem server, given `/input`, lists and reads the run's
//! staged inputs there.
//!
//! Without python3 or npm (or without the registries) the tests are skipped with a loud
//! message, except under `CI=true`, where they fail instead: `cargo xtask ci` installs
//! python3, venv, nodejs and npm there.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::support::cli::events;
use crate::support::venv;
use crate::support::venv::in_ci;

/// The pinned npm package (and its version) of the Node server.
const NPM_PACKAGE: &str = "@modelcontextprotocol/server-memory@2026.8.31";
/// The pinned npm package of the filesystem server.
const NPM_FILESYSTEM: &str = "@modelcontextprotocol/server-filesystem@2026.8.31";

/// Skip loudly, or fail under CI.
fn unavailable(test: &str, why: &str) {
    assert!(!in_ci(), "CI=true: {test} cannot run: {why}");
    eprintln!(
        "\n*** SKIPPED {test}: {why}.\n*** provrun is NOT checked against this published MCP \
         server on this machine (CI=true makes this a failure).\n"
    );
}

fn provrun(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_provrun"))
        .args(args)
        .output()
        .expect("provrun runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

fn tool_calls(events: &[Value]) -> Vec<&Value> {
    events
        .iter()
        .filter(|e| e["type"] == "tool_called")
        .map(|e| &e["payload"])
        .collect()
}

/// A TOML string.
fn quoted(text: &str) -> String {
    serde_json::to_string(text).unwrap()
}

/// Writes the agent and its script, runs it, verifies it, replays it with the server
/// gone from the spec's reach (the replay answers from the recording) and verifies the
/// replay. Returns the run's tool calls' payloads.
fn run_verify_replay(dir: &Path, mcp: &str, script: Value) -> Vec<Value> {
    let agent = dir.join("agent.toml");
    std::fs::write(
        &agent,
        format!(
            "name = \"published\"\nmodel = \"script:script.json\"\ntools = []\n\
             allow_degraded_sandbox = {}\n\n[[mcp]]\n{mcp}",
            !in_ci()
        ),
    )
    .unwrap();
    std::fs::write(dir.join("script.json"), script.to_string()).unwrap();
    let bundle = dir.join("bundle");
    let (code, text) = provrun(&[
        "run",
        agent.to_str().unwrap(),
        "--out",
        bundle.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "run: {text}");
    let (code, text) = provrun(&["verify", bundle.to_str().unwrap()]);
    assert_eq!(code, 0, "verify: {text}");
    let recorded = events(&bundle);
    let server = &recorded[0]["payload"]["details"]["mcp"][0];
    assert_eq!(server["endpoint"]["network"], false, "{server}");
    if in_ci() {
        assert_eq!(
            server["endpoint"]["degraded"],
            serde_json::json!([]),
            "CI runs the server fully confined"
        );
    }
    let calls: Vec<Value> = tool_calls(&recorded).into_iter().cloned().collect();
    for call in &calls {
        assert_eq!(call["ok"], true, "{call}");
        assert_eq!(call["mode"], "remote_mcp");
    }

    let replayed = dir.join("replayed");
    let (code, text) = provrun(&[
        "replay",
        bundle.to_str().unwrap(),
        "--out",
        replayed.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "replay: {text}");
    let (code, text) = provrun(&["verify", replayed.to_str().unwrap()]);
    assert_eq!(code, 0, "verify the replay: {text}");
    let again = events(&replayed);
    let again = tool_calls(&again);
    assert_eq!(again.len(), calls.len());
    for (a, b) in calls.iter().zip(again) {
        assert_eq!(
            a["result"], b["result"],
            "the replay answers as the server did"
        );
        assert_eq!(b["mcp"]["answered_by"], "recording");
    }
    calls
}

#[test]
fn mcp_server_time_from_pypi_runs_as_installed_in_its_virtualenv() {
    const TEST: &str = "mcp_server_time_from_pypi_runs_as_installed_in_its_virtualenv";
    let python = match venv::virtualenv(
        "mcp-server-time-venv",
        "tests/interop/mcp-time-requirements.txt",
        "import mcp_server_time",
    ) {
        Ok(p) => p,
        Err(why) => return unavailable(TEST, &why),
    };
    let venv = python.parent().unwrap().parent().unwrap().to_path_buf();
    // The Python the virtualenv links to: under /usr on Debian (visible anyway), elsewhere
    // (pyenv, a build of one's own) its installation folder is granted too.
    let base = Command::new(&python)
        .args(["-c", "import sys; print(sys.base_prefix)"])
        .output()
        .unwrap();
    let base = PathBuf::from(String::from_utf8_lossy(&base.stdout).trim());
    let program = venv.join("bin/mcp-server-time");
    let tmp = tempfile::tempdir().unwrap();

    // Without its virtualenv granted, the message names the interpreter and the folder.
    let no_grant = format!(
        "name = \"time\"\ncommand = {}\nargs = [\"--local-timezone\", \"UTC\"]\ntimeout_s = 60\n",
        quoted(&program.display().to_string())
    );
    std::fs::write(
        tmp.path().join("bare.toml"),
        format!("name = \"bare\"\nmodel = \"test\"\ntools = []\nallow_degraded_sandbox = true\n\n[[mcp]]\n{no_grant}"),
    )
    .unwrap();
    let (code, text) = provrun(&[
        "run",
        tmp.path().join("bare.toml").to_str().unwrap(),
        "--out",
        tmp.path().join("nothing").to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("first line names the interpreter"), "{text}");
    let venv_real = std::fs::canonicalize(&venv).unwrap();
    assert!(
        text.contains(&format!("add `{}` to `read_only`", venv_real.display())),
        "{text}"
    );

    let mut grants = vec![venv.display().to_string()];
    if !base.starts_with("/usr") {
        grants.push(base.display().to_string());
    }
    let grants: Vec<String> = grants.iter().map(|g| quoted(g)).collect();
    let mcp = format!("{no_grant}read_only = [{}]\n", grants.join(", "));
    let script = serde_json::json!([
        {"tool_calls": [{"id": "c", "name": "time_convert_time", "arguments": {
            "source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}}]},
        {"text": "noon in UTC is nine in the evening in Tokyo"}
    ]);
    let calls = run_verify_replay(tmp.path(), &mcp, script);
    assert_eq!(calls.len(), 1);
    let result = calls[0]["result"].as_str().unwrap();
    assert!(
        result.contains("Asia/Tokyo") && result.contains("T21:00:00+09:00"),
        "{result}"
    );
    assert_eq!(
        calls[0]["mcp"]["claims"]["implementation"]["name"],
        "mcp-time"
    );
}

/// `npm install --prefix` of the pinned package into a folder under target/, once.
fn npm_install() -> Result<PathBuf, String> {
    npm_install_into("mcp-npm", NPM_PACKAGE, "mcp-server-memory")
}

/// `npm install --prefix` of `package` (pinned) into `CARGO_TARGET_TMPDIR/folder`, once;
/// `program` is the command it installs.
fn npm_install_into(folder: &str, package: &str, program: &str) -> Result<PathBuf, String> {
    let prefix = Path::new(env!("CARGO_TARGET_TMPDIR")).join(folder);
    let program = prefix.join("node_modules/.bin").join(program);
    let stamp = prefix.join("installed");
    if program.exists() && std::fs::read_to_string(&stamp).is_ok_and(|s| s == package) {
        return Ok(prefix);
    }
    std::fs::create_dir_all(&prefix).map_err(|e| e.to_string())?;
    let out = Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--prefix"])
        .arg(&prefix)
        .arg(package)
        .output()
        .map_err(|e| format!("npm is not available ({e})"))?;
    if !out.status.success() || !program.exists() {
        return Err(format!(
            "`npm install {package}` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    std::fs::write(&stamp, package).map_err(|e| e.to_string())?;
    Ok(prefix)
}

#[test]
fn server_memory_from_npm_runs_as_installed_from_its_node_modules() {
    const TEST: &str = "server_memory_from_npm_runs_as_installed_from_its_node_modules";
    if Command::new("node").arg("--version").output().is_err() {
        return unavailable(TEST, "node is not installed");
    }
    let prefix = match npm_install() {
        Ok(p) => p,
        Err(why) => return unavailable(TEST, &why),
    };
    let modules = prefix.join("node_modules");
    let program = modules.join(".bin/mcp-server-memory");
    let tmp = tempfile::tempdir().unwrap();
    let base = format!(
        "name = \"memory\"\ncommand = {}\nenv = {{ MEMORY_FILE_PATH = \"/scratch/memory.jsonl\" }}\ntimeout_s = 60\n",
        quoted(&program.display().to_string())
    );

    // Without its node_modules granted, Node cannot load the SDK; the message says which
    // folder to grant, after Node's own key line.
    std::fs::write(
        tmp.path().join("bare.toml"),
        format!("name = \"bare\"\nmodel = \"test\"\ntools = []\nallow_degraded_sandbox = true\n\n[[mcp]]\n{base}"),
    )
    .unwrap();
    let (code, text) = provrun(&[
        "run",
        tmp.path().join("bare.toml").to_str().unwrap(),
        "--out",
        tmp.path().join("nothing").to_str().unwrap(),
    ]);
    if code == 0 {
        // Only where no confinement layer hides the host's files (never under CI).
        assert!(
            !in_ci(),
            "CI=true: the server saw files it was not granted: {text}"
        );
        eprintln!("*** nothing hides node_modules here: the missing-grant message is not checked");
    } else {
        assert_eq!(code, 2, "{text}");
        let modules_real = std::fs::canonicalize(&modules).unwrap();
        assert!(text.contains("Cannot find package"), "{text}");
        assert!(
            text.contains(&format!("add `{}` to `read_only`", modules_real.display())),
            "{text}"
        );
    }

    let mcp = format!(
        "{base}read_only = [{}]\n",
        quoted(&modules.display().to_string())
    );
    let script = serde_json::json!([
        {"tool_calls": [{"id": "c", "name": "memory_create_entities", "arguments": {"entities": [
            {"name": "provrun", "entityType": "project", "observations": ["writes evidence"]}
        ]}}]},
        {"tool_calls": [{"id": "r", "name": "memory_read_graph", "arguments": {}}]},
        {"text": "the graph holds provrun"}
    ]);
    let calls = run_verify_replay(tmp.path(), &mcp, script);
    assert_eq!(calls.len(), 2);
    let graph = calls[1]["result"].as_str().unwrap();
    assert!(
        graph.contains("\"provrun\"") && graph.contains("writes evidence"),
        "{graph}"
    );
}

#[test]
fn server_filesystem_from_npm_lists_and_reads_the_staged_inputs_at_input() {
    const TEST: &str = "server_filesystem_from_npm_lists_and_reads_the_staged_inputs_at_input";
    if Command::new("node").arg("--version").output().is_err() {
        return unavailable(TEST, "node is not installed");
    }
    let prefix = match npm_install_into(
        "mcp-npm-filesystem",
        NPM_FILESYSTEM,
        "mcp-server-filesystem",
    ) {
        Ok(p) => p,
        Err(why) => return unavailable(TEST, &why),
    };
    let modules = prefix.join("node_modules");
    let tmp = tempfile::tempdir().unwrap();
    let inputs = tmp.path().join("inputs");
    std::fs::create_dir_all(inputs.join("sub")).unwrap();
    std::fs::write(inputs.join("a.txt"), "alpha from the inputs\n").unwrap();
    std::fs::write(inputs.join("sub/b.txt"), "beta\n").unwrap();
    let agent = tmp.path().join("agent.toml");
    std::fs::write(
        &agent,
        format!(
            "name = \"files\"\nmodel = \"script:script.json\"\ntools = []\n\
             allow_degraded_sandbox = {}\n\n[[mcp]]\nname = \"files\"\ncommand = {}\n\
             args = [\"/input\"]\ntimeout_s = 60\nread_only = [{}]\n",
            !in_ci(),
            quoted(
                &modules
                    .join(".bin/mcp-server-filesystem")
                    .display()
                    .to_string()
            ),
            quoted(&modules.display().to_string()),
        ),
    )
    .unwrap();
    std::fs::write(
        tmp.path().join("script.json"),
        serde_json::json!([
            {"tool_calls": [
                {"id": "l", "name": "files_list_directory", "arguments": {"path": "/input"}},
                {"id": "r", "name": "files_read_text_file", "arguments": {"path": "/input/a.txt"}}
            ]},
            {"text": "read"}
        ])
        .to_string(),
    )
    .unwrap();
    let bundle = tmp.path().join("bundle");
    let (code, text) = provrun(&[
        "run",
        agent.to_str().unwrap(),
        "--input",
        inputs.to_str().unwrap(),
        "--out",
        bundle.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "run: {text}");
    let recorded = events(&bundle);
    let calls = tool_calls(&recorded);
    assert_eq!(calls.len(), 2);
    for call in &calls {
        assert_eq!(call["ok"], true, "{call}");
    }
    // The server saw the staged inputs at /input: the two entries, and a.txt's text.
    let listing = calls[0]["result"].as_str().unwrap();
    assert!(
        listing.contains("a.txt") && listing.contains("sub"),
        "{listing}"
    );
    let read = calls[1]["result"].as_str().unwrap();
    assert!(read.contains("alpha from the inputs"), "{read}");
    let (code, text) = provrun(&["verify", bundle.to_str().unwrap()]);
    assert_eq!(code, 0, "verify: {text}");
    let replayed = tmp.path().join("replayed");
    let (code, text) = provrun(&[
        "replay",
        bundle.to_str().unwrap(),
        "--out",
        replayed.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "replay: {text}");
}

/// A git repository with one commit in `dir`, made as the user the test runs as.
fn git_repo(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("notes.txt"), "provrun\n").unwrap();
    for args in [
        &["init", "--quiet"][..],
        &["add", "notes.txt"],
        &[
            "-c",
            "user.name=Test",
            "-c",
            "user.email=test@example.invalid",
            "commit",
            "--quiet",
            "-m",
            "the first commit",
        ],
    ] {
        let ok = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env_remove("GIT_DIR")
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "git {args:?}");
    }
}

#[test]
fn server_git_from_pypi_reads_a_repository_staged_at_input_once_safe_directory_is_set() {
    const TEST: &str =
        "server_git_from_pypi_reads_a_repository_staged_at_input_once_safe_directory_is_set";
    if Command::new("git").arg("--version").output().is_err() {
        return unavailable(TEST, "git is not installed");
    }
    let python = match venv::virtualenv(
        "mcp-server-git-venv",
        "tests/interop/mcp-git-requirements.txt",
        "import mcp_server_git",
    ) {
        Ok(p) => p,
        Err(why) => return unavailable(TEST, &why),
    };
    let venv = python.parent().unwrap().parent().unwrap().to_path_buf();
    let base = Command::new(&python)
        .args(["-c", "import sys; print(sys.base_prefix)"])
        .output()
        .unwrap();
    let base = PathBuf::from(String::from_utf8_lossy(&base.stdout).trim());
    let mut grants = vec![quoted(&venv.display().to_string())];
    if !base.starts_with("/usr") {
        grants.push(quoted(&base.display().to_string()));
    }
    let tmp = tempfile::tempdir().unwrap();
    let inputs = tmp.path().join("inputs");
    git_repo(&inputs.join("repo"));
    // The server's git_log, and git itself run as a command, as the same user.
    let script = |env: &str| {
        serde_json::json!([
            {"tool_calls": [{"id": "log", "name": "git_log",
                             "arguments": {"repo_path": "/input/repo", "max_count": 5}}]},
            {"tool_calls": [{"id": "cmd", "name": "run_command",
                             "arguments": {"command": format!("{env}git -C /input/repo log --oneline 2>&1")}}]},
            {"text": "read the log"}
        ])
        .to_string()
    };
    // Without and with `safe.directory`, given in the server's environment (and the
    // command's).
    let safe = "env = { GIT_CONFIG_COUNT = \"1\", GIT_CONFIG_KEY_0 = \"safe.directory\", \
                GIT_CONFIG_VALUE_0 = \"/input/repo\" }\n";
    let safe_cmd =
        "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=safe.directory GIT_CONFIG_VALUE_0=/input/repo ";
    let mut results = Vec::new();
    for (name, env, cmd_env) in [("plain", "", ""), ("safe", safe, safe_cmd)] {
        std::fs::write(tmp.path().join("script.json"), script(cmd_env)).unwrap();
        let agent = tmp.path().join(format!("{name}.toml"));
        std::fs::write(
            &agent,
            format!(
                "name = \"git\"\nmodel = \"script:script.json\"\ntools = [\"run_command\"]\n\
                 allow_degraded_sandbox = {}\n\n[[mcp]]\nname = \"git\"\nprefix = \"\"\n\
                 command = {}\nargs = [\"--repository\", \"/input/repo\"]\ntimeout_s = 60\n\
                 read_only = [{}]\n{env}",
                !in_ci(),
                quoted(&venv.join("bin/mcp-server-git").display().to_string()),
                grants.join(", "),
            ),
        )
        .unwrap();
        let bundle = tmp.path().join(name);
        let (code, text) = provrun(&[
            "run",
            agent.to_str().unwrap(),
            "--input",
            inputs.to_str().unwrap(),
            "--out",
            bundle.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{name}: {text}");
        let (code, text) = provrun(&["verify", bundle.to_str().unwrap()]);
        assert_eq!(code, 0, "{name}: verify: {text}");
        let recorded = events(&bundle);
        let calls = tool_calls(&recorded);
        results.push((calls[0].clone(), calls[1].clone()));
    }
    // As root, the server and the command run as the dedicated command user, and the
    // staged repository is root's: git refuses it ("dubious ownership") until
    // `safe.directory` names it.
    let ((plain_log, plain_cmd), (safe_log, safe_cmd)) = (&results[0], &results[1]);
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    if root {
        assert_eq!(plain_log["ok"], false, "{plain_log}");
        let said = plain_cmd["result"].as_str().unwrap();
        assert!(said.contains("dubious ownership"), "{said}");
    }
    // Never "does not exist": the repository is there at /input.
    assert!(
        !plain_log["result"].to_string().contains("not exist"),
        "{plain_log}"
    );
    assert_eq!(safe_log["ok"], true, "{safe_log}");
    let log = safe_log["result"].as_str().unwrap();
    assert!(log.contains("the first commit"), "{log}");
    assert!(
        safe_cmd["result"]
            .as_str()
            .unwrap()
            .contains("the first commit"),
        "{safe_cmd}"
    );
}

//! The README's shell commands, run as a new user would from the repository root: the
//! set-up command that runs the main job, and every command of the tour. The test fails
//! when the README lies.
//!
//! A new user types `cargo run -q -p provrun-cli -- …` or defines `provrun() { cargo run
//! … }`; running cargo inside `cargo test` would wait on its own build lock, so the test
//! puts a `provrun` on `PATH` that is this very executable (it links `provrun-cli` and,
//! started with `PROVRUN_README_AS_CLI` set, is the CLI) and rewrites the first form to
//! it. The second set-up command, `cargo xtask ci`, is the command running this test:
//! the test checks it is exactly what `.ci/run` calls, instead of recursing into it.
//!
//! This test has its own `main` (`harness = false` in tests/Cargo.toml), so it stays a
//! test binary of its own, not a module of `tests/it`.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

const AS_CLI: &str = "PROVRUN_README_AS_CLI";
const CARGO_RUN: &str = "cargo run -q -p provrun-cli --";

fn main() -> ExitCode {
    // Like the real `provrun`, this executable is its own confinement helper.
    provrun_sandbox::arg0_dispatch();
    if std::env::var_os(AS_CLI).is_some() {
        return provrun_cli::main_with_args(std::env::args_os());
    }
    let checks: [(&str, Check); 5] = [
        ("set-up commands", setup_commands),
        ("install, and the installed binary alone", install_commands),
        ("tour commands", tour_commands),
        ("import commands", import_commands),
        (
            "every shell block is run or skipped on purpose",
            blocks_accounted_for,
        ),
    ];
    let readme = Readme::load();
    let mut failed = 0;
    for (name, check) in checks {
        match check(&readme) {
            Ok(()) => println!("test readme: {name} ... ok"),
            Err(e) => {
                failed += 1;
                println!("test readme: {name} ... FAILED\n{e}\n");
            }
        }
    }
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// One check of the README: `Err` says what it got wrong.
type Check = fn(&Readme) -> Result<(), String>;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the workspace root")
        .to_path_buf()
}

/// A fenced `sh` block: its section heading, whether it is marked to skip, its lines.
#[derive(Debug)]
struct Block {
    section: String,
    skip: bool,
    lines: Vec<String>,
}

struct Readme {
    blocks: Vec<Block>,
}

impl Readme {
    fn load() -> Self {
        let text = std::fs::read_to_string(root().join("README.md")).expect("README.md");
        let mut blocks = Vec::new();
        let mut section = String::new();
        let mut skip_next = false;
        let mut current: Option<Block> = None;
        for line in text.lines() {
            if let Some(block) = current.as_mut() {
                if line.trim_start().starts_with("```") {
                    blocks.push(current.take().unwrap());
                } else {
                    block.lines.push(line.to_string());
                }
                continue;
            }
            if line.starts_with('#') && !line.starts_with("#[") {
                section = line.trim_start_matches('#').trim().to_string();
            } else if line.starts_with("<!-- readme-test: skip") {
                skip_next = true;
            } else if line.trim() == "```sh" {
                current = Some(Block {
                    section: section.clone(),
                    skip: std::mem::take(&mut skip_next),
                    lines: Vec::new(),
                });
            }
        }
        Readme { blocks }
    }

    fn block(&self, section: &str) -> Result<&Block, String> {
        let found: Vec<&Block> = self
            .blocks
            .iter()
            .filter(|b| b.section == section && !b.skip)
            .collect();
        match found.as_slice() {
            [one] => Ok(one),
            _ => Err(format!(
                "README.md: expected one ```sh block under `{section}`, found {}",
                found.len()
            )),
        }
    }
}

/// A temporary `bin/provrun` that runs this executable as the CLI.
struct Shim {
    dir: tempfile::TempDir,
}

impl Shim {
    fn new() -> Self {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let exe = std::env::current_exe().unwrap();
        let script = format!(
            "#!/bin/sh\n{AS_CLI}=1 exec '{}' \"$@\"\n",
            exe.display().to_string().replace('\'', r"'\''")
        );
        let path = dir.path().join("provrun");
        std::fs::write(&path, script).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        Shim { dir }
    }

    /// Run a shell script from the repository root with `provrun` on PATH; each line of
    /// `lines` is one command, checked for its exit code (0, or N for a line ending in a
    /// comment `# exits N…`).
    fn run(&self, lines: &[String]) -> Result<String, String> {
        let mut script = String::from("set -u\n");
        for (i, line) in lines.iter().enumerate() {
            let expected = expected_exit(line);
            let shown = line.replace('\'', r"'\''");
            script.push_str(&format!(
                "echo '+ {shown}' >&2\n{line}\nrc=$?\nif [ $rc -ne {expected} ]; then \
                 echo \"README line {n} exited $rc, expected {expected}: {shown}\" >&2; exit 99; fi\n",
                n = i + 1
            ));
        }
        let path = format!(
            "{}:{}",
            self.dir.path().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let out = Command::new("bash")
            .args(["-c", &script])
            .current_dir(root())
            .env("PATH", path)
            .env_remove("NO_COLOR")
            .env_remove("CLICOLOR_FORCE")
            .output()
            .map_err(|e| format!("cannot start bash: {e}"))?;
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        if out.status.success() {
            Ok(format!("{stdout}{stderr}"))
        } else {
            Err(format!("stdout:\n{stdout}\nstderr:\n{stderr}"))
        }
    }
}

/// The exit code a README line says it ends with (`# exits N`), else 0.
fn expected_exit(line: &str) -> i32 {
    line.split_once("# exits ")
        .and_then(|(_, rest)| {
            rest.split(|c: char| !c.is_ascii_digit())
                .next()
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

fn setup_commands(readme: &Readme) -> Result<(), String> {
    let block = readme.block("Set up on a fresh machine")?;
    let commands: Vec<&String> = block
        .lines
        .iter()
        .filter(|l| !l.trim().is_empty())
        .collect();
    if commands.len() != 2 {
        return Err(format!(
            "expected exactly two set-up commands, found {commands:?}"
        ));
    }
    // The second is the test command, byte for byte what .ci/run calls.
    let ci = std::fs::read_to_string(root().join(".ci/run")).map_err(|e| e.to_string())?;
    if commands[1] != "cargo xtask ci" || !ci.lines().any(|l| l == commands[1]) {
        return Err(format!(
            "the second set-up command `{}` is not the `cargo xtask ci` line of .ci/run",
            commands[1]
        ));
    }
    // The first runs the main job: hello on the offline model, producing and verifying
    // a bundle. Run it twice: it must be rerunnable.
    let first = commands[0];
    if !first.starts_with(CARGO_RUN) || !first.contains("examples/hello/agent.toml") {
        return Err(format!(
            "the first set-up command should run examples/hello with `{CARGO_RUN}`: {first}"
        ));
    }
    let line = first.replacen(CARGO_RUN, "provrun", 1);
    let shim = Shim::new();
    for attempt in 1..=2 {
        let output = shim.run(std::slice::from_ref(&line))?;
        if !output.contains("bundle verifies: all 11 checks pass") {
            return Err(format!(
                "run {attempt} of the main job did not report a verified bundle:\n{output}"
            ));
        }
        if !output.contains(r#"{"tool_results":[{"name":"list_dir","ok":true},{"name":"read_file","ok":true},{"name":"write_file","ok":true}]}"#) {
            return Err(format!(
                "the main job's answer is not what the README describes:\n{output}"
            ));
        }
    }
    Ok(())
}

/// The Install block as written (a real `cargo install` of the release binary into a
/// temporary root), then that binary copied alone into an empty folder runs a confined
/// command with no `PROVRUN_*` variable set: it must be its own confinement helper.
fn install_commands(readme: &Readme) -> Result<(), String> {
    let block = readme.block("Install")?;
    let mut lines: Vec<String> = block
        .lines
        .iter()
        .filter(|l| !l.trim().is_empty())
        .cloned()
        .collect();
    let install = "cargo install --locked --path crates/cli --root \"$root\"";
    if !lines.iter().any(|l| l == install) {
        return Err(format!("the Install block no longer runs `{install}`"));
    }
    let lone = tempfile::tempdir().map_err(|e| e.to_string())?;
    let binary = lone.path().join("provrun");
    // After the README's lines: keep the installed binary, and clean up the install root.
    lines.push(format!(
        "cp \"$root/bin/provrun\" '{}' && rm -rf \"$root\"",
        binary.display()
    ));
    let output = Shim::new().run(&lines)?;
    for expected in [
        concat!("provrun ", env!("CARGO_PKG_VERSION")),
        "Ran one command in the sandbox.",
    ] {
        if !output.contains(expected) {
            return Err(format!(
                "`{expected}` not in the install block's output:\n{output}"
            ));
        }
    }
    lone_binary_runs_confined(&binary)
}

/// Whether bubblewrap can build a sandbox here (else full confinement cannot be expected).
fn bwrap_usable() -> bool {
    Command::new("bwrap")
        .args([
            "--unshare-all",
            "--unshare-user",
            "--ro-bind",
            "/",
            "/",
            "true",
        ])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn lone_binary_runs_confined(binary: &Path) -> Result<(), String> {
    let names: Vec<_> = std::fs::read_dir(binary.parent().unwrap())
        .map_err(|e| e.to_string())?
        .flatten()
        .map(|e| e.file_name())
        .collect();
    if names != [std::ffi::OsString::from("provrun")] {
        return Err(format!("the folder holds more than the binary: {names:?}"));
    }
    let work = tempfile::tempdir().map_err(|e| e.to_string())?;
    let bundle = work.path().join("bundle");
    // No environment but a PATH (for bwrap): no PROVRUN_* variable, no helper anywhere
    // but inside the binary itself. Run from a folder unrelated to the checkout.
    let out = Command::new(binary)
        .arg("run")
        .arg(root().join("examples/command/agent.toml"))
        .arg("--out")
        .arg(&bundle)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .current_dir(work.path())
        .output()
        .map_err(|e| format!("the lone binary does not start: {e}"))?;
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if !out.status.success() {
        return Err(format!("the lone binary's run failed: {said}"));
    }
    let log = std::fs::read_to_string(bundle.join("events.jsonl")).map_err(|e| e.to_string())?;
    let first: serde_json::Value = log
        .lines()
        .next()
        .and_then(|l| serde_json::from_str(l).ok())
        .ok_or("the bundle's first event is not JSON")?;
    let confinement = &first["payload"]["details"]["sandbox"]["command_confinement"];
    let degraded = confinement["degraded"]
        .as_array()
        .ok_or(format!("no command_confinement in run_started: {first}"))?;
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    if !bwrap_usable() && !ci {
        eprintln!(
            "\n*** SKIPPED: the lone binary's full confinement is not checked: bubblewrap cannot \
             build a sandbox on this machine (missing: {degraded:?}; CI=true fails here).\n"
        );
        return Ok(());
    }
    if !degraded.is_empty() {
        return Err(format!(
            "the lone binary is not fully confined; missing layers: {confinement}"
        ));
    }
    // What the command saw: the helper's seccomp filter and no-new-privileges, no
    // capabilities; and its file in /output.
    for seen in [
        r"Seccomp:\t2",
        r"NoNewPrivs:\t1",
        r"CapEff:\t0000000000000000",
    ] {
        if !log.contains(seen) {
            return Err(format!(
                "`{seen}` not in the confined command's output:\n{log}"
            ));
        }
    }
    match std::fs::read_to_string(bundle.join("output/proof.txt")) {
        Ok(text) if text == "confined\n" => Ok(()),
        other => Err(format!(
            "/output/proof.txt is not what the command wrote: {other:?}"
        )),
    }
}

fn tour_commands(readme: &Readme) -> Result<(), String> {
    let block = readme.block("A tour of the CLI")?;
    let mut lines = Vec::new();
    for line in &block.lines {
        if line.trim().is_empty() {
            continue;
        }
        if line.starts_with("provrun() {") {
            // The user's way to get `provrun`; the shim stands in for it.
            if !line.contains(CARGO_RUN) {
                return Err(format!("the provrun function does not use `{CARGO_RUN}`"));
            }
            continue;
        }
        lines.push(line.clone());
    }
    if !lines.iter().any(|l| l.contains("examples/approve")) {
        return Err("the tour no longer shows a paused run".into());
    }
    let output = Shim::new().run(&lines)?;
    for expected in [
        "Wrote /output/summary.md",
        "bundle verifies: all",
        "\"ok\":true,\"complete\":true",
        "step 3",
        "replay matches: 3 tool calls and 2 output files",
        "provrun: the run paused",
        "exit code 4",
        "Wrote /output/hello.txt.",
        "end     finished",
        "page written to",
        "write_file",
    ] {
        if !output.contains(expected) {
            return Err(format!("`{expected}` not in the tour's output:\n{output}"));
        }
    }
    Ok(())
}

/// The trace import example: a committed PydanticAI history becomes a bundle that
/// verifies, and `verify` says which events are only parsed.
fn import_commands(readme: &Readme) -> Result<(), String> {
    let block = readme.block("Keep runs made by other agent loops")?;
    let lines: Vec<String> = block
        .lines
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.replace(CARGO_RUN, "provrun"))
        .collect();
    let output = Shim::new().run(&lines)?;
    for expected in ["imported 4 message(s)", "bundle verifies: all", "parsed"] {
        if !output.contains(expected) {
            return Err(format!(
                "`{expected}` not in the import example's output:\n{output}"
            ));
        }
    }
    Ok(())
}

fn blocks_accounted_for(readme: &Readme) -> Result<(), String> {
    for b in &readme.blocks {
        let known = [
            "Set up on a fresh machine",
            "Install",
            "A tour of the CLI",
            "Keep runs made by other agent loops",
        ]
        .contains(&b.section.as_str());
        if !known && !b.skip {
            return Err(format!(
                "a ```sh block under `{}` is neither run by this test nor marked \
                 `<!-- readme-test: skip (why) -->`",
                b.section
            ));
        }
    }
    Ok(())
}

//! What a CLI user expects beyond the commands: shell completions, man pages, `--version`
//! with the commit, and a JSON Schema of agent.toml that the shipped examples satisfy.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::support::cli::provrun;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn ok_stdout(args: &[&str]) -> String {
    let out = provrun(args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn completions_cover_every_command_and_flag() {
    for shell in ["bash", "zsh", "fish"] {
        let script = ok_stdout(&["completions", shell]);
        for word in [
            "keygen",
            "sign",
            "verify",
            "sign-key",
            "tools-dir",
            "schema",
        ] {
            assert!(script.contains(word), "{shell} completion lacks {word}");
        }
    }
    // The bash script is valid bash.
    let script = ok_stdout(&["completions", "bash"]);
    let checked = Command::new("bash")
        .args(["-n", "-c", &script])
        .output()
        .unwrap();
    assert!(
        checked.status.success(),
        "{}",
        String::from_utf8_lossy(&checked.stderr)
    );
    assert_eq!(
        provrun(&["completions", "tcsh-9000"]).status.code(),
        Some(2)
    );
}

#[test]
fn man_pages_are_written_for_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("man");
    ok_stdout(&["man", "--out-dir", &out.display().to_string()]);
    let main = std::fs::read_to_string(out.join("provrun.1")).unwrap();
    assert!(main.contains(".TH provrun 1"), "{main}");
    for command in [
        "run", "verify", "replay", "show", "view", "tools", "resume", "keygen", "sign",
    ] {
        let page = std::fs::read_to_string(out.join(format!("provrun-{command}.1")))
            .unwrap_or_else(|e| panic!("no page for {command}: {e}"));
        assert!(
            page.contains(&format!(".TH provrun-{command} 1")),
            "{command}: {page}"
        );
        assert!(main.contains(command), "provrun.1 does not list {command}");
    }
    let run = std::fs::read_to_string(out.join("provrun-run.1")).unwrap();
    assert!(run.contains("sign\\-key"), "{run}");
}

#[test]
fn version_names_the_commit_it_was_built_from() {
    let text = ok_stdout(&["--version"]);
    assert!(
        text.starts_with(concat!("provrun ", env!("CARGO_PKG_VERSION"))),
        "{text}"
    );
    // In a checkout that tracks the CLI crate, the commit is there; from a tarball it is not.
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .filter(|s| !s.is_empty())
    };
    let pinned = std::env::var_os("PROVRUN_BUILD_COMMIT").is_some();
    match (git(&["ls-files", "build.rs"]), git(&["rev-parse", "HEAD"])) {
        (Some(_), Some(_)) if !pinned => {
            // `provrun 0.1.0 (commit abcdef012345)`: a real commit of this repository, and
            // HEAD or one before it (HEAD may move between the build and this test).
            let commit = text
                .trim()
                .strip_prefix(concat!("provrun ", env!("CARGO_PKG_VERSION"), " (commit "))
                .and_then(|rest| rest.strip_suffix(')'))
                .unwrap_or_else(|| panic!("no commit in {text:?}"));
            assert_eq!(commit.len(), 12, "{text}");
            assert!(
                Command::new("git")
                    .args(["merge-base", "--is-ancestor", commit, "HEAD"])
                    .current_dir(env!("CARGO_MANIFEST_DIR"))
                    .status()
                    .is_ok_and(|s| s.success()),
                "{commit} is not a commit of this checkout's history"
            );
        }
        _ if pinned => assert!(text.contains("(commit "), "{text}"),
        // A tarball: the version alone.
        _ => assert_eq!(
            text.trim(),
            concat!("provrun ", env!("CARGO_PKG_VERSION")),
            "{text}"
        ),
    }
}

/// The schema, compiled by an independent JSON Schema validator (boon).
fn agent_schema() -> (boon::Schemas, boon::SchemaIndex) {
    let schema: Value = serde_json::from_str(&ok_stdout(&["schema", "agent"])).unwrap();
    assert_eq!(
        schema["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    let mut compiler = boon::Compiler::new();
    compiler
        .add_resource("urn:provrun:agent", schema)
        .expect("the schema loads");
    let mut schemas = boon::Schemas::new();
    let index = compiler
        .compile("urn:provrun:agent", &mut schemas)
        .expect("the schema compiles");
    (schemas, index)
}

fn toml_as_json(text: &str) -> Value {
    let table: toml::Table = text.parse().expect("TOML");
    serde_json::to_value(table).unwrap()
}

#[test]
fn the_shipped_agent_specs_validate_against_the_schema() {
    let (schemas, index) = agent_schema();
    let mut checked = Vec::new();
    for entry in std::fs::read_dir(root().join("examples"))
        .unwrap()
        .flatten()
    {
        let spec = entry.path().join("agent.toml");
        if !spec.is_file() {
            continue;
        }
        let value = toml_as_json(&std::fs::read_to_string(&spec).unwrap());
        if let Err(e) = schemas.validate(&value, index) {
            panic!("{} does not validate: {e:#}", spec.display());
        }
        checked.push(entry.file_name());
    }
    assert!(checked.len() >= 5, "only {checked:?} checked");

    // What the loader refuses, the schema refuses too.
    for bad in [
        "name = \"x\"\nmodel = \"test\"\ncolour = \"blue\"\n",
        "name = \"x\"\nmodel = \"test\"\napprove = \"sometimes\"\n",
        "name = \"x\"\nmodel = \"test\"\nmax_steps = -1\n",
        "name = \"x\"\nmodel = \"test\"\n[limits]\nmax_read_byte = 1\n",
        "model = \"test\"\n",
    ] {
        assert!(
            schemas.validate(&toml_as_json(bad), index).is_err(),
            "the schema accepts {bad:?}"
        );
        assert!(
            provrun_agent_refuses(bad),
            "the loader accepts {bad:?} (schema and loader disagree)"
        );
    }
}

/// Whether `provrun run` refuses this spec text as a spec error (exit 2).
fn provrun_agent_refuses(text: &str) -> bool {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("agent.toml");
    std::fs::write(&spec, text).unwrap();
    let out = provrun(&[
        "run",
        &spec.display().to_string(),
        "--out",
        &dir.path().join("b").display().to_string(),
    ]);
    out.status.code() == Some(2)
}

/// Started as `provrun-confine` (what the sandbox does, inside bubblewrap or directly when
/// bubblewrap is missing), the `provrun` binary is the confinement helper: it confines
/// itself, then runs the command. Under its own name the same arguments are a usage error.
#[test]
fn the_binary_is_its_own_confinement_helper_by_argv0() {
    use std::os::unix::process::CommandExt as _;
    let helper = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_provrun"))
            .arg0("provrun-confine")
            .args(args)
            .env_clear()
            .output()
            .unwrap()
    };
    let out = helper(&["--probe", "--ro", "/usr"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        text.starts_with("landlock=") && text.contains(" seccomp="),
        "{text}"
    );

    let mut args = vec!["--require", "seccomp"];
    for dir in ["/usr", "/bin", "/lib", "/lib64", "/etc", "/proc"] {
        if Path::new(dir).exists() {
            args.extend(["--ro", dir]);
        }
    }
    args.extend([
        "--",
        "/bin/sh",
        "-c",
        "grep -E '^(Seccomp|NoNewPrivs):' /proc/self/status",
    ]);
    let out = helper(&args);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        text.contains("Seccomp:\t2") && text.contains("NoNewPrivs:\t1"),
        "{text}"
    );

    // Bad helper arguments: the helper's own exit status, not the CLI's usage error.
    assert_eq!(helper(&["--limit", "x"]).status.code(), Some(127));
    let out = provrun(&["--probe"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}

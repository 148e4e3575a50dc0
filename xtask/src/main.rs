//! Project automation for provrun: `cargo xtask ci | setup | tidy | man | python | bench | fuzz | soak`.
//!
//! `ci` is what CI runs (through `.ci/run`) and what the README's test command is: the
//! tidy check, `cargo fmt --check`, clippy with warnings denied, `cargo deny check bans
//! licenses sources` (deny.toml; installed under CI=true when missing), the whole test
//! suite (from a copy of the tree with nothing beside it: `standalone.rs`), the Python
//! package's pytest suite (`python.rs`), and the docs
//! built with warnings denied. Each step prints its command before it runs and
//! the first failing step stops the run with a non-zero exit.

mod bench;
mod phoenix;
mod python;
mod semver;
mod setup;
mod standalone;

mod fuzz;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (task, rest) = match args.split_first() {
        Some((task, rest)) => (task.as_str(), rest),
        None => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let result = match task {
        "ci" => ci(),
        "setup" => setup_all(),
        "tidy" => tidy(),
        "deny" => deny(),
        "semver" => semver::semver(),
        "man" => man(rest),
        "bench" => bench::bench(rest),
        "python" => python::python(rest),
        "fuzz" => fuzz::fuzz(rest),
        "soak" => fuzz::soak(rest),
        "-h" | "--help" | "help" => {
            println!("{USAGE}");
            Ok(())
        }
        other => Err(format!("unknown task `{other}`\n{USAGE}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: {message}");
            ExitCode::FAILURE
        }
    }
}

const USAGE: &str = "usage: cargo xtask <task>
tasks:
  ci      tidy + fmt --check + clippy -D warnings (workspace and light builds) + cargo deny + semver-checks + tests + docs (what CI runs)
  setup   install the real programs the tests use (as `ci` does under CI=true), and run nothing
  tidy    check that every .rs file opens with a //! comment and no tracked file refers outside the repository
  deny    cargo deny check bans licenses sources (deny.toml; skipped with a warning if not installed)
  semver  cargo semver-checks: the public API against the last landed main (xtask/semver-baseline)
  man     write the man pages (provrun.1, provrun-COMMAND.1) [--out-dir DIR] (default target/man)
  python  build the Python package (dev wheel) and run its pytest suite [PYTEST ARGS…]
  bench   run the benchmark scenarios [--quick] [--json] [--peer] [--repeat N] [SCENARIO…]
  fuzz    run cargo-fuzz targets: (TARGET | --all) [--seconds N] (CI: --all --seconds 20)
  soak    the long reliability mode: many SIGKILLs, faults, then every fuzz target longer";

fn root() -> PathBuf {
    // xtask lives one level below the workspace root. `cargo xtask` (cargo run) says where
    // it is at run time; the path compiled in is only a fallback, since a build copied
    // from another clone's target folder would point at that clone.
    let manifest_dir = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    manifest_dir
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

fn cargo() -> Command {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string()));
    cmd.current_dir(root());
    cmd
}

fn run(step: &str, mut cmd: Command) -> Result<(), String> {
    let shown = format!("{cmd:?}");
    println!("\n==> {step}: {shown}");
    let started = Instant::now();
    let status = cmd
        .status()
        .map_err(|e| format!("{step}: could not start {shown}: {e}"))?;
    println!(
        "<== {step}: {} in {:.1}s",
        if status.success() { "ok" } else { "FAILED" },
        started.elapsed().as_secs_f64()
    );
    if status.success() {
        Ok(())
    } else {
        Err(format!("{step} failed ({status})"))
    }
}

/// The machine set-up `ci` does before the tests, in the same order, and nothing else: a
/// developer runs it once (with `CI=true` to install what is missing) and then tests
/// narrowly with `cargo nextest` or `cargo test -p`.
fn setup_all() -> Result<(), String> {
    setup::confinement()?; // bubblewrap for the run_command confinement tests
    setup::python()?; // python3 + venv for the DSSE interop and Kubernetes manifest tests
    setup::browser()?; // chromium for the `provrun view` browser tests
    setup::node()?; // node and npm for the published npm MCP server test
    setup::wrapped_programs()?; // the Codex CLI and Claude Code for the provrun wrap tests
    setup::wrap_sdks()?; // the OpenAI and Anthropic Python SDKs for the provrun wrap tests
    setup::agui()?; // @ag-ui/client and ag-ui-validate for the `provrun serve` tests
    setup::inspect()?; // inspect-ai for the `provrun export inspect` round trip
    setup::prometheus()?; // prometheus-client's parser for the `provrun serve` /metrics test
    phoenix::phoenix()?; // Arize Phoenix, the OpenTelemetry backend of the otel_live test
    python::python_suite()?; // pydantic-ai-slim, maturin, pytest for `cargo xtask python`
    setup::go()?; // go and golang.org/x/mod for the ledger's second implementation
    println!("\nxtask setup: the programs the tests use are installed");
    Ok(())
}

fn ci() -> Result<(), String> {
    tidy()?;
    let mut fmt = cargo();
    fmt.args(["fmt", "--all", "--", "--check"]);
    run("fmt", fmt)?;
    let mut clippy = cargo();
    clippy.args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--locked",
        "--",
        "-D",
        "warnings",
    ]);
    run("clippy", clippy)?;
    // The light builds users pick (an offline agent through the facade, a crate of plain
    // `#[tool]` functions, the sandbox without confinement) are other feature sets than
    // the workspace build: lint them too, or a cfg'd-out module can rot unseen.
    let mut light = cargo();
    light.args([
        "clippy",
        "--locked",
        "-p",
        "provrun",
        "-p",
        "provrun-sandbox",
        "-p",
        "provrun-tools",
        "--no-default-features",
        "--features",
        "provrun/agent",
        "--",
        "-D",
        "warnings",
    ]);
    run("clippy (light builds)", light)?;
    // The fuzz targets are a workspace of their own, so the lint above never sees them; a
    // payload that gains a field breaks them only when the fuzz step builds, at the end of
    // CI. Lint them here, early, on the stable toolchain and the main target directory.
    let mut fuzz = cargo();
    fuzz.args([
        "clippy",
        "--manifest-path",
        "fuzz/Cargo.toml",
        "--bins",
        "--locked",
        "--",
        "-D",
        "warnings",
    ]);
    if std::env::var_os("CARGO_TARGET_DIR").is_none() {
        fuzz.env("CARGO_TARGET_DIR", root().join("target"));
    }
    run("clippy (fuzz targets)", fuzz)?;
    deny()?;
    // cargo-semver-checks builds from source under CI (minutes of CPU): build it while the
    // set-up below mostly waits on downloads, and use it at the end.
    let semver_tool = std::thread::spawn(semver::install);
    setup_all()?; // the real programs the tests use (setup.rs says which test needs what)
    // The tests run from a copy of the tree with no sibling folders (standalone.rs), so
    // one that reads a file outside the repository fails here, not on a user's clone.
    let mut test = cargo();
    test.args(["test", "--workspace", "--locked"]);
    if let Some(copy) = standalone::prepare(&root())? {
        if std::env::var_os("CARGO_TARGET_DIR").is_none() {
            test.env("CARGO_TARGET_DIR", root().join("target"));
        }
        test.current_dir(copy);
    }
    run("test", test)?;
    // The Python package: its wheel built and its pytest suite run against real
    // PydanticAI (python.rs); the packages come from a cache outside the clone.
    python::after_tests()?;
    let mut doc = cargo();
    doc.args(["doc", "--workspace", "--no-deps", "--locked"])
        .env("RUSTDOCFLAGS", "-D warnings");
    run("doc", doc)?;
    // Last, because it reuses what clippy and `cargo doc` checked (semver.rs).
    let installed = semver_tool
        .join()
        .unwrap_or_else(|_| Err("semver: installing cargo-semver-checks panicked".into()));
    semver::semver_when(installed)?;
    println!("\nxtask ci: all steps passed");
    Ok(())
}

/// `cargo xtask deny`: licences, sources and bans (duplicate versions warn) per
/// deny.toml, when cargo-deny is installed (under CI=true it is installed if missing).
/// Not advisories: their database comes from GitHub, which CI cannot reach.
fn deny() -> Result<(), String> {
    if setup::cargo_deny()? {
        let mut deny = cargo();
        deny.args(["deny", "--locked", "check", "bans", "licenses", "sources"]);
        run("deny", deny)?;
    }
    Ok(())
}

/// `cargo xtask man [--out-dir DIR]`: the man pages, generated with clap_mangen from the
/// CLI's own command definition (by the hidden `provrun man`, tested in
/// crates/cli/tests/it/conventions.rs).
fn man(args: &[String]) -> Result<(), String> {
    let out = match args {
        [] => root().join("target/man"),
        [flag, dir] if flag == "--out-dir" => PathBuf::from(dir),
        _ => return Err(format!("man: unexpected arguments {args:?}\n{USAGE}")),
    };
    let mut cmd = cargo();
    cmd.args([
        "run",
        "-q",
        "--locked",
        "-p",
        "provrun-cli",
        "--",
        "man",
        "--out-dir",
    ])
    .arg(&out);
    run("man", cmd)?;
    println!(
        "install with: cp {}/*.1 /usr/local/share/man/man1/",
        out.display()
    );
    Ok(())
}

/// Folders whose `.rs` files are ours to check.
const SOURCE_DIRS: &[&str] = &["crates", "xtask", "tests", "examples", "fuzz"];

fn tidy() -> Result<(), String> {
    println!("==> tidy: every .rs file opens with a //! comment");
    let root = root();
    let mut files = Vec::new();
    for dir in SOURCE_DIRS {
        collect_rs(&root.join(dir), &mut files);
    }
    files.sort();
    let mut bad = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
        if !text.trim_start_matches('\u{feff}').starts_with("//!") {
            bad.push(
                file.strip_prefix(&root)
                    .unwrap_or(file)
                    .display()
                    .to_string(),
            );
        }
    }
    if !bad.is_empty() {
        return Err(format!(
            "tidy: these files do not open with a //! comment saying what they are for:\n  {}",
            bad.join("\n  ")
        ));
    }
    println!("<== tidy: ok ({} files)", files.len());
    outside_references(&root)?;
    map_paths(&root)
}

/// docs/architecture.md is the map of the code, and its two companion pages say where
/// features and tests are: every path they name in backticks must exist, so a move that
/// forgets a map fails here.
fn map_paths(root: &Path) -> Result<(), String> {
    for map in [
        "docs/architecture.md",
        "docs/features.md",
        "docs/testing.md",
    ] {
        map_paths_of(root, map)?;
    }
    Ok(())
}

/// The check of [`map_paths`] for one page. Under a crate's heading
/// (`### name — `crates/x``), `src/…` and `tests/…` are that crate's.
fn map_paths_of(root: &Path, map: &str) -> Result<(), String> {
    const ROOTS: &[&str] = &[
        "crates/",
        "tests/",
        "docs/",
        "xtask/",
        "examples/",
        "fuzz/",
        "src/",
        ".ci/",
    ];
    println!("==> tidy: every path {map} names exists");
    let text = std::fs::read_to_string(root.join(map)).map_err(|e| format!("{map}: {e}"))?;
    let mut base: Option<PathBuf> = None;
    let mut missing = Vec::new();
    let mut checked = 0usize;
    for (number, line) in text.lines().enumerate() {
        if line.starts_with('#') {
            // A crate's section names its folder last on the heading line.
            base = line
                .rsplit('`')
                .nth(1)
                .filter(|dir| dir.starts_with("crates/"))
                .map(|dir| root.join(dir));
        }
        for (i, span) in line.split('`').enumerate() {
            let is_path = i % 2 == 1
                && ROOTS.iter().any(|r| span.starts_with(r))
                && span
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-/".contains(c));
            if !is_path || line.starts_with('#') {
                continue;
            }
            let path = match &base {
                Some(dir) if span.starts_with("src/") || span.starts_with("tests/") => {
                    dir.join(span)
                }
                _ => root.join(span),
            };
            checked += 1;
            if !path.exists() {
                missing.push(format!("{map}:{}: `{span}`", number + 1));
            }
        }
    }
    if missing.is_empty() {
        println!("<== tidy: ok ({checked} paths)");
        Ok(())
    } else {
        Err(format!(
            "tidy: the map names paths that do not exist (moved or renamed?):\n  {}",
            missing.join("\n  ")
        ))
    }
}

/// The repository stands alone: no tracked file may point a reader or a test at a folder
/// beside the checkout (the needle is built in two parts so this file does not hold it).
fn outside_references(root: &Path) -> Result<(), String> {
    let needle = format!("{}/shared", "..");
    println!("==> tidy: no tracked file refers to `{needle}`");
    let Ok(out) = Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(root)
        .output()
    else {
        println!("<== tidy: skipped (git is not available)");
        return Ok(());
    };
    if !out.status.success() {
        println!("<== tidy: skipped (not a git checkout)");
        return Ok(());
    }
    let mut hits = Vec::new();
    let mut checked = 0usize;
    for rel in out.stdout.split(|b| *b == 0).filter(|p| !p.is_empty()) {
        let rel = String::from_utf8_lossy(rel).into_owned();
        // Binary and missing files (deleted, not yet staged) have nothing to say.
        let Ok(text) = std::fs::read_to_string(root.join(&rel)) else {
            continue;
        };
        checked += 1;
        if let Some(line) = text.lines().position(|l| l.contains(&needle)) {
            hits.push(format!("{rel}:{}", line + 1));
        }
    }
    if hits.is_empty() {
        println!("<== tidy: ok ({checked} text files)");
        Ok(())
    } else {
        Err(format!(
            "tidy: these files refer to `{needle}`, outside the repository; keep what the \
             tests and docs need inside it:\n  {}",
            hits.join("\n  ")
        ))
    }
}

fn collect_rs(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            if name == "target" || name.starts_with("target-") || name.starts_with('.') {
                continue;
            }
            collect_rs(&path, out);
        } else if kind.is_file() && name.ends_with(".rs") {
            out.push(path);
        }
    }
}

//! Machine set-up for `cargo xtask ci`: make sure bubblewrap is there for the command
//! confinement tests, Python with `venv` for the tests that make their own virtualenv
//! from PyPI (the DSSE and statement interoperability tests,
//! crates/cli/tests/it/dsse_interop.rs, the Kubernetes manifest test,
//! crates/cli/tests/it/kubernetes.rs, and the PydanticAI trace import test,
//! crates/cli/tests/it/import_pydantic_ai.rs, and the published PyPI MCP server of
//! crates/cli/tests/it/mcp_published.rs), Node.js with npm for the published npm
//! MCP server of that test and for the agent programs `provrun wrap` is tested around
//! (`@openai/codex`, `@anthropic-ai/claude-code`, and the OpenAI and Anthropic Python
//! SDKs from PyPI), Debian's `chromium` for the `provrun
//! view` browser tests (tests/tests/it/view_browser.rs), the official AG-UI client
//! (`@ag-ui/client`, npm) and validator (`ag-ui-validate`, PyPI) for the `provrun serve`
//! tests (crates/cli/tests/it/serve/agui.rs), `inspect-ai` for the Inspect export test
//! (crates/cli/tests/it/inspect_interop.rs), `prometheus-client` for the `provrun serve`
//! `/metrics` test (crates/cli/tests/it/serve/metrics.rs), the pinned packages of the Python package's
//! suite (python/tests/requirements.txt; xtask/src/python.rs), and Go with Debian's
//! `golang.org/x/mod` sources for the ledger's second implementation
//! (tests/interop/ledger_check.go, built by crates/ledger/tests/it/go_interop.rs and
//! crates/cli/tests/it/ledger.rs); the npm and PyPI packages are installed once into a
//! cache outside the clone.
//!
//! - `bwrap` present and able to build a sandbox: nothing to do.
//! - Missing, and we are root with `apt-get`: install the `bubblewrap` package.
//! - Still not usable: under CI (`CI=true`) that is a failure, since the confinement tests
//!   must run for real there; elsewhere the tests run and skip themselves, and this prints
//!   a loud warning saying so.

use std::process::{Command, Stdio};

/// Whether `bwrap` can create the namespaces the command sandbox uses.
fn bwrap_works() -> Result<(), String> {
    let out = Command::new("bwrap")
        .args([
            "--unshare-all",
            "--unshare-user",
            "--die-with-parent",
            "--ro-bind",
            "/",
            "/",
            "true",
        ])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("`bwrap` could not be started: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`bwrap` cannot create namespaces here ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

fn have(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn apt_install_packages(packages: &str) -> Result<(), String> {
    println!(
        "\n==> setup: installing {packages} (apt-get update && apt-get install -y {packages})"
    );
    let status = Command::new("sh")
        .args([
            "-c",
            &format!(
                "apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q {packages}"
            ),
        ])
        .status()
        .map_err(|e| format!("apt-get could not be started: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("apt-get install {packages} failed ({status})"))
    }
}

fn apt_install() -> Result<(), String> {
    apt_install_packages("bubblewrap")
}

/// Whether `python3` can make a virtualenv with pip in it.
fn python_venv_works() -> Result<(), String> {
    let out = Command::new("python3")
        .args(["-c", "import venv, ensurepip"])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("`python3` could not be started: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`python3` has no venv/ensurepip: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Makes sure the Python tests (DSSE interoperability, Kubernetes manifest, PydanticAI import) can make their
/// virtualenvs: under CI, installs
/// python3 and python3-venv with apt-get when they are missing, and fails if it cannot.
/// Elsewhere the test skips itself loudly when Python is missing.
pub(crate) fn python() -> Result<(), String> {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    let problem = match python_venv_works() {
        Ok(()) => {
            println!(
                "\n==> setup: python3 with venv works; the DSSE interop, Kubernetes and PydanticAI import tests run for real"
            );
            return Ok(());
        }
        Err(e) => e,
    };
    if ci && is_root() && have("apt-get") {
        return apt_install_packages("python3 python3-venv")
            .and_then(|()| python_venv_works())
            .map(|()| println!("==> setup: python3 and python3-venv installed"))
            .map_err(|e| format!("setup: CI must run the Python interop tests, but {e}"));
    }
    if ci {
        return Err(format!(
            "setup: CI must run the Python interop tests, but {problem} (and apt-get as root is not available)"
        ));
    }
    eprintln!(
        "\n==> setup: WARNING: {problem}; the DSSE interop, Kubernetes and PydanticAI import tests will SKIP themselves (CI=true fails here)"
    );
    Ok(())
}

/// Whether `node` and `npm` both start and print their versions.
fn node_works() -> Result<(), String> {
    for program in ["node", "npm"] {
        let out = Command::new(program)
            .arg("--version")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("`{program}` could not be started: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "`{program} --version` failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
    }
    Ok(())
}

/// Makes sure the published npm MCP server test (crates/cli/tests/it/mcp_published.rs) can
/// install its pinned package with npm: under CI, installs Debian's `nodejs` and `npm`
/// with apt-get when they are missing, and fails if it cannot. Elsewhere the test skips
/// itself loudly when they are missing.
pub(crate) fn node() -> Result<(), String> {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    let problem = match node_works() {
        Ok(()) => {
            println!(
                "\n==> setup: node and npm work; the published npm MCP server test runs for real"
            );
            return Ok(());
        }
        Err(e) => e,
    };
    if ci && is_root() && have("apt-get") {
        return apt_install_packages("nodejs npm")
            .and_then(|()| node_works())
            .map(|()| println!("==> setup: nodejs and npm installed"))
            .map_err(|e| format!("setup: CI must run the published npm MCP server test, but {e}"));
    }
    if ci {
        return Err(format!(
            "setup: CI must run the published npm MCP server test, but {problem} (and apt-get as root is not available)"
        ));
    }
    eprintln!(
        "\n==> setup: WARNING: {problem}; the published npm MCP server test will SKIP itself (CI=true fails here)"
    );
    Ok(())
}

/// Where Debian's `golang-golang-x-mod-dev` puts the sources the Go ledger checker imports.
const GO_MOD_SOURCES: &str = "/usr/share/gocode/src/golang.org/x/mod/sumdb/tlog";

/// Whether `go` starts and Debian's `golang.org/x/mod` sources are there.
fn go_works() -> Result<(), String> {
    let out = Command::new("go")
        .arg("version")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("`go` could not be started: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "`go version` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    if !std::path::Path::new(GO_MOD_SOURCES).is_dir() {
        return Err(format!("{GO_MOD_SOURCES} is missing"));
    }
    Ok(())
}

/// The official AG-UI client the `provrun serve` tests drive the server with, pinned.
pub(crate) const AGUI_CLIENT: &str = "@ag-ui/client@1.0.0";
/// The AG-UI stream validator those tests check the captured streams with, pinned.
pub(crate) const AGUI_VALIDATE: &str = "ag-ui-validate==0.4.0";

/// Where programs the tests need are installed once, outside the clone, by pinned
/// version: `$PROVRUN_CI_CACHE`, else `~/.cache/provrun-ci`.
pub(crate) fn ci_cache() -> std::path::PathBuf {
    std::env::var_os("PROVRUN_CI_CACHE")
        .map(std::path::PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| std::path::Path::new(&h).join(".cache/provrun-ci"))
        })
        .unwrap_or_else(|| std::path::PathBuf::from("/var/cache/provrun-ci"))
}

/// Install the pinned AG-UI client (npm) and validator (a PyPI virtualenv) into the cache
/// when missing; the tests find them there (`ag-ui-client-1.0.0/node_modules`,
/// `ag-ui-validate-0.4.0/bin/ag-ui-validate`).
fn agui_install() -> Result<(), String> {
    let cache = ci_cache();
    let prefix = cache.join("ag-ui-client-1.0.0");
    if !prefix
        .join("node_modules/@ag-ui/client/package.json")
        .is_file()
    {
        std::fs::create_dir_all(&prefix).map_err(|e| format!("{}: {e}", prefix.display()))?;
        let mut npm = Command::new("npm");
        npm.args(["install", "--no-audit", "--no-fund", "--prefix"])
            .arg(&prefix)
            .arg(AGUI_CLIENT);
        crate::run("setup: install the AG-UI client", npm)?;
    }
    let venv = cache.join("ag-ui-validate-0.4.0");
    if !venv.join("bin/ag-ui-validate").is_file() {
        let mut make = Command::new("python3");
        make.args(["-m", "venv", "--clear"]).arg(&venv);
        crate::run("setup: make the ag-ui-validate virtualenv", make)?;
        let mut pip = Command::new(venv.join("bin/pip"));
        pip.args([
            "install",
            "--quiet",
            "--disable-pip-version-check",
            AGUI_VALIDATE,
        ]);
        crate::run("setup: install ag-ui-validate", pip)?;
    }
    Ok(())
}

/// Makes sure the ledger's Go interoperability tests can build their checker offline:
/// under CI, installs Debian's `golang-go` and `golang-golang-x-mod-dev` with apt-get when
/// they are missing, and fails if it cannot. Elsewhere the tests skip themselves loudly.
pub(crate) fn go() -> Result<(), String> {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    let problem = match go_works() {
        Ok(()) => {
            println!(
                "\n==> setup: go and golang.org/x/mod work; the ledger's Go interop tests run for real"
            );
            return Ok(());
        }
        Err(e) => e,
    };
    if ci && is_root() && have("apt-get") {
        return apt_install_packages("golang-go golang-golang-x-mod-dev")
            .and_then(|()| go_works())
            .map(|()| println!("==> setup: golang-go and golang-golang-x-mod-dev installed"))
            .map_err(|e| format!("setup: CI must run the ledger's Go interop tests, but {e}"));
    }
    if ci {
        return Err(format!(
            "setup: CI must run the ledger's Go interop tests, but {problem} (and apt-get as root is not available)"
        ));
    }
    eprintln!(
        "\n==> setup: WARNING: {problem}; the ledger's Go interop tests will SKIP themselves (CI=true fails here)"
    );
    Ok(())
}

/// Makes sure the `provrun serve` tests find the official AG-UI client and validator:
/// installed into the cache when missing (node, npm and python3 are set up before). Under
/// CI a failed install fails; elsewhere the tests install them themselves or skip loudly.
pub(crate) fn agui() -> Result<(), String> {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    match agui_install() {
        Ok(()) => {
            println!(
                "\n==> setup: {AGUI_CLIENT} and {AGUI_VALIDATE} are in {}; the `provrun serve` client tests run for real",
                ci_cache().display()
            );
            Ok(())
        }
        Err(e) if ci => Err(format!(
            "setup: CI must run the `provrun serve` client tests, but {e}"
        )),
        Err(e) => {
            eprintln!(
                "\n==> setup: WARNING: {e}; the `provrun serve` client tests will try again or SKIP themselves (CI=true fails here)"
            );
            Ok(())
        }
    }
}

/// Whether headless `chromium` and `chromedriver` start and print their versions.
fn chromium_works() -> Result<(), String> {
    // chromedriver (Debian's `chromium-driver`) drives the `provrun serve` browser example.
    for program in ["chromium", "chromedriver"] {
        let out = Command::new(program)
            .arg("--version")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("`{program}` could not be started: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "`{program} --version` failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
    }
    Ok(())
}

/// Makes sure the `provrun view` and `provrun serve` browser tests can load their pages:
/// under CI, installs Debian's `chromium` and `chromium-driver` with apt-get when missing, and fails if it cannot. Elsewhere
/// the tests skip themselves loudly when it is missing.
pub(crate) fn browser() -> Result<(), String> {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    let problem = match chromium_works() {
        Ok(()) => {
            println!("\n==> setup: chromium works; the `provrun view` browser tests run for real");
            return Ok(());
        }
        Err(e) => e,
    };
    if ci && is_root() && have("apt-get") {
        return apt_install_packages("chromium chromium-driver")
            .and_then(|()| chromium_works())
            .map(|()| println!("==> setup: chromium installed"))
            .map_err(|e| format!("setup: CI must run the `provrun view` browser tests, but {e}"));
    }
    if ci {
        return Err(format!(
            "setup: CI must run the `provrun view` browser tests, but {problem} (and apt-get as root is not available)"
        ));
    }
    eprintln!(
        "\n==> setup: WARNING: {problem}; the `provrun view` browser tests will SKIP themselves (CI=true fails here)"
    );
    Ok(())
}

/// Makes sure the command confinement tests can run; see the module docs.
pub(crate) fn confinement() -> Result<(), String> {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    let mut problem = match bwrap_works() {
        Ok(()) => {
            println!("\n==> setup: bubblewrap works; the confinement tests run for real");
            return Ok(());
        }
        Err(e) => e,
    };
    if !have("bwrap") {
        if is_root() && have("apt-get") {
            match apt_install().and_then(|()| bwrap_works()) {
                Ok(()) => {
                    println!("==> setup: bubblewrap installed and working");
                    return Ok(());
                }
                Err(e) => problem = e,
            }
        } else {
            problem = "`bwrap` is not installed, and installing it needs root and apt-get".into();
        }
    }
    if ci {
        return Err(format!(
            "setup: CI must run the command confinement tests, but {problem}"
        ));
    }
    eprintln!(
        "\n\
         ############################################################################\n\
         ##  WARNING: run_command confinement cannot be tested on this machine.    ##\n\
         ##  {problem}\n\
         ##  The confinement tests will SKIP themselves. Install bubblewrap and    ##\n\
         ##  allow unprivileged user namespaces to run them (CI=true fails here).  ##\n\
         ############################################################################\n"
    );
    Ok(())
}

/// The agent programs `provrun wrap` is tested around (crates/cli/tests/it/wrap_programs.rs),
/// installed from the npm registry at these versions (the test checks it reads the same).
pub(crate) const WRAPPED_PROGRAMS: &[(&str, &str)] = &[
    ("@openai/codex", "0.171.0"),
    ("@anthropic-ai/claude-code", "2.1.332"),
];

/// Installs each of [`WRAPPED_PROGRAMS`] once into `CACHE/npm/NAME-VERSION` (`npm install
/// --prefix`; both packages carry their binaries, one platform package each), when it is
/// not there yet. Under CI a failure fails; elsewhere it is a loud warning and the tests
/// skip themselves.
pub(crate) fn wrapped_programs() -> Result<(), String> {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    for (package, version) in WRAPPED_PROGRAMS {
        let name = package.rsplit('/').next().unwrap_or(package);
        let prefix = ci_cache().join("npm").join(format!("{name}-{version}"));
        let bin = if name == "codex" { "codex" } else { "claude" };
        if prefix.join("node_modules/.bin").join(bin).exists() {
            println!(
                "==> setup: {package}@{version} is installed in {}",
                prefix.display()
            );
            continue;
        }
        let installed = Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--prefix"])
            .arg(&prefix)
            .arg(format!("{package}@{version}"))
            .stdin(Stdio::null())
            .status()
            .map_err(|e| format!("npm could not be started: {e}"))
            .and_then(|s| {
                if s.success() && prefix.join("node_modules/.bin").join(bin).exists() {
                    Ok(())
                } else {
                    Err(format!("`npm install {package}@{version}` failed ({s})"))
                }
            });
        match installed {
            Ok(()) => println!(
                "==> setup: {package}@{version} installed in {}",
                prefix.display()
            ),
            Err(e) if ci => {
                return Err(format!(
                    "setup: CI must run the provrun wrap tests, but {e}"
                ));
            }
            Err(e) => eprintln!(
                "\n==> setup: WARNING: {e}; the provrun wrap tests around {package} will SKIP themselves (CI=true fails here)"
            ),
        }
    }
    Ok(())
}

/// The Python SDKs a program wrapped by `provrun wrap` is tested on
/// (crates/cli/tests/it/wrap_hostile.rs: a client built with `SSL_CERT_FILE` set, a
/// virtualenv's interpreter), pinned; the test finds them in `CACHE/WRAP_SDKS_FOLDER`.
pub(crate) const WRAP_SDKS: &[&str] = &["openai==3.63.0", "anthropic==1.17.0"];
/// The folder of the cache their virtualenv is in.
pub(crate) const WRAP_SDKS_FOLDER: &str = "wrap-sdks-openai-3.63.0-anthropic-1.17.0";

/// Makes the virtualenv of [`WRAP_SDKS`] once (`python3 -m venv`, then pip), when it is
/// not there yet. Under CI a failure fails; elsewhere it is a loud warning and the test
/// skips itself.
pub(crate) fn wrap_sdks() -> Result<(), String> {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    let venv = ci_cache().join(WRAP_SDKS_FOLDER);
    let python = venv.join("bin/python");
    let ready = || {
        Command::new(&python)
            .args(["-c", "import openai, anthropic"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let install = || -> Result<(), String> {
        if ready() {
            return Ok(());
        }
        let mut make = Command::new("python3");
        make.args(["-m", "venv", "--clear"]).arg(&venv);
        crate::run("setup: make the Python SDKs' virtualenv", make)?;
        let mut pip = Command::new(venv.join("bin/pip"));
        pip.args(["install", "--quiet", "--disable-pip-version-check"])
            .args(WRAP_SDKS);
        crate::run("setup: install the OpenAI and Anthropic Python SDKs", pip)?;
        if ready() {
            Ok(())
        } else {
            Err("the SDKs were installed but do not import".to_owned())
        }
    };
    match install() {
        Ok(()) => {
            println!(
                "\n==> setup: {} are in {}; the provrun wrap SDK test runs for real",
                WRAP_SDKS.join(", "),
                venv.display()
            );
            Ok(())
        }
        Err(e) if ci => Err(format!(
            "setup: CI must run the provrun wrap SDK test, but {e}"
        )),
        Err(e) => {
            eprintln!(
                "\n==> setup: WARNING: {e}; the provrun wrap SDK test will SKIP itself (CI=true fails here)"
            );
            Ok(())
        }
    }
}

/// The cargo-deny release `cargo xtask ci` checks the dependency tree with (deny.toml).
pub(crate) const CARGO_DENY_VERSION: &str = "0.20.2";

/// Whether `cargo SUBCOMMAND --version` reports `PACKAGE VERSION`.
fn cargo_tool_installed(package: &str, subcommand: &str, version: &str) -> bool {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string()))
        .args([subcommand, "--version"])
        .stdin(Stdio::null())
        .output()
        .is_ok_and(|out| {
            out.status.success()
                && String::from_utf8_lossy(&out.stdout).trim() == format!("{package} {version}")
        })
}

/// Make sure cargo-deny is there for the dependency-tree check ([`cargo_tool`]).
pub(crate) fn cargo_deny() -> Result<bool, String> {
    cargo_tool("cargo-deny", "deny", CARGO_DENY_VERSION)
}

/// Make sure the cargo subcommand `subcommand` of crates.io's `package` is there at
/// `version`. Under CI (`CI=true`) a missing one is installed from crates.io
/// (`cargo install --locked`, minutes of CPU) and a failed install fails; elsewhere a
/// missing one skips its check with a loud warning. Returns whether the check can run.
pub(crate) fn cargo_tool(package: &str, subcommand: &str, version: &str) -> Result<bool, String> {
    if cargo_tool_installed(package, subcommand, version) {
        return Ok(true);
    }
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    if !ci {
        eprintln!(
            "\n\
             ############################################################################\n\
             ##  WARNING: {package} {version} is not installed: `cargo {subcommand}` does NOT run.\n\
             ##  Install it with `cargo install {package} --locked --version {version}`\n\
             ##  (CI=true does).\n\
             ############################################################################\n"
        );
        return Ok(false);
    }
    let mut install = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string()));
    install.args(["install", package, "--locked", "--version", version]);
    crate::run(&format!("setup: install {package}"), install)?;
    if cargo_tool_installed(package, subcommand, version) {
        Ok(true)
    } else {
        Err(format!(
            "setup: {package} {version} was installed but `cargo {subcommand} --version` does not report it (is ~/.cargo/bin on PATH?)"
        ))
    }
}

/// The Inspect package the `provrun export inspect` test reads logs back with.
const INSPECT_AI: &str = "inspect-ai==0.3.285";

/// Makes sure the Inspect interop test finds `inspect-ai` in its virtualenv in the cache
/// (`inspect-ai-0.3.285/bin/python`), installed once when missing. Under CI a failed
/// install fails; elsewhere the test installs it itself or skips loudly.
pub(crate) fn inspect() -> Result<(), String> {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    let venv = ci_cache().join("inspect-ai-0.3.285");
    let python = venv.join("bin/python");
    let ready = || {
        Command::new(&python)
            .args(["-c", "import inspect_ai.log"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let install = || -> Result<(), String> {
        if ready() {
            return Ok(());
        }
        let mut make = Command::new("python3");
        make.args(["-m", "venv", "--clear"]).arg(&venv);
        crate::run("setup: make the inspect-ai virtualenv", make)?;
        let mut pip = Command::new(venv.join("bin/pip"));
        pip.args([
            "install",
            "--quiet",
            "--disable-pip-version-check",
            INSPECT_AI,
        ]);
        crate::run("setup: install inspect-ai", pip)
    };
    match install() {
        Ok(()) => {
            println!(
                "\n==> setup: {INSPECT_AI} is in {}; the Inspect interop test runs for real",
                venv.display()
            );
            Ok(())
        }
        Err(e) if ci => Err(format!(
            "setup: CI must run the Inspect interop test, but {e}"
        )),
        Err(e) => {
            eprintln!(
                "\n==> setup: WARNING: {e}; the Inspect interop test will try again or SKIP itself (CI=true fails here)"
            );
            Ok(())
        }
    }
}

/// The Prometheus project's Python client, whose OpenMetrics parser reads `provrun
/// serve`'s `/metrics` in crates/cli/tests/it/serve/metrics.rs.
const PROMETHEUS_CLIENT: &str = "prometheus-client==0.26.0";

/// Makes sure the `/metrics` test finds `prometheus_client` in its virtualenv in the cache
/// (`prometheus-client-0.26.0/bin/python`), installed once when missing. Under CI a failed
/// install fails; elsewhere the test installs it itself or skips loudly.
pub(crate) fn prometheus() -> Result<(), String> {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    let venv = ci_cache().join("prometheus-client-0.26.0");
    let python = venv.join("bin/python");
    let ready = || {
        Command::new(&python)
            .args(["-c", "import prometheus_client.openmetrics.parser"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let install = || -> Result<(), String> {
        if ready() {
            return Ok(());
        }
        let mut make = Command::new("python3");
        make.args(["-m", "venv", "--clear"]).arg(&venv);
        crate::run("setup: make the prometheus-client virtualenv", make)?;
        let mut pip = Command::new(venv.join("bin/pip"));
        pip.args([
            "install",
            "--quiet",
            "--disable-pip-version-check",
            PROMETHEUS_CLIENT,
        ]);
        crate::run("setup: install prometheus-client", pip)
    };
    match install() {
        Ok(()) => {
            println!(
                "\n==> setup: {PROMETHEUS_CLIENT} is in {}; the `provrun serve` /metrics test runs for real",
                venv.display()
            );
            Ok(())
        }
        Err(e) if ci => Err(format!(
            "setup: CI must run the `provrun serve` /metrics test, but {e}"
        )),
        Err(e) => {
            eprintln!(
                "\n==> setup: WARNING: {e}; the `provrun serve` /metrics test will try again or SKIP itself (CI=true fails here)"
            );
            Ok(())
        }
    }
}

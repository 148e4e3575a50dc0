//! The architecture rules of docs/architecture.md that a test can check from the source
//! tree: the crates' dependency direction, and the ban on `std::fs` in the tools crate.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The layer of each workspace package: a package may depend (normally, for builds or for
/// tests) only on provrun packages of a strictly lower layer. The four leaves know nothing
/// of each other: the model crate nothing of evidence, files or tools; the evidence crate
/// nothing of models.
const LAYERS: &[(&str, u8)] = &[
    ("provrun-evidence", 0),
    ("provrun-sandbox", 0),
    ("provrun-model", 0),
    ("provrun-macros", 0),
    // Where bundles live (folders, tars, buckets): knows nothing of events or runs.
    ("provrun-store", 0),
    ("provrun-tools", 1),
    ("provrun-otel", 1),
    // Evidence for foreign loops: the bundle writer plus input staging, nothing more.
    ("provrun-capture", 1),
    // A bundle as a web page: the evidence reader and the model crate's wire parsers.
    ("provrun-view", 1),
    // The transparency log of runs: bundles' statements as leaves, over the evidence
    // crate (verify, keys) alone.
    ("provrun-ledger", 1),
    // The rig integration: rig-core over the capture API, no agent loop, MCP or CLI.
    ("provrun-rig", 2),
    // The Python package's Rust core (PyO3): the capture API, the sandbox and verify for
    // Python; no agent loop, models, MCP or CLI.
    ("provrun-python", 2),
    // The MCP client: between the tools it builds on and the agent that uses it.
    ("provrun-mcp", 2),
    // `provrun wrap`: the recording proxy and session importers over the capture API, the
    // sandbox and the model crate's wire parsers; no agent loop, MCP or CLI.
    ("provrun-wrap", 2),
    // Inspect's .eval log from bundles (over the view crate's reading of a bundle) and back
    // (over the capture API).
    ("provrun-inspect", 2),
    ("provrun-agent", 3),
    // The AG-UI server: the agent, the store and the page behind HTTP; the CLI's `serve`.
    ("provrun-serve", 4),
    ("provrun-cli", 5),
    ("provrun", 4),
    ("provrun-tests", 6),
    // A one-tool crate over provrun-tools that the linker tests of provrun-tests use.
    ("provrun-linker-probe", 2),
    // A crate that uses provrun as a user would: the facade alone.
    ("provrun-downstream", 6),
    // The benchmark driver: a binary over the agent, depended on by nothing.
    ("provrun-bench", 5),
    // Project automation builds nothing of ours.
    ("xtask", 0),
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the workspace root")
        .to_path_buf()
}

fn read_toml(path: &Path) -> toml::Table {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    text.parse()
        .unwrap_or_else(|e| panic!("{} is not TOML: {e}", path.display()))
}

/// Every provrun package a manifest depends on, in any dependency table (target-specific
/// ones included), with the table it is in.
fn provrun_deps(manifest: &toml::Table) -> Vec<(String, String)> {
    let mut tables: Vec<(String, &toml::Table)> = Vec::new();
    for kind in ["dependencies", "dev-dependencies", "build-dependencies"] {
        if let Some(t) = manifest.get(kind).and_then(toml::Value::as_table) {
            tables.push((kind.to_string(), t));
        }
    }
    if let Some(targets) = manifest.get("target").and_then(toml::Value::as_table) {
        for (cfg, target) in targets {
            for kind in ["dependencies", "dev-dependencies", "build-dependencies"] {
                if let Some(t) = target.get(kind).and_then(toml::Value::as_table) {
                    tables.push((format!("target.{cfg}.{kind}"), t));
                }
            }
        }
    }
    let mut deps = Vec::new();
    for (kind, table) in tables {
        for (key, spec) in table {
            // A renamed dependency names its real package in `package`.
            let package = spec
                .get("package")
                .and_then(toml::Value::as_str)
                .unwrap_or(key);
            if package == "provrun" || package.starts_with("provrun-") {
                deps.push((package.to_string(), kind.clone()));
            }
        }
    }
    deps
}

/// Each workspace member's package name and manifest.
fn members() -> Vec<(String, toml::Table)> {
    let root = root();
    let workspace = read_toml(&root.join("Cargo.toml"));
    let members = workspace["workspace"]["members"]
        .as_array()
        .expect("workspace.members is a list");
    members
        .iter()
        .map(|m| {
            let dir = m.as_str().expect("member paths are strings");
            let manifest = read_toml(&root.join(dir).join("Cargo.toml"));
            let name = manifest["package"]["name"]
                .as_str()
                .expect("package.name")
                .to_string();
            (name, manifest)
        })
        .collect()
}

#[test]
fn dependencies_point_down_the_layers_only() {
    let layers: BTreeMap<&str, u8> = LAYERS.iter().copied().collect();
    let members = members();
    assert!(
        members.len() >= 10,
        "too few members found: {}",
        members.len()
    );
    let mut broken = Vec::new();
    for (name, manifest) in &members {
        let Some(&layer) = layers.get(name.as_str()) else {
            broken.push(format!(
                "`{name}` has no layer: add it to LAYERS here and to docs/architecture.md"
            ));
            continue;
        };
        for (dep, kind) in provrun_deps(manifest) {
            match layers.get(dep.as_str()) {
                Some(&dep_layer) if dep_layer < layer => {}
                // A crate's tests may turn on its own test-only features (evidence's
                // `sync-probe`) by naming itself; that points nowhere else.
                _ if dep == *name && kind == "dev-dependencies" => {}
                _ => broken.push(format!(
                    "`{name}` (layer {layer}) depends on `{dep}` in [{kind}], which is not below it"
                )),
            }
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

#[test]
fn the_rule_catches_an_upward_dependency() {
    // The check above must be able to fail: a model crate that reached for evidence.
    let manifest: toml::Table = "[package]\nname = \"provrun-model\"\n\
        [dev-dependencies]\nev = { package = \"provrun-evidence\", path = \"../evidence\" }\n"
        .parse()
        .unwrap();
    assert_eq!(
        provrun_deps(&manifest),
        [(
            "provrun-evidence".to_string(),
            "dev-dependencies".to_string()
        )]
    );
}

#[test]
fn the_tools_crate_bans_std_fs() {
    let config = read_toml(&root().join("crates/tools/clippy.toml"));
    let banned: Vec<&str> = config["disallowed-methods"]
        .as_array()
        .expect("disallowed-methods is a list")
        .iter()
        .filter_map(|m| m.get("path").and_then(toml::Value::as_str))
        .collect();
    for path in [
        "std::fs::read",
        "std::fs::read_to_string",
        "std::fs::write",
        "std::fs::read_dir",
        "std::fs::remove_file",
        "std::fs::rename",
        "std::fs::File::open",
        "std::fs::File::create",
        "std::fs::OpenOptions::open",
    ] {
        assert!(
            banned.contains(&path),
            "{path} is no longer banned in crates/tools"
        );
    }
}

/// The most packages (itself included) that `provrun-tools` may build against, so that a
/// crate of plain `#[tool]` fns stays light: no HTTP stack, no OS confinement, no recorder.
/// It was 178 before those moved behind features (49 when this bound was set).
const TOOLS_PACKAGE_BOUND: usize = 50;

/// Packages no light build may contain: HTTP and TLS stacks, the MCP SDK, the OS
/// confinement crates, and the recorder's compression.
const HEAVY: &[&str] = &[
    "reqwest",
    "hyper",
    "rustls",
    "aws-lc-sys",
    "ring",
    "async-openai",
    "rmcp",
    "landlock",
    "seccompiler",
    "zstd-sys",
];

/// The distinct packages in the normal (non-dev, non-build) dependency tree of `package`
/// built with `features` (`cargo tree`'s own arguments), each as its name.
fn normal_tree(package: &str, features: &[&str]) -> Vec<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(cargo)
        .current_dir(root())
        .args([
            "tree",
            "--offline",
            "-e",
            "normal",
            "--prefix",
            "none",
            "-p",
            package,
        ])
        .args(features)
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo tree -p {package} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    distinct_packages(&String::from_utf8_lossy(&out.stdout))
}

/// `cargo tree --prefix none` output to the distinct package names (`name vX.Y.Z …`).
fn distinct_packages(tree: &str) -> Vec<String> {
    let mut seen: Vec<String> = tree
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let name = words.next()?;
            let version = words.next()?;
            Some(format!("{name} {version}"))
        })
        .collect();
    seen.sort();
    seen.dedup();
    seen
}

/// The packages of `tree` named in `HEAVY`.
fn heavy_in(tree: &[String]) -> Vec<&String> {
    tree.iter()
        .filter(|p| HEAVY.contains(&p.split(' ').next().unwrap_or_default()))
        .collect()
}

#[test]
fn a_tools_crate_builds_against_few_packages() {
    let tree = normal_tree("provrun-tools", &[]);
    assert!(
        tree.len() <= TOOLS_PACKAGE_BOUND,
        "provrun-tools now builds against {} packages (bound {TOOLS_PACKAGE_BOUND}): a crate of \
         `#[tool]` fns pays for each. Put the new dependency behind a feature. The tree:\n{}",
        tree.len(),
        tree.join("\n")
    );
    assert!(heavy_in(&tree).is_empty(), "{:?}", heavy_in(&tree));
    // The one-tool probe crate, a `#[tool]` crate as a user writes it, is as light.
    let probe = normal_tree("provrun-linker-probe", &[]);
    assert!(
        probe.len() <= TOOLS_PACKAGE_BOUND + 1,
        "{}",
        probe.join("\n")
    );
    // So is the facade with only its `tools` feature.
    let facade = normal_tree("provrun", &["--no-default-features", "--features", "tools"]);
    assert!(
        facade.len() <= TOOLS_PACKAGE_BOUND + 1,
        "{}",
        facade.join("\n")
    );
}

#[test]
fn an_offline_agent_builds_no_http_client() {
    // `provrun = { default-features = false, features = ["agent"] }`: offline models only.
    let tree = normal_tree("provrun", &["--no-default-features", "--features", "agent"]);
    let heavy: Vec<&String> = heavy_in(&tree)
        .into_iter()
        .filter(|p| {
            !p.starts_with("landlock ")
                && !p.starts_with("seccompiler ")
                && !p.starts_with("zstd-sys ")
        })
        .collect();
    assert!(heavy.is_empty(), "an offline agent builds {heavy:?}");
    // The default facade (the CLI's set) still has them: the features are what cuts them.
    let full = normal_tree("provrun", &[]);
    let names: Vec<&str> = full.iter().filter_map(|p| p.split(' ').next()).collect();
    for wanted in ["reqwest", "rmcp", "async-openai", "landlock"] {
        assert!(names.contains(&wanted), "the default facade lost {wanted}");
    }
}

#[test]
fn the_package_count_sees_duplicates_once_and_versions_apart() {
    // The bound's counting must be able to fail: distinct name+version pairs.
    let tree = "a v1.0.0\nb v2.0.0 (proc-macro)\na v1.0.0 (*)\nsyn v2.0.1\nsyn v3.0.0\n";
    assert_eq!(
        distinct_packages(tree),
        ["a v1.0.0", "b v2.0.0", "syn v2.0.1", "syn v3.0.0"]
    );
    let many = (0..=TOOLS_PACKAGE_BOUND)
        .map(|i| format!("p{i} v0.1.0\n"))
        .collect::<String>();
    assert!(distinct_packages(&many).len() > TOOLS_PACKAGE_BOUND);
    assert_eq!(
        heavy_in(&distinct_packages("reqwest v0.13.5\nserde v1.0.0\n")).len(),
        1
    );
}

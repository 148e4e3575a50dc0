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
    ("provrun-tools", 1),
    ("provrun-otel", 1),
    // Evidence for foreign loops: the bundle writer plus input staging, nothing more.
    ("provrun-capture", 1),
    // The MCP client: between the tools it builds on and the agent that uses it.
    ("provrun-mcp", 2),
    ("provrun-agent", 3),
    ("provrun-cli", 4),
    ("provrun", 4),
    ("provrun-tests", 5),
    // A one-tool crate over provrun-tools that the linker tests of provrun-tests use.
    ("provrun-linker-probe", 2),
    // The benchmark driver: a binary over the agent, depended on by nothing.
    ("provrun-bench", 4),
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

//! Behaviour of `ToolRegistry`: the linked tools, `new`, `add`, `register`, `get`, and
//! loading tools folders of TOML manifests.
//!
//! A test binary of its own, not a module of `tests/it`: the first test checks that the
//! binary links exactly the built-in tools and this file's two, and the `#[tool]` fns of
//! the other test files would add theirs.

use std::path::{Path, PathBuf};

use provrun_tools::{BUILTIN_TOOLS, Tool, ToolError, ToolMode, ToolRegistry, tool};

/// First tool of this test file (its name sorts before every built-in).
#[tool]
fn aardvark_probe() -> &'static str {
    "a"
}

/// Second tool of this test file (its name sorts after every built-in).
#[tool(name = "zz_probe")]
fn last_probe(
    /// Anything.
    text: String,
) -> String {
    text
}

/// The names this file's own `#[tool]` fns register.
const OWN_TOOLS: [&str; 2] = ["aardvark_probe", "zz_probe"];

/// A manifest declaring one client round-trip tool (needs no command) per name.
fn manifest(names: &[&str], description: &str) -> String {
    names
        .iter()
        .map(|n| {
            format!(
                "[[tools]]\nname = \"{n}\"\ndescription = \"{description}\"\nmode = \"client_round_trip\"\n\n"
            )
        })
        .collect()
}

/// Write `files` (name, text) into a fresh temporary folder.
// The tools crate bans std::fs (clippy.toml) so that tools go through the sandbox; this
// helper only writes the test's own fixture folder on the host.
#[allow(clippy::disallowed_methods)]
fn folder(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    dir
}

/// Make a sub-folder inside a fixture folder.
// As for `folder`: host-side fixture setup, not tool code.
#[allow(clippy::disallowed_methods)]
fn subfolder(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::create_dir(&path).unwrap();
    path
}

fn names(registry: &ToolRegistry) -> Vec<String> {
    registry.names().map(str::to_string).collect()
}

fn hand_made(name: &str, description: &str) -> Tool {
    Tool::builder(name, description)
        .sync_handler(false, |_, _| provrun_tools::ToolOutput::succeed("hand"))
        .build()
        .unwrap()
}

#[test]
fn linked_has_the_builtins_and_this_files_tools_sorted_by_name() {
    let linked = ToolRegistry::linked();
    let mut expected: Vec<String> = BUILTIN_TOOLS
        .iter()
        .chain(OWN_TOOLS.iter())
        .map(|s| s.to_string())
        .collect();
    expected.sort();
    assert_eq!(names(&linked), expected);
    // `iter` walks in the same, sorted order.
    let iter_names: Vec<&str> = linked.iter().map(Tool::name).collect();
    assert_eq!(iter_names, expected);
    assert_eq!(iter_names.first(), Some(&"aardvark_probe"));
    assert_eq!(iter_names.last(), Some(&"zz_probe"));
    // BUILTIN_TOOLS itself is sorted.
    let mut sorted = BUILTIN_TOOLS;
    sorted.sort();
    assert_eq!(sorted, BUILTIN_TOOLS);
    // Each call is a fresh registry: changing one does not change the next.
    let mut changed = ToolRegistry::linked();
    changed.remove("read_file");
    assert!(ToolRegistry::linked().tool("read_file").is_some());
}

#[test]
fn new_without_folders_is_linked() {
    let registry = ToolRegistry::new(Vec::<PathBuf>::new()).unwrap();
    assert_eq!(names(&registry), names(&ToolRegistry::linked()));
}

#[test]
fn new_is_linked_plus_each_folder_later_folders_winning() {
    let first = folder(&[(
        "a.toml",
        &manifest(&["from_first", "shared"], "first folder"),
    )]);
    let second = folder(&[(
        "b.toml",
        &manifest(&["from_second", "shared"], "second folder"),
    )]);
    let registry = ToolRegistry::new([first.path(), second.path()]).unwrap();
    let linked = ToolRegistry::linked();
    assert_eq!(registry.len(), linked.len() + 3);
    for name in linked.names() {
        assert!(registry.tool(name).is_some(), "{name} lost");
    }
    assert_eq!(
        registry.tool("from_first").unwrap().description(),
        "first folder"
    );
    assert_eq!(
        registry.tool("shared").unwrap().description(),
        "second folder"
    );
    // Still sorted after loading.
    let all = names(&registry);
    let mut sorted = all.clone();
    sorted.sort();
    assert_eq!(all, sorted);
}

#[test]
fn new_fails_when_a_folder_fails() {
    let good = folder(&[("a.toml", &manifest(&["fine"], "d"))]);
    let missing = good.path().join("no-such-folder");
    let err = ToolRegistry::new([good.path(), missing.as_path()]).unwrap_err();
    assert!(
        matches!(err, ToolError::Io { ref path, .. } if *path == missing),
        "{err:?}"
    );
}

#[test]
fn add_replaces_a_tool_of_the_same_name_and_returns_the_old_one() {
    let mut registry = ToolRegistry::empty();
    assert!(registry.add(hand_made("echo", "first")).is_none());
    let old = registry.add(hand_made("echo", "second")).unwrap();
    assert_eq!(old.description(), "first");
    assert_eq!(registry.len(), 1);
    assert_eq!(registry.tool("echo").unwrap().description(), "second");

    // A generated tool struct converts into a Tool and may replace a built-in.
    let mut linked = ToolRegistry::linked();
    let before = linked.len();
    let old = linked.add(hand_made("read_file", "my own reader")).unwrap();
    assert_eq!(old.name(), "read_file");
    assert!(old.takes_context());
    assert_eq!(linked.len(), before);
    assert_eq!(
        linked.tool("read_file").unwrap().description(),
        "my own reader"
    );
    assert!(ToolRegistry::empty().add(AardvarkProbeTool).is_none());
}

#[test]
fn register_refuses_a_duplicate_and_keeps_the_first() {
    let mut registry = ToolRegistry::empty();
    registry.register(hand_made("echo", "first")).unwrap();
    registry.register(LastProbeTool).unwrap();
    let err = registry.register(hand_made("echo", "second")).unwrap_err();
    assert!(
        matches!(err, ToolError::DuplicateTool { ref name } if name == "echo"),
        "{err:?}"
    );
    assert!(err.to_string().contains("`echo`"), "{err}");
    assert_eq!(registry.len(), 2);
    assert_eq!(registry.tool("echo").unwrap().description(), "first");
    assert!(matches!(
        ToolRegistry::linked().register(hand_made("write_file", "x")),
        Err(ToolError::DuplicateTool { .. })
    ));
}

#[test]
fn get_returns_tools_in_the_order_named() {
    let linked = ToolRegistry::linked();
    let tools = linked
        .get(&["write_file", "aardvark_probe", "read_file", "write_file"])
        .unwrap();
    let got: Vec<&str> = tools.iter().map(Tool::name).collect();
    assert_eq!(
        got,
        ["write_file", "aardvark_probe", "read_file", "write_file"]
    );
    let owned = vec!["zz_probe".to_string()];
    assert_eq!(linked.get(&owned).unwrap()[0].name(), "zz_probe");
    assert!(linked.get::<&str>(&[]).unwrap().is_empty());
}

#[test]
fn get_with_an_unknown_name_names_it_and_lists_the_known_ones() {
    let linked = ToolRegistry::linked();
    let err = linked.get(&["read_file", "reed_file"]).unwrap_err();
    let ToolError::UnknownTool { name, known } = &err else {
        panic!("expected UnknownTool, got {err:?}");
    };
    assert_eq!(name, "reed_file");
    for tool in linked.names() {
        assert!(known.contains(tool), "{tool} not listed in {known}");
    }
    let message = err.to_string();
    assert!(message.contains("`reed_file`"), "{message}");
    assert!(message.contains("read_file, run_command"), "{message}");

    let err = ToolRegistry::empty().get(&["x"]).unwrap_err().to_string();
    assert!(
        err.contains("`x`") && err.contains("registered tools: none."),
        "{err}"
    );
    // `call` names an unknown tool the same way.
    let err = linked.call("nope", (), None).unwrap_err();
    assert!(matches!(err, ToolError::UnknownTool { ref name, .. } if name == "nope"));
}

#[test]
fn load_folder_adds_every_manifests_tools() {
    let dir = folder(&[
        ("one.toml", &manifest(&["alpha", "beta"], "from one")),
        (
            "two.toml",
            r#"
            [[tools]]
            name = "word_count"
            description = "Count the words in a text."
            command = ["wc", "-w"]
            destructive = true
            category = "read"
            confirm = "Count?"
            [tools.parameters]
            type = "object"
            properties.text = { type = "string" }
            required = ["text"]

            [[tools]]
            name = "search_docs"
            description = "Search the docs."
            mode = "remote_mcp"
            server = "docs"
            "#,
        ),
    ]);
    let mut registry = ToolRegistry::empty();
    assert_eq!(registry.load_folder(dir.path()).unwrap(), 4);
    assert_eq!(
        names(&registry),
        ["alpha", "beta", "search_docs", "word_count"]
    );
    let wc = registry.tool("word_count").unwrap();
    assert_eq!(wc.mode(), ToolMode::InProcess);
    assert!(wc.is_destructive());
    assert_eq!(wc.schema()["x-destructive"], true);
    assert_eq!(wc.schema()["x-category"], "read");
    assert_eq!(wc.schema()["x-confirm"], "Count?");
    assert_eq!(wc.schema()["required"][0], "text");
    assert_eq!(
        registry.tool("alpha").unwrap().mode(),
        ToolMode::ClientRoundTrip
    );
    assert_eq!(
        registry.tool("search_docs").unwrap().mode(),
        ToolMode::RemoteMcp
    );
    // A command tool runs in the run's sandbox: without a context it is refused clearly.
    let err = registry
        .call("word_count", r#"{"text": "a b"}"#, None)
        .unwrap_err();
    assert!(matches!(err, ToolError::ContextRequired { .. }), "{err:?}");
    // Declared here, run elsewhere: a clear error, not a panic.
    let err = registry.call("search_docs", "{}", None).unwrap_err();
    assert!(matches!(err, ToolError::NotRunnable { .. }), "{err:?}");
    // Loading adds to what is there.
    let mut linked = ToolRegistry::linked();
    let before = linked.len();
    linked.load_folder(dir.path()).unwrap();
    assert_eq!(linked.len(), before + 4);
}

#[test]
fn load_folder_skips_underscore_files_other_files_and_folders() {
    let dir = folder(&[
        ("tools.toml", &manifest(&["kept"], "d")),
        // Not valid manifests at all: they would fail the load if they were read.
        ("_draft.toml", "this is not [toml"),
        ("_empty.toml", ""),
        ("notes.txt", "[[tools]]\nname = \"from_txt\"\n"),
        ("README.md", "# tools"),
        ("tools.toml.bak", "garbage ["),
    ]);
    // A folder whose name looks like a manifest is not one.
    subfolder(dir.path(), "nested.toml");
    let mut registry = ToolRegistry::empty();
    assert_eq!(registry.load_folder(dir.path()).unwrap(), 1);
    assert_eq!(names(&registry), ["kept"]);
}

#[test]
fn an_empty_folder_loads_nothing() {
    let dir = folder(&[]);
    let mut registry = ToolRegistry::empty();
    assert_eq!(registry.load_folder(dir.path()).unwrap(), 0);
    assert!(registry.is_empty());
}

#[test]
fn a_manifest_with_no_tools_is_an_error_naming_the_file() {
    for text in ["", "# nothing here\n", "tools = []\n"] {
        let dir = folder(&[("ok.toml", &manifest(&["fine"], "d")), ("empty.toml", text)]);
        let mut registry = ToolRegistry::empty();
        let err = registry.load_folder(dir.path()).unwrap_err();
        let ToolError::EmptyManifest { path } = &err else {
            panic!("expected EmptyManifest for {text:?}, got {err:?}");
        };
        assert_eq!(path, &dir.path().join("empty.toml"));
        assert!(err.to_string().contains("empty.toml"), "{err}");
        assert!(registry.is_empty(), "a failed load added tools");
    }
}

#[test]
fn an_invalid_mode_lists_the_three_allowed_modes() {
    let dir = folder(&[(
        "bad.toml",
        "[[tools]]\nname = \"x\"\ndescription = \"d\"\nmode = \"in_a_container\"\n",
    )]);
    let err = ToolRegistry::empty().load_folder(dir.path()).unwrap_err();
    assert!(matches!(err, ToolError::InvalidManifest { .. }), "{err:?}");
    let message = err.to_string();
    for needle in [
        "bad.toml",
        "in_a_container",
        "in_process",
        "client_round_trip",
        "remote_mcp",
    ] {
        assert!(
            message.contains(needle),
            "`{needle}` missing from: {message}"
        );
    }
}

#[test]
fn two_manifests_declaring_one_name_is_an_error_and_nothing_is_added() {
    let dir = folder(&[
        ("a.toml", &manifest(&["unique_a", "clash"], "a")),
        ("b.toml", &manifest(&["unique_b", "clash"], "b")),
    ]);
    let mut registry = ToolRegistry::linked();
    let before = names(&registry);
    let err = registry.load_folder(dir.path()).unwrap_err();
    assert!(matches!(err, ToolError::InvalidManifest { .. }), "{err:?}");
    let message = err.to_string();
    assert!(message.contains("`clash`"), "{message}");
    assert!(
        message.contains("a.toml") && message.contains("b.toml"),
        "{message}"
    );
    assert_eq!(
        names(&registry),
        before,
        "a failed load changed the registry"
    );
}

#[test]
fn a_broken_manifest_after_good_ones_adds_nothing() {
    let dir = folder(&[
        ("a.toml", &manifest(&["early"], "d")),
        ("z.toml", "[[tools]]\nname = \"late\"\n"),
    ]);
    let mut registry = ToolRegistry::empty();
    let err = registry.load_folder(dir.path()).unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("z.toml") && message.contains("description"),
        "{message}"
    );
    assert!(registry.is_empty());
}

#[test]
fn a_missing_folder_is_an_io_error_naming_it() {
    let dir = folder(&[]);
    let missing = dir.path().join("not-here");
    let err = ToolRegistry::empty().load_folder(&missing).unwrap_err();
    let ToolError::Io { path, source } = &err else {
        panic!("expected Io, got {err:?}");
    };
    assert_eq!(path, &missing);
    assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
    assert!(err.to_string().contains("not-here"), "{err}");
    // A file where a folder is expected is an Io error too.
    let file_dir = folder(&[("plain.toml", &manifest(&["x"], "d"))]);
    let err = ToolRegistry::empty()
        .load_folder(file_dir.path().join("plain.toml"))
        .unwrap_err();
    assert!(matches!(err, ToolError::Io { .. }), "{err:?}");
}

#[test]
fn only_the_linked_read_file_and_list_dir_are_bounded_builtin_reads() {
    let linked = ToolRegistry::linked();
    for name in BUILTIN_TOOLS {
        let tool = &linked.get(&[name]).unwrap()[0];
        assert_eq!(
            tool.is_bounded_builtin_read(),
            matches!(name, "read_file" | "list_dir"),
            "{name}"
        );
    }
    // A tool registered under the same name is not the built-in.
    let mut reg = ToolRegistry::linked();
    reg.add(
        Tool::builder("read_file", "A replacement.")
            .sync_handler(false, |_, _| provrun_tools::ToolOutput::succeed("mine"))
            .build()
            .unwrap(),
    );
    assert!(!reg.get(&["read_file"]).unwrap()[0].is_bounded_builtin_read());
}

//! Tools-folder manifests: TOML files that declare tools which are not Rust code.
//!
//! ```toml
//! [[tools]]
//! name = "word_count"
//! description = "Count the words in a text."
//! mode = "in_process"            # in_process | client_round_trip | remote_mcp
//! command = ["wc", "-w"]         # in_process tools: a program, given JSON arguments on stdin,
//!                                # run confined like run_command; its stdout is the result
//! destructive = false
//! category = "read"              # read | write | execute | network | search | other
//! # confirm = "…"  summary = "…"  server = "…" (remote_mcp)  timeout_s = 30
//!
//! [tools.parameters]             # the argument JSON Schema; defaults to an empty object
//! type = "object"
//! properties.text = { type = "string", description = "The text." }
//! required = ["text"]
//!
//! [[mcp]]                        # an MCP server (see `McpServerSpec`); agents use it by
//! name = "notes"                 # naming it in their own `[[mcp]]` section
//! command = "bin/notes-server"   # relative to this manifest's folder
//! ```

use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use crate::context::RunContext;
use crate::error::ToolError;
use crate::mcp::McpServerSpec;
use crate::output::ToolOutput;
use crate::tool::{Handler, JsonMap, Tool, ToolCategory, ToolMode};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Manifest {
    #[serde(default)]
    tools: Vec<ManifestTool>,
    #[serde(default)]
    mcp: Vec<McpServerSpec>,
}

/// What one manifest declares.
#[derive(Debug, Default)]
pub(crate) struct Declared {
    pub(crate) tools: Vec<Tool>,
    pub(crate) servers: Vec<McpServerSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ManifestTool {
    name: String,
    description: String,
    #[serde(default)]
    mode: Option<String>,
    #[serde(default)]
    command: Option<Vec<String>>,
    #[serde(default)]
    parameters: Option<Value>,
    #[serde(default)]
    destructive: bool,
    #[serde(default)]
    category: Option<ToolCategory>,
    #[serde(default)]
    confirm: Option<String>,
    #[serde(default)]
    summary: Option<String>,
    #[serde(default)]
    server: Option<String>,
    #[serde(default)]
    timeout_s: Option<u64>,
}

/// Read one manifest and build its tools.
#[allow(clippy::disallowed_methods)] // reads the operator's own manifest, not model input
pub(crate) fn load_manifest(path: &Path) -> Result<Declared, ToolError> {
    let text = std::fs::read_to_string(path).map_err(|source| ToolError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut declared = parse_declarations(path, &text)?;
    // A relative program path in a manifest is relative to the manifest's folder.
    let folder = path.parent().unwrap_or(Path::new("."));
    for server in &mut declared.servers {
        if let Some(command) = &server.command
            && command.contains('/')
            && Path::new(command).is_relative()
        {
            let joined = folder.join(command);
            server.command = Some(
                std::path::absolute(&joined)
                    .unwrap_or(joined)
                    .display()
                    .to_string(),
            );
        }
    }
    Ok(declared)
}

/// Build the tools a manifest's text declares; `path` is only for messages.
#[cfg(test)]
pub(crate) fn parse_manifest(path: &Path, text: &str) -> Result<Vec<Tool>, ToolError> {
    parse_declarations(path, text).map(|d| d.tools)
}

/// The tools and MCP servers a manifest's text declares; `path` is only for messages.
pub(crate) fn parse_declarations(path: &Path, text: &str) -> Result<Declared, ToolError> {
    let invalid = |message: String| ToolError::InvalidManifest {
        path: path.to_path_buf(),
        message,
    };
    let manifest = parse_toml(text).map_err(invalid)?;
    let mut names = std::collections::BTreeSet::new();
    for server in &manifest.mcp {
        server.check(false).map_err(&invalid)?;
        if !names.insert(server.name.clone()) {
            return Err(invalid(format!(
                "MCP server `{}` is declared twice",
                server.name
            )));
        }
    }
    if manifest.tools.is_empty() && manifest.mcp.is_empty() {
        return Err(ToolError::EmptyManifest {
            path: path.to_path_buf(),
        });
    }
    let mut tools = Vec::with_capacity(manifest.tools.len());
    for (index, decl) in manifest.tools.into_iter().enumerate() {
        let at = format!("tool #{} (`{}`)", index + 1, decl.name);
        let mode: ToolMode = match decl.mode.as_deref() {
            None => ToolMode::InProcess,
            Some(m) => m
                .parse()
                .map_err(|e: ToolError| invalid(format!("{at}: {e}")))?,
        };
        if decl.description.trim().is_empty() {
            return Err(invalid(format!(
                "{at}: `description` is empty; the model needs to be told what the tool does"
            )));
        }
        if decl.timeout_s == Some(0) {
            return Err(invalid(format!("{at}: `timeout_s` must be at least 1")));
        }
        let handler = match mode {
            ToolMode::InProcess => {
                let command = decl.command.as_ref().filter(|c| !c.is_empty()).ok_or_else(|| {
                    invalid(format!(
                        "{at}: an in_process manifest tool needs `command = [\"program\", \"arg\", …]`"
                    ))
                })?;
                if command[0].trim().is_empty() {
                    return Err(invalid(format!("{at}: `command`'s program is empty")));
                }
                command_handler(command.clone(), decl.timeout_s)
            }
            ToolMode::ClientRoundTrip => {
                if decl.command.is_some() {
                    return Err(invalid(format!(
                        "{at}: a client_round_trip tool is run by the caller and takes no `command`"
                    )));
                }
                Handler::Unavailable("it is a client round-trip tool: the caller runs it".into())
            }
            ToolMode::RemoteMcp => {
                if decl.command.is_some() {
                    return Err(invalid(format!(
                        "{at}: a remote_mcp tool runs in an MCP server and takes no `command`; \
                         name the server with `server = \"…\"`"
                    )));
                }
                let server = decl.server.as_deref().unwrap_or("an MCP server");
                Handler::Unavailable(format!(
                    "it runs in {server}; an agent reaches an MCP server's tools by naming \
                     the server in its spec's `[[mcp]]` section, which lists them at run start"
                ))
            }
        };
        let takes_context = matches!(handler, Handler::Sync(_));
        let mut builder = Tool::builder(decl.name.clone(), decl.description)
            .runs_program(decl.command.is_some())
            .mode(mode)
            .destructive(decl.destructive)
            .category(decl.category.unwrap_or_default())
            .handler(takes_context, handler);
        if let Some(schema) = decl.parameters {
            builder = builder.schema(schema);
        }
        if let Some(c) = decl.confirm {
            builder = builder.confirm(c);
        }
        if let Some(s) = decl.summary {
            builder = builder.summary(s);
        }
        let tool = builder.build().map_err(|e| invalid(format!("{at}: {e}")))?;
        tools.push(tool);
    }
    Ok(Declared {
        tools,
        servers: manifest.mcp,
    })
}

/// The body of an in_process command tool: the program runs under the same OS confinement
/// as `run_command` (see `provrun_sandbox::Sandbox::run_program`), with the call's JSON
/// arguments on stdin. Its stdout is the result when it exits 0; otherwise the call fails
/// with the exit status and both streams. Stdout that is not UTF-8 is decoded with each
/// invalid sequence as U+FFFD and a note saying how many there were is added on its own
/// line, so the result never passes for the program's exact bytes.
fn command_handler(argv: Vec<String>, timeout_s: Option<u64>) -> Handler {
    let run = move |ctx: Option<&RunContext>, args: JsonMap| -> Result<ToolOutput, ToolError> {
        // `takes_context` is set, so the registry refuses calls without a context first.
        let Some(ctx) = ctx else {
            return Ok(ToolOutput::fail("a command tool needs the run's sandbox"));
        };
        let stdin = match serde_json::to_vec(&Value::Object(args)) {
            Ok(mut bytes) => {
                bytes.push(b'\n');
                bytes
            }
            Err(e) => return Ok(ToolOutput::fail(format!("encoding the arguments: {e}"))),
        };
        let timeout = timeout_s.map(std::time::Duration::from_secs);
        Ok(
            match ctx.sandbox().run_program(&argv, Some(stdin), timeout) {
                Ok(outcome) if outcome.success() && !outcome.stdout_truncated => {
                    let mut text = outcome.stdout.clone();
                    if let Some(note) = outcome.invalid_utf8_note("stdout") {
                        if !text.is_empty() && !text.ends_with('\n') {
                            text.push('\n');
                        }
                        text.push_str(&note);
                    }
                    ToolOutput::succeed(text).with_confinement(&outcome.confinement)
                }
                Ok(outcome) => {
                    ToolOutput::fail(outcome.render()).with_confinement(&outcome.confinement)
                }
                Err(e) => ToolOutput::fail(e.to_string()),
            },
        )
    };
    Handler::Sync(std::sync::Arc::new(run))
}

/// A TOML error as one line: where (line and column, 1-based) and what.
///
/// `toml`'s own `Display` draws the offending line with a caret under it over several
/// lines, which breaks one-line logs and CLI messages.
/// The manifest's TOML, or a one-line message.
#[cfg(feature = "manifest")]
fn parse_toml(text: &str) -> Result<Manifest, String> {
    toml::from_str(text).map_err(|e| one_line(text, &e))
}

/// Without the `manifest` feature there is no TOML parser: say which feature reads it.
#[cfg(not(feature = "manifest"))]
fn parse_toml(_text: &str) -> Result<Manifest, String> {
    Err(
        "this build of provrun-tools reads no tools-folder manifests: enable its \
         `manifest` feature (the agent crate and the CLI do)"
            .to_owned(),
    )
}

#[cfg(feature = "manifest")]
fn one_line(text: &str, error: &toml::de::Error) -> String {
    let message = error
        .message()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    match error.span() {
        Some(span) => {
            let at = span.start.min(text.len());
            let before = text.get(..at).unwrap_or(text);
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            format!("line {line}, column {column}: {message}")
        }
        None => message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Vec<Tool>, ToolError> {
        parse_manifest(Path::new("m.toml"), text)
    }

    #[test]
    fn a_full_command_tool_parses_with_metadata() {
        let tools = parse(
            r#"
            [[tools]]
            name = "word_count"
            description = "Count words."
            command = ["wc", "-w"]
            category = "read"
            summary = "Count"
            [tools.parameters]
            type = "object"
            properties.text = { type = "string" }
            required = ["text"]
            "#,
        )
        .unwrap();
        assert_eq!(tools.len(), 1);
        let t = &tools[0];
        assert_eq!(t.name(), "word_count");
        assert_eq!(t.mode(), ToolMode::InProcess);
        assert_eq!(t.schema()["x-category"], "read");
        assert_eq!(t.schema()["x-summary"], "Count");
        assert_eq!(t.schema()["required"][0], "text");
        assert!(t.is_runnable(), "command tools run through the sandbox");
        assert!(t.takes_context());
    }

    #[test]
    fn a_bad_mode_names_the_allowed_ones() {
        let err = parse(
            r#"
            [[tools]]
            name = "x"
            description = "d"
            mode = "over_there"
            "#,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("over_there"), "{err}");
        assert!(
            err.contains("in_process, client_round_trip, remote_mcp"),
            "{err}"
        );
    }

    #[test]
    fn no_tools_is_an_error() {
        assert!(matches!(parse(""), Err(ToolError::EmptyManifest { .. })));
        assert!(matches!(
            parse("tools = []"),
            Err(ToolError::EmptyManifest { .. })
        ));
    }

    #[test]
    fn unknown_keys_and_bad_toml_name_the_problem() {
        let err = parse("[[tools]]\nname = \"x\"\ndescription = \"d\"\ncomand = [\"ls\"]\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("comand"), "{err}");
        let err = parse("[[tools]\n").unwrap_err().to_string();
        assert!(err.contains("m.toml"), "{err}");
    }

    #[test]
    fn toml_errors_are_one_line_with_line_and_column() {
        for (text, at, what) in [
            ("[[tools]\n", "line 1, column 9", "expected `]`"),
            (
                "[[tools]]\nname = \"x\"\ndescription = \"d\"\ncomand = [\"ls\"]\n",
                "line 4, column 1",
                "unknown field `comand`",
            ),
            (
                "[[tools]]\nname = \"x\"\ndestructive = \"yes\"\n",
                "line 3, column 15",
                "boolean",
            ),
            ("[[tools]]\nname = \"é\"\nx = = 1\n", "line 3, column 5", ""),
        ] {
            let err = parse(text).unwrap_err().to_string();
            assert!(!err.contains('\n'), "not one line: {err}");
            assert!(
                err.starts_with("invalid tools manifest `m.toml`: "),
                "{err}"
            );
            assert!(err.contains(at), "want `{at}` in: {err}");
            assert!(err.contains(what), "want `{what}` in: {err}");
        }
    }

    #[test]
    fn in_process_needs_a_command_and_others_refuse_one() {
        let err = parse("[[tools]]\nname = \"x\"\ndescription = \"d\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("needs `command"), "{err}");
        let err = parse(
            "[[tools]]\nname = \"x\"\ndescription = \"d\"\nmode = \"client_round_trip\"\ncommand = [\"ls\"]\n",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("takes no `command`"), "{err}");
    }

    #[test]
    fn a_schema_that_is_not_an_object_is_refused() {
        let err = parse(
            "[[tools]]\nname = \"x\"\ndescription = \"d\"\nmode = \"client_round_trip\"\nparameters = { type = \"string\" }\n",
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("type: \\\"object\\\"") || err.contains("\"object\""),
            "{err}"
        );
    }

    #[test]
    fn mcp_servers_are_declared_as_plain_data() {
        let d = parse_declarations(
            Path::new("m.toml"),
            "[[mcp]]\nname = \"notes\"\ncommand = \"/bin/notes\"\nargs = [\"-v\"]\n",
        )
        .unwrap();
        assert!(
            d.tools.is_empty(),
            "a manifest of servers alone is not empty"
        );
        assert_eq!(d.servers.len(), 1);
        assert_eq!(d.servers[0].command.as_deref(), Some("/bin/notes"));
        assert_eq!(d.servers[0].args, ["-v"]);
        let twice = "[[mcp]]\nname = \"a\"\nurl = \"http://h/mcp\"\n".repeat(2);
        let err = parse_declarations(Path::new("m.toml"), &twice)
            .unwrap_err()
            .to_string();
        assert!(err.contains("declared twice"), "{err}");
        let err = parse_declarations(Path::new("m.toml"), "[[mcp]]\nname = \"a\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("needs `command"), "{err}");
    }

    #[test]
    fn invalid_names_are_refused() {
        let err = parse(
            "[[tools]]\nname = \"has space\"\ndescription = \"d\"\nmode = \"client_round_trip\"\n",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("not a valid tool name"), "{err}");
    }
}

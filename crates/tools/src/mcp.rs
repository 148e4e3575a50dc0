//! MCP server declarations: plain data read from a tools-folder manifest or an agent
//! spec. The client that connects to them lives in `provrun-mcp`; this crate only says what
//! a declaration looks like and checks it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// How long a server may take to start and answer `initialize` and `tools/list` when a
/// declaration does not say (seconds).
pub const DEFAULT_MCP_STARTUP_TIMEOUT_S: u64 = 30;

/// One MCP server whose tools an agent may call.
///
/// Exactly one of `command` (a stdio server, started per run under the sandbox's
/// confinement) or `url` (a Streamable HTTP server) is set — or neither, in an agent spec,
/// to use the tools-folder declaration of the same `name`.
///
/// ```toml
/// [[mcp]]
/// name = "notes"                 # the server's name in evidence, and the default prefix
/// command = "/opt/mcp/notes"     # stdio: a program (absolute, or relative to the file)
/// args = ["--verbose"]
/// env = { NOTES_MODE = "plain" } # the only environment the server gets
/// # url = "https://mcp.example/mcp"   # Streamable HTTP instead of command
/// # bearer_token_env = "NOTES_TOKEN"  # sent as `Authorization: Bearer …`
/// prefix = "notes"               # tool `find` becomes `notes_find`; "" keeps names as listed
/// tools = ["find"]               # only these of the server's tools (default: all)
/// timeout_s = 30                 # start-up (initialize + tools/list) limit
/// destructive = false            # true: treat every tool of the server as destructive
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct McpServerSpec {
    /// The server's name: 1 to 32 ASCII letters, digits, `_` or `-`.
    pub name: String,
    /// A stdio server's program.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// A stdio server's arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Environment variables given to a stdio server (nothing of the host's is passed).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// A Streamable HTTP server's endpoint (`http://` or `https://`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The environment variable holding a bearer token for an HTTP server; the token never
    /// reaches evidence or logs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bearer_token_env: Option<String>,
    /// What the server's tool names are prefixed with (`PREFIX_tool`); default the
    /// server's name, `""` for none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// Only these of the server's tools (by the server's names); default all of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// Seconds the server may take to start and list its tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_s: Option<u64>,
    /// Treat every tool of the server as destructive, whatever its annotations say.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub destructive: bool,
}

/// How a declared server is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum McpTransportKind {
    /// A child process speaking JSON-RPC on its stdin and stdout.
    Stdio,
    /// Streamable HTTP.
    Http,
    /// Neither: a reference to a declaration elsewhere (an agent spec naming a
    /// tools-folder server).
    Reference,
}

fn valid_server_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 32
        && name
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
}

impl McpServerSpec {
    /// Which transport the declaration names.
    pub fn transport(&self) -> McpTransportKind {
        match (&self.command, &self.url) {
            (Some(_), _) => McpTransportKind::Stdio,
            (None, Some(_)) => McpTransportKind::Http,
            (None, None) => McpTransportKind::Reference,
        }
    }

    /// The prefix tool names get: the declared one, else the server's name.
    pub fn tool_prefix(&self) -> &str {
        self.prefix.as_deref().unwrap_or(&self.name)
    }

    /// The start-up limit in seconds.
    pub fn startup_timeout_s(&self) -> u64 {
        self.timeout_s.unwrap_or(DEFAULT_MCP_STARTUP_TIMEOUT_S)
    }

    /// Check what the types cannot; `Err` says what is wrong, in one line.
    pub fn check(&self, allow_reference: bool) -> Result<(), String> {
        let at = format!("MCP server `{}`", self.name);
        if !valid_server_name(&self.name) {
            return Err(format!(
                "{at}: the name must be 1 to 32 ASCII letters, digits, `_` or `-`"
            ));
        }
        if let Some(prefix) = &self.prefix
            && !prefix.is_empty()
            && !valid_server_name(prefix)
        {
            return Err(format!(
                "{at}: `prefix` must be empty or 1 to 32 ASCII letters, digits, `_` or `-`"
            ));
        }
        if self.timeout_s == Some(0) {
            return Err(format!("{at}: `timeout_s` must be at least 1"));
        }
        let stdio_only = !self.args.is_empty() || !self.env.is_empty();
        match self.transport() {
            McpTransportKind::Stdio => {
                if self.url.is_some() {
                    return Err(format!(
                        "{at}: give either `command` (stdio) or `url` (HTTP), not both"
                    ));
                }
                if self.command.as_deref().is_some_and(|c| c.trim().is_empty()) {
                    return Err(format!("{at}: `command` is empty"));
                }
                if self.bearer_token_env.is_some() {
                    return Err(format!(
                        "{at}: `bearer_token_env` is for HTTP servers (`url`), not stdio ones"
                    ));
                }
            }
            McpTransportKind::Http => {
                let url = self.url.as_deref().unwrap_or_default();
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(format!(
                        "{at}: `url` must start with http:// or https://, got `{url}`"
                    ));
                }
                if stdio_only {
                    return Err(format!(
                        "{at}: `args` and `env` are for stdio servers (`command`), not HTTP ones"
                    ));
                }
            }
            McpTransportKind::Reference => {
                if !allow_reference {
                    return Err(format!(
                        "{at}: needs `command = \"program\"` (stdio) or `url = \"…\"` (HTTP)"
                    ));
                }
                if stdio_only || self.bearer_token_env.is_some() {
                    return Err(format!(
                        "{at}: names no `command` or `url`, so it refers to a tools-folder \
                         declaration and takes no transport settings"
                    ));
                }
            }
        }
        for key in self.env.keys() {
            if key.is_empty() || key.contains('=') || key.contains('\0') {
                return Err(format!("{at}: `env` has an invalid variable name `{key}`"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(toml_text: &str) -> McpServerSpec {
        toml::from_str(toml_text).unwrap()
    }

    #[test]
    fn stdio_http_and_references_are_told_apart_and_checked() {
        let s = spec("name = \"a\"\ncommand = \"/bin/x\"\nargs = [\"-v\"]\n");
        assert_eq!(s.transport(), McpTransportKind::Stdio);
        assert_eq!(s.tool_prefix(), "a");
        s.check(false).unwrap();
        let h = spec("name = \"b\"\nurl = \"http://127.0.0.1:1/mcp\"\nprefix = \"\"\n");
        assert_eq!(h.transport(), McpTransportKind::Http);
        assert_eq!(h.tool_prefix(), "");
        h.check(false).unwrap();
        let r = spec("name = \"c\"\n");
        assert_eq!(r.transport(), McpTransportKind::Reference);
        assert!(r.check(false).unwrap_err().contains("needs `command"));
        r.check(true).unwrap();
    }

    #[test]
    fn bad_declarations_name_the_problem() {
        for (text, want) in [
            ("name = \"a b\"\ncommand = \"x\"", "the name must be"),
            (
                "name = \"a\"\ncommand = \"x\"\nurl = \"http://h\"",
                "not both",
            ),
            ("name = \"a\"\nurl = \"ftp://h\"", "must start with http"),
            (
                "name = \"a\"\nurl = \"http://h\"\nargs = [\"x\"]",
                "stdio servers",
            ),
            (
                "name = \"a\"\ncommand = \"x\"\nbearer_token_env = \"T\"",
                "for HTTP",
            ),
            ("name = \"a\"\ncommand = \"x\"\ntimeout_s = 0", "at least 1"),
            (
                "name = \"a\"\ncommand = \"x\"\nprefix = \"a.b\"",
                "`prefix`",
            ),
            ("name = \"a\"\ncommand = \" \"", "is empty"),
        ] {
            let err = spec(text).check(true).unwrap_err();
            assert!(err.contains(want), "{text}: {err}");
        }
        assert!(toml::from_str::<McpServerSpec>("name = \"a\"\ncomand = \"x\"").is_err());
    }
}

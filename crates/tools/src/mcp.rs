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
/// read_only = ["/opt/mcp/venv"]  # host paths the server may read (its virtualenv, its
///                                # node_modules); absolute, or relative to the file
/// network = false                # true: the server shares the host's network (recorded)
/// limits = { memory_bytes = 68719476736, cpu_s = 3600 }  # see `McpLimits`
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
    /// Host paths a stdio server may read, visible at the same paths (read-only): its
    /// virtualenv, its `node_modules` folder, its data. Absolute, or relative to the file
    /// that declares the server. Never the run's bundle, its `/output`, the folder
    /// `/scratch` is made in, or the host folder (refused at start).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read_only: Vec<String>,
    /// Give a stdio server the host's network (it has none otherwise, loopback
    /// included). Recorded in `run_started.details.mcp`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub network: bool,
    /// The stdio server's own process limits; unset fields keep [`McpLimits`]' defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<McpLimits>,
}

/// Default address space of an MCP server's processes: 64 GiB. Node reserves a large
/// virtual range for each WebAssembly memory (about 10 GiB), and V8's heap cage more;
/// this bounds mappings, not resident memory.
pub const DEFAULT_MCP_MEMORY_BYTES: u64 = 64 << 30;
/// Default CPU seconds per process of an MCP server: one hour (a server lives as long as
/// the run).
pub const DEFAULT_MCP_CPU_S: u64 = 3_600;
/// Default number of processes an MCP server may have at once.
pub const DEFAULT_MCP_PROCESSES: u64 = 256;
/// Default size of an MCP server's private `/tmp`: 256 MiB.
pub const DEFAULT_MCP_TMP_BYTES: u64 = 256 << 20;

/// A stdio MCP server's process limits (`[[mcp]]`'s `limits`), in place of the command
/// limits of the agent's `[limits]`, which are sized for short commands.
///
/// | field | default | what it bounds |
/// |---|---|---|
/// | `memory_bytes` | 64 GiB | address space per process (`RLIMIT_AS`) |
/// | `cpu_s` | 3 600 | CPU seconds per process (`RLIMIT_CPU`) |
/// | `processes` | 256 | processes at once |
/// | `tmp_bytes` | 256 MiB | size of the server's private `/tmp` |
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct McpLimits {
    /// Bytes of address space each process may map.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    /// CPU seconds each process may use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_s: Option<u64>,
    /// Processes the server may have at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<u64>,
    /// Size of the server's private `/tmp` in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tmp_bytes: Option<u64>,
}

impl McpLimits {
    /// Address space per process, default [`DEFAULT_MCP_MEMORY_BYTES`].
    pub fn memory_bytes(&self) -> u64 {
        self.memory_bytes.unwrap_or(DEFAULT_MCP_MEMORY_BYTES)
    }
    /// CPU seconds per process, default [`DEFAULT_MCP_CPU_S`].
    pub fn cpu_s(&self) -> u64 {
        self.cpu_s.unwrap_or(DEFAULT_MCP_CPU_S)
    }
    /// Processes at once, default [`DEFAULT_MCP_PROCESSES`].
    pub fn processes(&self) -> u64 {
        self.processes.unwrap_or(DEFAULT_MCP_PROCESSES)
    }
    /// Size of `/tmp`, default [`DEFAULT_MCP_TMP_BYTES`].
    pub fn tmp_bytes(&self) -> u64 {
        self.tmp_bytes.unwrap_or(DEFAULT_MCP_TMP_BYTES)
    }
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
    ///
    /// # Errors
    ///
    /// A one-line message when the name or prefix is not 1 to 32 letters, digits, `_` or `-`,
    /// or another field is out of range or missing for the transport.
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
        if let Some(limits) = &self.limits {
            for (field, value) in [
                ("memory_bytes", limits.memory_bytes),
                ("cpu_s", limits.cpu_s),
                ("processes", limits.processes),
                ("tmp_bytes", limits.tmp_bytes),
            ] {
                if value == Some(0) {
                    return Err(format!("{at}: `limits.{field}` must be at least 1"));
                }
            }
        }
        if self
            .read_only
            .iter()
            .any(|p| p.trim().is_empty() || p.contains('\0'))
        {
            return Err(format!("{at}: `read_only` has an empty or invalid path"));
        }
        let stdio_only = !self.args.is_empty()
            || !self.env.is_empty()
            || !self.read_only.is_empty()
            || self.network
            || self.limits.is_some();
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
                        "{at}: `args`, `env`, `read_only`, `network` and `limits` are for \
                         stdio servers (`command`), not HTTP ones"
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

    #[test]
    fn read_only_network_and_limits_are_for_stdio_servers() {
        let s = spec(
            "name = \"a\"\ncommand = \"/v/bin/s\"\nread_only = [\"/v\"]\nnetwork = true\n\
             limits = { memory_bytes = 1024, cpu_s = 5 }\n",
        );
        s.check(false).unwrap();
        let limits = s.limits.unwrap();
        assert_eq!(limits.memory_bytes(), 1024);
        assert_eq!(limits.cpu_s(), 5);
        assert_eq!(limits.processes(), DEFAULT_MCP_PROCESSES);
        assert_eq!(McpLimits::default().memory_bytes(), 64 << 30);
        for (text, want) in [
            ("url = \"http://h\"\nnetwork = true", "stdio servers"),
            ("url = \"http://h\"\nread_only = [\"/v\"]", "stdio servers"),
            ("command = \"x\"\nlimits = { cpu_s = 0 }", "`limits.cpu_s`"),
            ("command = \"x\"\nread_only = [\"\"]", "`read_only`"),
            ("network = true", "takes no transport settings"),
        ] {
            let err = spec(&format!("name = \"a\"\n{text}"))
                .check(true)
                .unwrap_err();
            assert!(err.contains(want), "{text}: {err}");
        }
        assert!(toml::from_str::<McpServerSpec>("name = \"a\"\nlimits = { ram = 1 }").is_err());
    }
}

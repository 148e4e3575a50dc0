//! [`ToolRegistry`]: the tools agents can call, by name.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::__private::LinkedTool;
use crate::args::ToolArgs;
use crate::context::RunContext;
use crate::error::ToolError;
use crate::manifest;
use crate::mcp::McpServerSpec;
use crate::output::ToolOutput;
use crate::tool::Tool;

/// An ordered, named collection of tools.
///
/// State lives in the value: a runtime holds one, tests build a fresh one per case. Tools
/// are kept sorted by name.
#[derive(Debug, Clone, Default)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Tool>,
    servers: BTreeMap<String, McpServerSpec>,
}

/// Every tool that `#[tool]` registered in the linked binary, built once per process.
fn linked_tools() -> &'static [Tool] {
    static LINKED: OnceLock<Vec<Tool>> = OnceLock::new();
    LINKED.get_or_init(|| {
        let mut tools: Vec<Tool> = inventory::iter::<LinkedTool>
            .into_iter()
            .map(LinkedTool::build)
            .collect();
        // Sort by name, then by description and schema so that a name registered twice (by
        // two crates) resolves the same way on every run.
        tools.sort_by(|a, b| {
            (a.name(), a.description(), a.schema().to_string()).cmp(&(
                b.name(),
                b.description(),
                b.schema().to_string(),
            ))
        });
        tools.dedup_by(|later, first| {
            let same = later.name() == first.name();
            if same {
                tracing::warn!(
                    tool = later.name(),
                    "two #[tool] functions in this binary share a name; keeping one"
                );
            }
            same
        });
        tools
    })
}

impl ToolRegistry {
    /// An empty registry.
    pub fn empty() -> Self {
        Self::default()
    }

    /// Every tool that `#[tool]` registered in this binary, sorted by name.
    ///
    /// Link-time registration has one pitfall: a crate that the binary never references is
    /// not linked, so its tools are missing. Reference the crate once, e.g.
    /// `use my_tools as _;` in the binary's `main.rs`.
    pub fn linked() -> Self {
        let tools = linked_tools()
            .iter()
            .map(|t| (t.name().to_string(), t.clone()))
            .collect();
        Self {
            tools,
            servers: BTreeMap::new(),
        }
    }

    /// The linked tools plus those of each tools folder, loaded in order (a later folder's
    /// tool replaces an earlier one of the same name).
    ///
    /// # Errors
    ///
    /// The errors of [`ToolRegistry::load_folder`] for the first folder that fails.
    pub fn new<I, P>(folders: I) -> Result<Self, ToolError>
    where
        I: IntoIterator<Item = P>,
        P: AsRef<Path>,
    {
        let mut registry = Self::linked();
        for folder in folders {
            registry.load_folder(folder)?;
        }
        Ok(registry)
    }

    /// Add a tool; one with the same name is replaced and returned.
    pub fn add(&mut self, tool: impl Into<Tool>) -> Option<Tool> {
        let tool = tool.into();
        self.tools.insert(tool.name().to_string(), tool)
    }

    /// Add a tool, refusing one whose name is already registered.
    ///
    /// # Errors
    ///
    /// [`ToolError::DuplicateTool`] when a tool of that name is already registered.
    pub fn register(&mut self, tool: impl Into<Tool>) -> Result<(), ToolError> {
        let tool = tool.into();
        if self.tools.contains_key(tool.name()) {
            return Err(ToolError::DuplicateTool {
                name: tool.name().to_string(),
            });
        }
        self.tools.insert(tool.name().to_string(), tool);
        Ok(())
    }

    /// Remove a tool by name, returning it.
    pub fn remove(&mut self, name: &str) -> Option<Tool> {
        self.tools.remove(name)
    }

    /// The tool of this name, if registered.
    pub fn tool(&self, name: &str) -> Option<&Tool> {
        self.tools.get(name)
    }

    /// The tools named, in the order named; an unknown name is an error that names it.
    ///
    /// # Errors
    ///
    /// [`ToolError::UnknownTool`] for the first name that is not registered.
    pub fn get<S: AsRef<str>>(&self, names: &[S]) -> Result<Vec<Tool>, ToolError> {
        names
            .iter()
            .map(|name| {
                self.tools
                    .get(name.as_ref())
                    .cloned()
                    .ok_or_else(|| self.unknown(name.as_ref()))
            })
            .collect()
    }

    fn unknown(&self, name: &str) -> ToolError {
        let known = if self.tools.is_empty() {
            "none".to_string()
        } else {
            self.tools.keys().cloned().collect::<Vec<_>>().join(", ")
        };
        ToolError::UnknownTool {
            name: name.to_string(),
            known,
        }
    }

    /// Add an MCP server declaration; one with the same name is replaced and returned.
    pub fn add_mcp_server(&mut self, server: McpServerSpec) -> Option<McpServerSpec> {
        self.servers.insert(server.name.clone(), server)
    }

    /// The MCP server declared under this name (by a tools folder or `add_mcp_server`).
    pub fn mcp_server(&self, name: &str) -> Option<&McpServerSpec> {
        self.servers.get(name)
    }

    /// Every MCP server declaration, sorted by name.
    pub fn mcp_servers(&self) -> impl Iterator<Item = &McpServerSpec> {
        self.servers.values()
    }

    /// All tools, sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = &Tool> {
        self.tools.values()
    }

    /// All names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tools.keys().map(String::as_str)
    }

    /// How many tools are registered.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether no tool is registered.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// Read every manifest (`*.toml`) in `folder` and add its tools (and its MCP server
    /// declarations, see [`ToolRegistry::mcp_servers`]); returns how many tools.
    ///
    /// Files whose names start with `_` are skipped, as are files that are not `.toml`.
    /// Manifests are read in name order. A manifest with no tools, an invalid manifest, or
    /// two manifests in the folder declaring the same tool name is an error, and then
    /// nothing from the folder is added.
    ///
    /// # Errors
    ///
    /// [`ToolError::Io`] when the folder or a manifest cannot be read;
    /// [`ToolError::InvalidManifest`] or [`ToolError::EmptyManifest`] for a bad manifest (or a tool
    /// error such as [`ToolError::InvalidName`] for a tool in it), and
    /// [`ToolError::InvalidManifest`] when two manifests declare the same tool or MCP server.
    #[allow(clippy::disallowed_methods)] // lists the operator's tools folder, not model input
    pub fn load_folder(&mut self, folder: impl AsRef<Path>) -> Result<usize, ToolError> {
        let folder = folder.as_ref();
        let io = |source| ToolError::Io {
            path: folder.to_path_buf(),
            source,
        };
        let mut paths: Vec<PathBuf> = Vec::new();
        for entry in std::fs::read_dir(folder).map_err(io)? {
            let entry = entry.map_err(io)?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with('_') || !name.ends_with(".toml") {
                continue;
            }
            if entry.file_type().map_err(io)?.is_dir() {
                continue;
            }
            paths.push(entry.path());
        }
        paths.sort();

        let mut loaded: BTreeMap<String, (Tool, PathBuf)> = BTreeMap::new();
        let mut servers: BTreeMap<String, (McpServerSpec, PathBuf)> = BTreeMap::new();
        for path in paths {
            let declared = manifest::load_manifest(&path)?;
            for server in declared.servers {
                if let Some((_, first)) = servers.get(&server.name) {
                    return Err(ToolError::InvalidManifest {
                        path: path.clone(),
                        message: format!(
                            "MCP server `{}` is also declared in `{}`",
                            server.name,
                            first.display()
                        ),
                    });
                }
                servers.insert(server.name.clone(), (server, path.clone()));
            }
            for tool in declared.tools {
                if let Some((_, first)) = loaded.get(tool.name()) {
                    return Err(ToolError::InvalidManifest {
                        path: path.clone(),
                        message: format!(
                            "tool `{}` is also declared in `{}`",
                            tool.name(),
                            first.display()
                        ),
                    });
                }
                loaded.insert(tool.name().to_string(), (tool, path.clone()));
            }
        }
        let count = loaded.len();
        for (_, (tool, _)) in loaded {
            self.add(tool);
        }
        for (_, (server, _)) in servers {
            self.add_mcp_server(server);
        }
        Ok(count)
    }

    /// Call a registered sync tool by name; see [`Tool::call`].
    ///
    /// # Errors
    ///
    /// [`ToolError::UnknownTool`] when no tool has this name; otherwise as [`Tool::call`].
    pub fn call(
        &self,
        name: &str,
        args: impl Into<ToolArgs>,
        ctx: Option<&RunContext>,
    ) -> Result<ToolOutput, ToolError> {
        let tool = self.tools.get(name).ok_or_else(|| self.unknown(name))?;
        tool.call(args, ctx)
    }

    /// Call a registered tool by name, sync or async; see [`Tool::acall`].
    ///
    /// # Errors
    ///
    /// [`ToolError::UnknownTool`] when no tool has this name; otherwise as [`Tool::acall`].
    pub async fn acall(
        &self,
        name: &str,
        args: impl Into<ToolArgs>,
        ctx: Option<&RunContext>,
    ) -> Result<ToolOutput, ToolError> {
        let tool = self.tools.get(name).ok_or_else(|| self.unknown(name))?;
        tool.acall(args, ctx).await
    }
}

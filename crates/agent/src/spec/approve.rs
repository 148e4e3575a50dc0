//! The agent spec's `approve` policy: which tool calls pause a run for a human's approval.

use serde::{Deserialize, Serialize};

/// Which tool calls pause the run for a human's approval.
///
/// In the spec, one word (`"none"`, `"destructive"`, `"all"`) or a list of tool
/// categories (`read`, `write`, `execute`, `network`, `search`, `other`), tool names and
/// the word `destructive`: `approve = ["write", "execute", "copy_to_host"]` pauses on
/// every call of a tool in one of those categories, of a tool of that name, or (with
/// `destructive` in the list) of a destructive tool.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ApprovePolicy {
    /// None: unattended runs and scripts are never left waiting (the default).
    #[default]
    None,
    /// Calls of tools marked `destructive`.
    Destructive,
    /// Every tool call.
    All,
    /// Calls of tools in one of these categories, of these names, or (the entry
    /// `destructive`) marked destructive.
    Listed(Vec<String>),
}

/// The words a listed approval policy knows besides tool names.
const APPROVE_CATEGORIES: [&str; 6] = ["read", "write", "execute", "network", "search", "other"];

impl ApprovePolicy {
    /// Whether a call of a tool named `name`, in `category` (as
    /// [`provrun_tools::ToolCategory::as_str`] spells it), destructive or not, waits for
    /// approval under this policy.
    pub fn wants(&self, name: &str, category: &str, destructive: bool) -> bool {
        match self {
            ApprovePolicy::None => false,
            ApprovePolicy::Destructive => destructive,
            ApprovePolicy::All => true,
            ApprovePolicy::Listed(entries) => entries
                .iter()
                .any(|e| e == name || e == category || (destructive && e == "destructive")),
        }
    }

    /// The entries of a list that are neither a category nor `destructive`: tool names.
    pub fn tool_names(&self) -> Vec<&str> {
        match self {
            ApprovePolicy::Listed(entries) => entries
                .iter()
                .map(String::as_str)
                .filter(|e| *e != "destructive" && !APPROVE_CATEGORIES.contains(e))
                .collect(),
            _ => Vec::new(),
        }
    }
}

impl Serialize for ApprovePolicy {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            ApprovePolicy::None => serializer.serialize_str("none"),
            ApprovePolicy::Destructive => serializer.serialize_str("destructive"),
            ApprovePolicy::All => serializer.serialize_str("all"),
            ApprovePolicy::Listed(entries) => entries.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for ApprovePolicy {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = ApprovePolicy;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(
                    "\"none\", \"destructive\", \"all\" or a list of tool categories and tool names",
                )
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<ApprovePolicy, E> {
                match v {
                    "none" => Ok(ApprovePolicy::None),
                    "destructive" => Ok(ApprovePolicy::Destructive),
                    "all" => Ok(ApprovePolicy::All),
                    other => Err(E::invalid_value(serde::de::Unexpected::Str(other), &self)),
                }
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<ApprovePolicy, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = seq.next_element::<String>()? {
                    entries.push(entry);
                }
                Ok(ApprovePolicy::Listed(entries))
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

impl schemars::JsonSchema for ApprovePolicy {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ApprovePolicy".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "Which tool calls pause the run for approval: a word, or a list \
                            of tool categories, tool names and `destructive`.",
            "oneOf": [
                {"type": "string", "enum": ["none", "destructive", "all"]},
                {"type": "array", "items": {"type": "string"}}
            ]
        })
    }
}

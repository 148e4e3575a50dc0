//! The program's environment: the caller's, with every key replaced by a placeholder, the
//! API base URLs pointing at the proxy's ports inside the sandbox, and the proxy
//! variables pointing at its CONNECT port.

use std::collections::BTreeMap;

use provrun_sandbox::HOME_INSIDE;

/// The port inside the sandbox that reaches the OpenAI side of the proxy.
pub const OPENAI_PORT: u16 = 47800;
/// The port inside the sandbox that reaches the Anthropic side of the proxy.
pub const ANTHROPIC_PORT: u16 = 47801;
/// The port inside the sandbox that reaches the proxy's CONNECT side.
pub const CONNECT_PORT: u16 = 47802;

/// The value the program finds in `OPENAI_API_KEY`.
pub const OPENAI_PLACEHOLDER: &str = "sk-provrun-wrap-placeholder-openai";
/// The value the program finds in `ANTHROPIC_API_KEY`.
pub const ANTHROPIC_PLACEHOLDER: &str = "sk-ant-provrun-wrap-placeholder";
/// The value the program finds in `ANTHROPIC_AUTH_TOKEN`, when the caller had one.
pub const ANTHROPIC_TOKEN_PLACEHOLDER: &str = "provrun-wrap-placeholder-token";

/// The variables holding credentials, and the placeholder each gets.
const KEYS: &[(&str, &str)] = &[
    ("OPENAI_API_KEY", OPENAI_PLACEHOLDER),
    ("ANTHROPIC_API_KEY", ANTHROPIC_PLACEHOLDER),
    ("ANTHROPIC_AUTH_TOKEN", ANTHROPIC_TOKEN_PLACEHOLDER),
];

/// The proxy variables, in both cases: the caller's are dropped, ours set.
const PROXY_VARS: &[&str] = &[
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "ALL_PROXY",
    "all_proxy",
    "NO_PROXY",
    "no_proxy",
];

/// The real credentials found in the caller's environment (what the proxy puts on the
/// upstream requests; never given to the program).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secrets {
    /// `OPENAI_API_KEY`.
    pub openai_key: Option<String>,
    /// `ANTHROPIC_API_KEY`.
    pub anthropic_key: Option<String>,
    /// `ANTHROPIC_AUTH_TOKEN` (sent as `Authorization: Bearer`).
    pub anthropic_token: Option<String>,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown = |s: &Option<String>| if s.is_some() { "[set]" } else { "[unset]" };
        f.debug_struct("Secrets")
            .field("openai_key", &shown(&self.openai_key))
            .field("anthropic_key", &shown(&self.anthropic_key))
            .field("anthropic_token", &shown(&self.anthropic_token))
            .finish()
    }
}

impl Secrets {
    /// The credentials in `env` (empty values count as unset).
    pub fn from_env(env: &[(String, String)]) -> Secrets {
        let get = |name: &str| {
            env.iter()
                .find(|(k, v)| k == name && !v.is_empty())
                .map(|(_, v)| v.clone())
        };
        Secrets {
            openai_key: get("OPENAI_API_KEY"),
            anthropic_key: get("ANTHROPIC_API_KEY"),
            anthropic_token: get("ANTHROPIC_AUTH_TOKEN"),
        }
    }

    /// Every secret value (of four bytes or more): what must never reach the program or,
    /// from the proxy's side, the bundle.
    pub fn values(&self) -> Vec<String> {
        [&self.openai_key, &self.anthropic_key, &self.anthropic_token]
            .into_iter()
            .flatten()
            .filter(|s| s.len() >= 4)
            .cloned()
            .collect()
    }
}

/// The program's environment, built from the caller's `env`: the keys replaced by
/// placeholders (and any other variable holding a key's value too), the caller's proxy
/// variables dropped, and the base URLs, proxy variables and `CODEX_HOME` set. `HOME`,
/// `TMPDIR` and `PWD` are the sandbox's.
pub fn program_env(env: &[(String, String)], secrets: &Secrets) -> Vec<(String, String)> {
    let values = secrets.values();
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    for (k, v) in env {
        if PROXY_VARS.contains(&k.as_str()) || matches!(k.as_str(), "HOME" | "TMPDIR" | "PWD") {
            continue;
        }
        let value = if let Some((_, placeholder)) = KEYS.iter().find(|(name, _)| name == k) {
            (*placeholder).to_owned()
        } else if values.iter().any(|s| v.contains(s.as_str())) {
            // A copy of a key under another name is no less a key.
            OPENAI_PLACEHOLDER.to_owned()
        } else {
            v.clone()
        };
        out.insert(k.clone(), value);
    }
    for (name, placeholder) in KEYS {
        let caller_had = env.iter().any(|(k, _)| k == name);
        if caller_had || *name != "ANTHROPIC_AUTH_TOKEN" {
            out.insert((*name).to_owned(), (*placeholder).to_owned());
        }
    }
    let proxy = format!("http://127.0.0.1:{CONNECT_PORT}");
    let set = [
        (
            "OPENAI_BASE_URL",
            format!("http://127.0.0.1:{OPENAI_PORT}/v1"),
        ),
        (
            "ANTHROPIC_BASE_URL",
            format!("http://127.0.0.1:{ANTHROPIC_PORT}"),
        ),
        ("CODEX_HOME", format!("{HOME_INSIDE}/.codex")),
        ("HTTPS_PROXY", proxy.clone()),
        ("https_proxy", proxy.clone()),
        ("HTTP_PROXY", proxy.clone()),
        ("http_proxy", proxy),
        ("NO_PROXY", "127.0.0.1,localhost".to_owned()),
        ("no_proxy", "127.0.0.1,localhost".to_owned()),
    ];
    for (k, v) in set {
        out.insert(k.to_owned(), v);
    }
    out.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn keys_become_placeholders_and_the_base_urls_point_at_the_proxy() {
        let caller = env(&[
            ("OPENAI_API_KEY", "sk-real-1234"),
            ("ANTHROPIC_API_KEY", "sk-ant-real-5678"),
            ("COPY_OF_KEY", "Bearer sk-real-1234"),
            ("HTTPS_PROXY", "http://corp:3128"),
            ("HOME", "/root"),
            ("LANG", "en_GB.UTF-8"),
            ("OPENAI_BASE_URL", "https://api.example/v1"),
        ]);
        let secrets = Secrets::from_env(&caller);
        let out: BTreeMap<_, _> = program_env(&caller, &secrets).into_iter().collect();
        assert_eq!(out["OPENAI_API_KEY"], OPENAI_PLACEHOLDER);
        assert_eq!(out["ANTHROPIC_API_KEY"], ANTHROPIC_PLACEHOLDER);
        assert_eq!(out["COPY_OF_KEY"], OPENAI_PLACEHOLDER);
        assert_eq!(out["OPENAI_BASE_URL"], "http://127.0.0.1:47800/v1");
        assert_eq!(out["ANTHROPIC_BASE_URL"], "http://127.0.0.1:47801");
        assert_eq!(out["HTTPS_PROXY"], "http://127.0.0.1:47802");
        assert_eq!(out["LANG"], "en_GB.UTF-8");
        assert_eq!(out["CODEX_HOME"], "/home/provrun/.codex");
        assert!(!out.contains_key("HOME") && !out.contains_key("ANTHROPIC_AUTH_TOKEN"));
        let all: String = out.values().cloned().collect();
        assert!(!all.contains("sk-real-1234") && !all.contains("sk-ant-real-5678"));
        assert!(!format!("{secrets:?}").contains("real"));
    }
}

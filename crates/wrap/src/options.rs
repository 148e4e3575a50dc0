//! What a wrapped run is asked to do: [`WrapOptions`], the hosts a program may reach
//! ([`AllowedHost`]) and where each API's requests go ([`Upstreams`]).

use std::path::PathBuf;

use provrun_sandbox::Limits;

use crate::error::WrapError;

/// The public endpoint of the OpenAI API (Chat Completions, Responses).
pub const OPENAI_PUBLIC: &str = "https://api.openai.com/v1";
/// The public endpoint of the Anthropic API (Messages).
pub const ANTHROPIC_PUBLIC: &str = "https://api.anthropic.com";

/// One wrapped run: the program, its folders, the hosts it may reach and where its model
/// requests go.
#[derive(Debug, Clone)]
pub struct WrapOptions {
    /// The bundle to write (must not exist, or be an empty folder).
    pub out: PathBuf,
    /// Files and folders staged as `/input` (read-only to the program).
    pub inputs: Vec<PathBuf>,
    /// The program's working folder (writable); its final files become the outputs.
    /// `None`: the bundle's own `output/` folder, empty at the start.
    pub workspace: Option<PathBuf>,
    /// Host paths the program may read (its installation), at their own paths.
    pub read_only: Vec<PathBuf>,
    /// Hosts the program may reach through the proxy's CONNECT tunnels.
    pub allow_hosts: Vec<AllowedHost>,
    /// Where the proxy sends each API's requests.
    pub upstreams: Upstreams,
    /// The program and its arguments.
    pub argv: Vec<String>,
    /// The caller's environment (the program gets it with the keys replaced).
    pub env: Vec<(String, String)>,
    /// The sandbox's limits (quotas, per-process limits).
    pub limits: Limits,
    /// The builder the bundle names (`run_started.builder`, and so the statement's
    /// `builder.id`): an organisation's own URI (the CLI reads `PROVRUN_BUILDER_ID`), or
    /// `None` for [`crate::WRAP_BUILDER`].
    pub builder: Option<String>,
}

impl WrapOptions {
    /// The limits a wrapped program gets by default: the command limits, except 64 GiB of
    /// address space (the JavaScript engines of agent CLIs reserve tens of gigabytes they
    /// never touch) and one CPU hour per process (a session runs longer than a command).
    pub fn default_limits() -> Limits {
        Limits {
            command_memory_bytes: 64 << 30,
            command_cpu_s: 3600,
            ..Limits::default()
        }
    }
}

/// A host a program may reach through a CONNECT tunnel: `HOST` (port 443) or
/// `HOST:PORT`, matched exactly (case-insensitive) against what the program asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedHost {
    /// The host name or address, lower case (an IPv6 address without brackets).
    pub host: String,
    /// The port.
    pub port: u16,
}

impl AllowedHost {
    /// Parses `HOST`, `HOST:PORT`, `[V6]` or `[V6]:PORT`.
    ///
    /// # Errors
    ///
    /// [`WrapError::SetUp`] when the text is not a host name or address with an optional port
    /// from 1 to 65535 (an IPv6 address must be in brackets).
    pub fn parse(text: &str) -> Result<AllowedHost, WrapError> {
        let bad = |why: &str| WrapError::SetUp(format!("--allow-host `{text}`: {why}"));
        let (host, port) = if let Some(rest) = text.strip_prefix('[') {
            let (host, after) = rest.split_once(']').ok_or_else(|| bad("no closing `]`"))?;
            match after.strip_prefix(':') {
                Some(p) => (host, Some(p)),
                None if after.is_empty() => (host, None),
                None => return Err(bad("expected `:PORT` after `]`")),
            }
        } else {
            match text.rsplit_once(':') {
                Some((h, p)) if !h.contains(':') => (h, Some(p)),
                Some(_) => return Err(bad("write an IPv6 address in brackets")),
                None => (text, None),
            }
        };
        let valid = !host.is_empty()
            && host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '_'));
        if !valid {
            return Err(bad("not a host name or address"));
        }
        let port = match port {
            None => 443,
            Some(p) => p
                .parse::<u16>()
                .ok()
                .filter(|p| *p != 0)
                .ok_or_else(|| bad("not a port number"))?,
        };
        Ok(AllowedHost {
            host: host.to_ascii_lowercase(),
            port,
        })
    }

    /// Whether a request for `host:port` is this one.
    pub fn matches(&self, host: &str, port: u16) -> bool {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        self.port == port && self.host.eq_ignore_ascii_case(host)
    }
}

impl std::fmt::Display for AllowedHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// Where the proxy sends each API's requests: base URLs without a trailing `/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upstreams {
    /// The OpenAI API's base, ending in `/v1` as `OPENAI_BASE_URL` does.
    pub openai: String,
    /// The Anthropic API's origin, as `ANTHROPIC_BASE_URL`.
    pub anthropic: String,
}

impl Upstreams {
    /// Each API's upstream: the flag when given, else the variable the caller's
    /// environment held (`OPENAI_BASE_URL`, `ANTHROPIC_BASE_URL`), else the public
    /// endpoint. Each must be an `http://` or `https://` URL.
    ///
    /// # Errors
    ///
    /// [`WrapError::SetUp`] when an upstream is not an `http://` or `https://` URL with a host.
    pub fn resolve(
        openai: Option<&str>,
        anthropic: Option<&str>,
        env: &[(String, String)],
    ) -> Result<Upstreams, WrapError> {
        let var = |name: &str| {
            env.iter()
                .find(|(k, v)| k == name && !v.is_empty())
                .map(|(_, v)| v.as_str())
        };
        let pick = |flag: Option<&str>, name: &str, public: &str, what: &str| {
            let url = flag.or_else(|| var(name)).unwrap_or(public);
            check_url(url, what)
        };
        Ok(Upstreams {
            openai: pick(
                openai,
                "OPENAI_BASE_URL",
                OPENAI_PUBLIC,
                "the OpenAI upstream (--upstream-openai or OPENAI_BASE_URL)",
            )?,
            anthropic: pick(
                anthropic,
                "ANTHROPIC_BASE_URL",
                ANTHROPIC_PUBLIC,
                "the Anthropic upstream (--upstream-anthropic or ANTHROPIC_BASE_URL)",
            )?,
        })
    }
}

/// `url` without its trailing `/`, when it is an `http://` or `https://` URL with a host.
fn check_url(url: &str, what: &str) -> Result<String, WrapError> {
    let parsed = reqwest::Url::parse(url)
        .map_err(|e| WrapError::SetUp(format!("{what}: `{url}` is not a URL: {e}")))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        return Err(WrapError::SetUp(format!(
            "{what}: `{url}` must be an http:// or https:// URL with a host"
        )));
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(WrapError::SetUp(format!(
            "{what}: `{url}` must not carry a query or a fragment"
        )));
    }
    Ok(url.trim_end_matches('/').to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowed_hosts_parse_with_a_default_port_of_443() {
        let h = AllowedHost::parse("Example.COM").unwrap();
        assert_eq!((h.host.as_str(), h.port), ("example.com", 443));
        assert!(h.matches("example.com", 443) && !h.matches("example.com", 80));
        let h = AllowedHost::parse("127.0.0.2:8080").unwrap();
        assert_eq!((h.host.as_str(), h.port), ("127.0.0.2", 8080));
        let h = AllowedHost::parse("[::1]:9").unwrap();
        assert_eq!((h.host.as_str(), h.port), ("::1", 9));
        assert!(h.matches("[::1]", 9));
        assert_eq!(h.to_string(), "[::1]:9");
        for bad in [
            "", "a b", "host:0", "host:x", "::1", "[::1", "[::1]x", "h/ost",
        ] {
            assert!(AllowedHost::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn upstreams_come_from_the_flag_then_the_variable_then_the_public_endpoint() {
        let env = vec![(
            "ANTHROPIC_BASE_URL".to_string(),
            "http://127.0.0.1:9/".to_string(),
        )];
        let u = Upstreams::resolve(Some("https://gw.example/openai/v1/"), None, &env).unwrap();
        assert_eq!(u.openai, "https://gw.example/openai/v1");
        assert_eq!(u.anthropic, "http://127.0.0.1:9");
        let u = Upstreams::resolve(None, None, &[]).unwrap();
        assert_eq!(u.openai, OPENAI_PUBLIC);
        assert_eq!(u.anthropic, ANTHROPIC_PUBLIC);
        for bad in ["ftp://x", "not a url", "http://x/v1?k=1"] {
            assert!(Upstreams::resolve(Some(bad), None, &[]).is_err(), "{bad}");
        }
    }
}

//! Headers through the proxy: what goes upstream (the program's, without its placeholder
//! credential and the hop-by-hop ones, with the real credential), what goes back to the
//! program, and what is recorded (never a credential).

use hyper::header::{HeaderMap, HeaderName, HeaderValue};

use super::redact::Masker;
use super::route::Api;
use crate::env::Secrets;

/// Headers that belong to one connection (RFC 9110 §7.6.1), or that the proxy sets
/// itself (`host`, `content-length`, `accept-encoding`).
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authorization",
    "proxy-authenticate",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
    "accept-encoding",
];

/// Headers that carry credentials: never recorded, and the program's never forwarded
/// (they hold placeholders).
const CREDENTIALS: &[&str] = &[
    "authorization",
    "x-api-key",
    "api-key",
    "x-goog-api-key",
    "proxy-authorization",
    "cookie",
    "set-cookie",
];

fn is_credential(name: &HeaderName) -> bool {
    CREDENTIALS.contains(&name.as_str())
}

/// The headers to send upstream for a request the program sent with `from` on `api`:
/// its own without hop-by-hop headers and credentials, asking for an uncompressed body
/// (so that the recorded bytes can be read back), with the real credential of `secrets`.
pub fn upstream_request(from: &HeaderMap, api: Api, secrets: &Secrets) -> HeaderMap {
    let mut out = HeaderMap::new();
    for (name, value) in from {
        if HOP_BY_HOP.contains(&name.as_str()) || is_credential(name) {
            continue;
        }
        out.append(name.clone(), value.clone());
    }
    out.insert(
        hyper::header::ACCEPT_ENCODING,
        HeaderValue::from_static("identity"),
    );
    let bearer = |token: &str| {
        HeaderValue::from_str(&format!("Bearer {token}"))
            .ok()
            .map(|mut v| {
                v.set_sensitive(true);
                v
            })
    };
    let plain = |key: &str| {
        HeaderValue::from_str(key).ok().map(|mut v| {
            v.set_sensitive(true);
            v
        })
    };
    match api {
        Api::OpenAi => {
            if let Some(v) = secrets.openai_key.as_deref().and_then(bearer) {
                out.insert(hyper::header::AUTHORIZATION, v);
            }
        }
        Api::Anthropic => {
            let wants_bearer = from.contains_key(hyper::header::AUTHORIZATION);
            let token = secrets.anthropic_token.as_deref().and_then(bearer);
            let key = secrets.anthropic_key.as_deref().and_then(plain);
            match (wants_bearer, token, key) {
                (true, Some(t), _) | (false, Some(t), None) => {
                    out.insert(hyper::header::AUTHORIZATION, t);
                }
                (_, _, Some(k)) => {
                    out.insert(HeaderName::from_static("x-api-key"), k);
                }
                _ => {}
            }
        }
    }
    out
}

/// The headers to give the program for an upstream response's `from`: without
/// hop-by-hop headers (hyper frames the body itself), keeping the length, and without
/// the credentials an upstream sets (`Set-Cookie`: the program's cookies never go
/// upstream, so they are of no use to it).
pub fn to_program(from: &HeaderMap) -> HeaderMap {
    to_program_masked(from, &Masker::default())
}

/// [`to_program`], with every secret `masker` finds in a value masked (in any of its
/// forms, byte for byte by `*`).
pub fn to_program_masked(from: &HeaderMap, masker: &Masker) -> HeaderMap {
    let mut out = HeaderMap::new();
    for (name, value) in from {
        let framing = name.as_str() == "content-length";
        if (HOP_BY_HOP.contains(&name.as_str()) && !framing) || is_credential(name) {
            continue;
        }
        let mut bytes = value.as_bytes().to_vec();
        if masker.mask(&mut bytes) {
            // `*` is a visible character: the masked value is a valid one.
            if let Ok(v) = HeaderValue::from_bytes(&bytes) {
                out.append(name.clone(), v);
            }
            continue;
        }
        out.append(name.clone(), value.clone());
    }
    out
}

/// What the evidence keeps of `headers`: each `[name, value]` in order, without
/// credentials and without any header whose value holds one of `secrets` (lossy UTF-8);
/// and the names left out.
pub fn recorded(headers: &HeaderMap, secrets: &[String]) -> (Vec<[String; 2]>, Vec<String>) {
    recorded_masked(headers, &Masker::new(secrets))
}

/// [`recorded`], leaving out every header whose value holds a secret `masker` finds (in
/// any of its forms).
pub fn recorded_masked(headers: &HeaderMap, masker: &Masker) -> (Vec<[String; 2]>, Vec<String>) {
    let mut kept = Vec::new();
    let mut removed = Vec::new();
    for (name, value) in headers {
        let text = String::from_utf8_lossy(value.as_bytes()).into_owned();
        let holds_secret = masker.holds(value.as_bytes()) || masker.holds(name.as_str().as_bytes());
        if is_credential(name) || holds_secret {
            if !removed.iter().any(|r| r == name.as_str()) {
                removed.push(name.as_str().to_owned());
            }
            continue;
        }
        kept.push([name.as_str().to_owned(), text]);
    }
    (kept, removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut m = HeaderMap::new();
        for (k, v) in pairs {
            m.append(*k, HeaderValue::from_str(v).unwrap());
        }
        m
    }

    fn secrets() -> Secrets {
        Secrets {
            openai_key: Some("sk-real-openai".into()),
            anthropic_key: Some("sk-ant-real".into()),
            anthropic_token: None,
        }
    }

    #[test]
    fn the_placeholder_is_replaced_by_the_real_key_upstream() {
        let from = map(&[
            ("authorization", "Bearer sk-provrun-wrap-placeholder-openai"),
            ("content-type", "application/json"),
            ("accept-encoding", "zstd,gzip"),
            ("connection", "keep-alive"),
            ("x-custom", "kept"),
        ]);
        let out = upstream_request(&from, Api::OpenAi, &secrets());
        assert_eq!(out["authorization"], "Bearer sk-real-openai");
        assert!(out["authorization"].is_sensitive());
        assert_eq!(out["accept-encoding"], "identity");
        assert_eq!(out["x-custom"], "kept");
        assert!(!out.contains_key("connection"));

        let from = map(&[("x-api-key", "sk-ant-provrun-wrap-placeholder")]);
        let out = upstream_request(&from, Api::Anthropic, &secrets());
        assert_eq!(out["x-api-key"], "sk-ant-real");
        assert!(!out.contains_key("authorization"));

        // Without a key the placeholder still does not go upstream.
        let out = upstream_request(&from, Api::Anthropic, &Secrets::default());
        assert!(!out.contains_key("x-api-key"));
    }

    #[test]
    fn recorded_headers_hold_no_credential() {
        let from = map(&[
            ("authorization", "Bearer sk-provrun-wrap-placeholder-openai"),
            ("x-api-key", "k"),
            ("x-echo", "has sk-real-openai in it"),
            ("user-agent", "codex"),
        ]);
        let (kept, removed) = recorded(&from, &secrets().values());
        assert_eq!(kept, vec![["user-agent".to_string(), "codex".to_string()]]);
        assert_eq!(removed, ["authorization", "x-api-key", "x-echo"]);
        // Escaped, it is found all the same.
        let from = map(&[("x-echo", "sk%2Dreal%2Dopenai")]);
        let (kept, removed) = recorded(&from, &secrets().values());
        assert!(kept.is_empty());
        assert_eq!(removed, ["x-echo"]);
    }

    #[test]
    fn the_program_gets_no_cookie_and_no_key_in_a_header() {
        let from = map(&[
            ("set-cookie", "session=sk-real-openai"),
            ("x-echo-key", "sk-real-openai"),
            ("x-echo-escaped", "sk\\u002dreal-openai"),
            ("content-length", "12"),
            ("transfer-encoding", "chunked"),
            ("x-request-id", "req_1"),
        ]);
        let out = to_program_masked(&from, &Masker::new(&secrets().values()));
        assert!(!out.contains_key("set-cookie"));
        assert!(!out.contains_key("transfer-encoding"));
        assert_eq!(out["x-echo-key"], "**************");
        assert_eq!(out["x-echo-escaped"], "*".repeat(19));
        assert_eq!(out["content-length"], "12");
        assert_eq!(out["x-request-id"], "req_1");
        assert!(!to_program(&from).contains_key("set-cookie"));
    }
}

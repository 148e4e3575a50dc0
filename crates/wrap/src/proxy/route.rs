//! Which API a request is for, whether it asks a model for a generation, and where the
//! proxy sends it.

use provrun_model::WireApi;

/// The API side of the proxy a request came in on (each has a port of its own inside the
/// sandbox, so the program's SDKs need no path prefix).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// The OpenAI API: Chat Completions and Responses (`OPENAI_BASE_URL`).
    OpenAi,
    /// The Anthropic API: Messages (`ANTHROPIC_BASE_URL`).
    Anthropic,
}

impl Api {
    /// The name the evidence uses (`openai`, `anthropic`).
    pub fn as_str(self) -> &'static str {
        match self {
            Api::OpenAi => "openai",
            Api::Anthropic => "anthropic",
        }
    }
}

/// What a request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// A model generation in this wire format: recorded as `model_called`.
    Generation(WireApi),
    /// Anything else, by kind (`count_tokens`, `models`, `other`): recorded as
    /// `http_exchanged`.
    Other(&'static str),
}

/// Classifies a request by its API, method and path (the query is ignored): a `POST` to
/// `…/chat/completions` or `…/responses` (OpenAI) or `…/messages` (Anthropic) is a
/// generation; token counting and model listing are named; anything else is `other`.
pub fn classify(api: Api, method: &str, path: &str) -> Route {
    let path = path.split('?').next().unwrap_or("").trim_end_matches('/');
    let post = method.eq_ignore_ascii_case("POST");
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let last = segments.last().copied().unwrap_or("");
    let before = segments.len().checked_sub(2).map_or("", |i| segments[i]);
    match api {
        Api::OpenAi if post && last == "completions" && before == "chat" => {
            Route::Generation(WireApi::ChatCompletions)
        }
        Api::OpenAi if post && last == "responses" => Route::Generation(WireApi::OpenAiResponses),
        Api::Anthropic if post && last == "messages" => {
            Route::Generation(WireApi::AnthropicMessages)
        }
        _ if last == "count_tokens" || last == "input_tokens" => Route::Other("count_tokens"),
        _ if last == "models" || before == "models" => Route::Other("models"),
        _ => Route::Other("other"),
    }
}

/// The upstream URL for `path_and_query` on `api`, whose upstream base is `base` (no
/// trailing `/`). The OpenAI base ends in `/v1` as `OPENAI_BASE_URL` does, so a path that
/// starts with `/v1` has it taken off before it is appended; the Anthropic base is an
/// origin, and the path is appended whole.
pub fn upstream_url(api: Api, base: &str, path_and_query: &str) -> String {
    let path = if path_and_query.starts_with('/') {
        path_and_query.to_owned()
    } else {
        format!("/{path_and_query}")
    };
    let rest = match api {
        Api::OpenAi => match path.strip_prefix("/v1") {
            Some(r) if r.is_empty() || r.starts_with('/') || r.starts_with('?') => r.to_owned(),
            _ => path,
        },
        Api::Anthropic => path,
    };
    format!("{base}{rest}")
}

/// Why the proxy refuses to send a request for `path_and_query` to `url` (built by
/// [`upstream_url`] from `base`), when it does: a path with a `.` or `..` segment —
/// written plainly, percent-encoded (`%2e`) or between backslashes, all of which URL
/// parsers resolve — could leave the upstream's base (`/v1/../admin` is `/admin`), so such
/// a path is never sent, and neither is a URL that does not parse or is not under `base`.
pub fn refusal(base: &str, path_and_query: &str, url: &str) -> Option<String> {
    let path = path_and_query.split(['?', '#']).next().unwrap_or("");
    let dotted = path.split(['/', '\\']).any(|segment| {
        let decoded = segment.to_ascii_lowercase().replace("%2e", ".");
        decoded == "." || decoded == ".."
    });
    if dotted {
        return Some(format!(
            "the path `{path}` has a `.` or `..` segment: it is not sent upstream"
        ));
    }
    let (Ok(base_url), Ok(target)) = (url::Url::parse(base), url::Url::parse(url)) else {
        return Some(format!("`{url}` is not a URL the proxy can send"));
    };
    let base_path = base_url.path().trim_end_matches('/');
    let under = target.origin() == base_url.origin()
        && (target.path() == base_path
            || target.path().starts_with(&format!("{base_path}/"))
            || base_path.is_empty());
    (!under).then(|| {
        format!(
            "the path `{path}` leads to `{}`, outside the upstream's base `{base}`",
            target.as_str()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generations_are_told_from_other_exchanges() {
        use Route::*;
        let cases = [
            (
                Api::OpenAi,
                "POST",
                "/v1/chat/completions",
                Generation(WireApi::ChatCompletions),
            ),
            (
                Api::OpenAi,
                "POST",
                "/v1/responses",
                Generation(WireApi::OpenAiResponses),
            ),
            (
                Api::OpenAi,
                "POST",
                "/v1/responses?stream=true",
                Generation(WireApi::OpenAiResponses),
            ),
            (
                Api::OpenAi,
                "POST",
                "/v1/responses/input_tokens",
                Other("count_tokens"),
            ),
            (Api::OpenAi, "GET", "/v1/responses", Other("other")),
            (Api::OpenAi, "GET", "/v1/models", Other("models")),
            (Api::OpenAi, "GET", "/v1/models/gpt-5", Other("models")),
            (Api::OpenAi, "POST", "/v1/completions", Other("other")),
            (
                Api::Anthropic,
                "POST",
                "/v1/messages?beta=true",
                Generation(WireApi::AnthropicMessages),
            ),
            (
                Api::Anthropic,
                "POST",
                "/v1/messages/count_tokens?beta=true",
                Other("count_tokens"),
            ),
            (
                Api::Anthropic,
                "POST",
                "/v1/chat/completions",
                Other("other"),
            ),
            (Api::Anthropic, "GET", "/v1/models", Other("models")),
            (Api::Anthropic, "POST", "/", Other("other")),
        ];
        for (api, method, path, want) in cases {
            assert_eq!(classify(api, method, path), want, "{api:?} {method} {path}");
        }
    }

    #[test]
    fn paths_that_would_leave_the_base_are_refused() {
        let base = "https://api.openai.com/v1";
        for path in [
            "/v1/../admin",
            "/v1/%2e%2e/admin",
            "/v1/%2E./admin",
            "/v1/.%2e/admin",
            "/v1\\..\\admin",
            "/v1/./chat/completions",
            "/..",
        ] {
            let url = upstream_url(Api::OpenAi, base, path);
            assert!(refusal(base, path, &url).is_some(), "{path}");
        }
        for path in [
            "/v1/chat/completions",
            "/v1/responses?x=..",
            "/v1/models/gpt..5",
        ] {
            let url = upstream_url(Api::OpenAi, base, path);
            assert_eq!(refusal(base, path, &url), None, "{path}");
        }
        let gateway = "http://127.0.0.1:9/anthropic";
        let url = upstream_url(Api::Anthropic, gateway, "/v1/messages");
        assert_eq!(refusal(gateway, "/v1/messages", &url), None);
        // Two slashes stay a path of the same origin.
        let url = upstream_url(Api::Anthropic, "http://127.0.0.1:9", "//evil.example/x");
        assert_eq!(url::Url::parse(&url).unwrap().host_str(), Some("127.0.0.1"));
        assert_eq!(
            refusal("http://127.0.0.1:9", "//evil.example/x", &url),
            None
        );
    }

    #[test]
    fn upstream_urls_join_the_base_and_the_path() {
        let openai = "https://api.openai.com/v1";
        assert_eq!(
            upstream_url(Api::OpenAi, openai, "/v1/responses"),
            "https://api.openai.com/v1/responses"
        );
        assert_eq!(
            upstream_url(
                Api::OpenAi,
                "http://127.0.0.1:9/v1",
                "/v1/chat/completions?x=1"
            ),
            "http://127.0.0.1:9/v1/chat/completions?x=1"
        );
        assert_eq!(
            upstream_url(Api::OpenAi, openai, "/responses"),
            "https://api.openai.com/v1/responses"
        );
        assert_eq!(
            upstream_url(Api::OpenAi, openai, "/v10/x"),
            "https://api.openai.com/v1/v10/x"
        );
        assert_eq!(
            upstream_url(
                Api::Anthropic,
                "https://api.anthropic.com",
                "/v1/messages?beta=true"
            ),
            "https://api.anthropic.com/v1/messages?beta=true"
        );
    }
}

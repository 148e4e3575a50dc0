//! Reaching a Streamable HTTP server at its URL (rmcp's client on reqwest with rustls),
//! with a bearer token read from the environment variable its declaration names; and what
//! is recorded of it (its endpoint).

use std::time::Duration;

use provrun_tools::McpServerSpec;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

use crate::McpError;
use crate::error::server_err;
use crate::session::{Started, initialise};

/// Reach the server at `spec`'s URL, then initialise it and list its tools within
/// `limit`. `Err` only when the declared token variable is not set.
pub(crate) async fn start(spec: &McpServerSpec, limit: Duration) -> Result<Started, McpError> {
    let url = spec.url.clone().unwrap_or_default();
    let mut config = StreamableHttpClientTransportConfig::with_uri(url);
    if let Some(var) = &spec.bearer_token_env {
        let token = std::env::var(var).map_err(|_| {
            server_err(
                spec,
                format!("`bearer_token_env` names `{var}`, which is not set"),
            )
        })?;
        config = config.auth_header(token);
    }
    let transport = StreamableHttpClientTransport::from_config(config);
    Ok(tokio::time::timeout(limit, initialise(transport)).await)
}

/// What was reached, as `run_started.details.mcp` records it (observed): the URL and the
/// name of the token's variable (never the token).
pub(crate) fn endpoint(spec: &McpServerSpec) -> Value {
    json!({
        "name": spec.name,
        "transport": "streamable_http",
        "url": spec.url,
        "bearer_token_env": spec.bearer_token_env,
    })
}

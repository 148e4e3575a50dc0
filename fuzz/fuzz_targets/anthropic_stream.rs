//! Fuzz target: the Anthropic Messages parser (`WireApi::AnthropicMessages`) over
//! arbitrary bodies, mostly as SSE streams, and statuses. Any body ends as a response or a
//! typed error, never as a panic; a response's tool calls always carry JSON objects.

#![no_main]

use libfuzzer_sys::fuzz_target;
use provrun_model::{RawExchange, WireApi};

const MEDIA_TYPES: [Option<&str>; 4] = [
    Some("text/event-stream"),
    Some("text/event-stream; charset=utf-8"),
    Some("application/json"),
    None,
];

fuzz_target!(|data: &[u8]| {
    // The first byte picks the media type and status; the rest is the body.
    let Some((&pick, body)) = data.split_first() else {
        return;
    };
    let media_type = MEDIA_TYPES[usize::from(pick) % MEDIA_TYPES.len()];
    let status = match pick / 32 {
        0..=5 => Some(200),
        6 => Some(429),
        _ => Some(529),
    };
    let raw = RawExchange {
        response_body: body.to_vec().into(),
        response_media_type: media_type.map(str::to_string),
        status,
        ..RawExchange::default()
    };
    match WireApi::AnthropicMessages.parse_response(raw) {
        Ok(response) => {
            assert_eq!(status, Some(200));
            for call in &response.tool_calls {
                let input: serde_json::Value = serde_json::from_str(&call.arguments)
                    .expect("a tool_use input is JSON");
                assert!(input.is_object(), "a tool_use input is an object");
            }
            let _ = response.to_message();
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }
});

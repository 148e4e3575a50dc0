//! Fuzz target: `provrun_model::parse_response` over arbitrary bytes, media types and
//! statuses. Any body ends as a response or a typed error, never as a panic.

#![no_main]

use libfuzzer_sys::fuzz_target;
use provrun_model::{RawExchange, parse_response};

const MEDIA_TYPES: [Option<&str>; 6] = [
    Some("application/json"),
    Some("text/event-stream"),
    Some("text/event-stream; charset=utf-8"),
    Some("text/html"),
    Some("application/json; charset=utf-8"),
    None,
];

fuzz_target!(|data: &[u8]| {
    // The first byte picks the media type and status; the rest is the body.
    let Some((&pick, body)) = data.split_first() else {
        return;
    };
    let media_type = MEDIA_TYPES[usize::from(pick) % MEDIA_TYPES.len()];
    let status = match pick / 64 {
        0 | 1 => Some(200),
        2 => Some(429),
        _ => Some(500 + u16::from(pick % 4)),
    };
    let raw = RawExchange {
        response_body: body.to_vec().into(),
        response_media_type: media_type.map(str::to_string),
        status,
        ..RawExchange::default()
    };
    match parse_response(raw) {
        Ok(response) => {
            assert!(status.is_some_and(|s| (200..300).contains(&s)));
            let _ = response.to_message();
        }
        Err(e) => {
            assert!(!e.to_string().is_empty());
        }
    }
});

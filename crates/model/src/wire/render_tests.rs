//! Tests of [`super::RequestRenderer`]: every body it renders, from a kept body or from
//! nothing, is byte for byte the body rendered from scratch.

use bytes::Bytes;
use serde_json::json;

use super::{RequestRenderer, build_request_body};
use crate::types::{
    Message, ModelRequest, ModelSettings, ProviderItem, ToolCall, ToolChoice, ToolDefinition,
};

/// The bytes the renderer must give: the whole body built as a value, then written.
fn scratch(model: &str, request: &ModelRequest, stream: bool) -> Vec<u8> {
    serde_json::to_vec(&build_request_body(model, request, stream)).unwrap()
}

/// A small deterministic generator (xorshift), so failures reproduce.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// A string of characters that JSON must escape, multi-byte characters and plain
    /// text, of up to `max` characters.
    fn text(&mut self, max: u64) -> String {
        const PIECES: &[&str] = &[
            "a",
            "Z",
            " ",
            "\"",
            "\\",
            "/",
            "\n",
            "\r",
            "\t",
            "\u{0}",
            "\u{1f}",
            "\u{7f}",
            "é",
            "ß",
            "日本",
            "\u{2028}",
            "\u{2029}",
            "🦀",
            "{\"k\":[1,2]}",
            "\\u0041",
            "</script>",
        ];
        let n = self.below(max + 1);
        (0..n)
            .map(|_| PIECES[self.below(PIECES.len() as u64) as usize])
            .collect()
    }

    fn call(&mut self, i: usize) -> ToolCall {
        let arguments = match self.below(3) {
            0 => "{}".to_owned(),
            1 => json!({"path": self.text(12), "n": self.below(1000)}).to_string(),
            _ => self.text(20),
        };
        ToolCall {
            id: format!("call_{i}_{}", self.text(3)),
            name: ["read_file", "write", "ß"][self.below(3) as usize].to_owned(),
            arguments,
        }
    }

    /// One message of any kind.
    fn message(&mut self, i: usize) -> Message {
        match self.below(6) {
            0 => Message::system(self.text(30)),
            1 => Message::user(self.text(60)),
            2 => Message::assistant_text(self.text(60)),
            3 => Message::Assistant {
                text: (self.below(2) == 0).then(|| self.text(10)),
                tool_calls: (0..1 + self.below(3) as usize)
                    .map(|j| self.call(i * 10 + j))
                    .collect(),
                provider_items: Vec::new(),
            },
            4 => Message::Assistant {
                // Reasoning kept for another provider: not part of this wire format.
                text: Some(self.text(20)),
                tool_calls: Vec::new(),
                provider_items: vec![ProviderItem {
                    api: "anthropic".into(),
                    item: json!({"type": "thinking", "thinking": self.text(40)}),
                }],
            },
            _ => Message::Tool {
                call_id: format!("call_{i}"),
                name: "read_file".into(),
                content: self.text(400),
                ok: self.below(4) != 0,
            },
        }
    }
}

fn tools() -> Vec<ToolDefinition> {
    vec![ToolDefinition {
        name: "read_file".into(),
        description: "Reads a \"file\" — any file.".into(),
        parameters: json!({"type": "object", "x-summary": "read {path}",
                           "properties": {"path": {"type": "string", "x-hint": 1}},
                           "required": ["path"]}),
    }]
}

fn settings() -> ModelSettings {
    let mut s = ModelSettings {
        max_tokens: Some(512),
        temperature: Some(0.1),
        top_p: Some(0.95),
        seed: Some(-7),
        stop: vec!["\n\n".into(), "é".into()],
        reasoning_effort: Some("low".into()),
        tool_choice: Some(ToolChoice::Tool {
            name: "read_file".into(),
        }),
        parallel_tool_calls: Some(false),
        ..ModelSettings::default()
    };
    // Keys before and after `messages`, one nested, and `messages` itself (left out).
    s.extra.insert("aaa".into(), json!({"x": [1, "\u{1}"]}));
    s.extra.insert("zzz".into(), json!(1.5));
    s.extra.insert("messages".into(), json!({"ignored": true}));
    s.extra
        .insert("stream_options".into(), json!({"extra_key": "kept"}));
    s
}

/// Renders every request of a history growing a message at a time (both with and
/// without streaming, tools and settings) and checks each body; keeps every body so
/// that none of them is reused in place while still held, and checks them all again at
/// the end.
#[test]
fn a_growing_history_renders_the_bytes_of_a_scratch_rendering() {
    let renderer = RequestRenderer::default();
    for (seed, with_tools) in [(1u64, true), (2, false), (3, true)] {
        let mut g = Gen(0x9E37_79B9_7F4A_7C15 ^ seed);
        let mut request = ModelRequest::default();
        if with_tools {
            request.tools = tools();
            request.settings = settings();
        }
        let mut held: Vec<(Bytes, Vec<u8>)> = Vec::new();
        for i in 0..60 {
            request.messages.push(g.message(i));
            let stream = g.below(4) == 0;
            let got = renderer.render("script", &request, stream);
            let want = scratch("script", &request, stream);
            assert_eq!(
                String::from_utf8_lossy(&got),
                String::from_utf8_lossy(&want),
                "seed {seed}, message {i}"
            );
            // Every other body is dropped at once, so its buffer can be reused.
            if i % 2 == 0 {
                held.push((got, want));
            }
        }
        for (got, want) in &held {
            assert_eq!(&got[..], &want[..], "a held body changed");
        }
    }
}

/// Requests that do not extend the last one: an edited message, a shorter history, a
/// different last message, another model name, and many runs at once (more than the
/// renderer keeps).
#[test]
fn histories_that_diverge_or_interleave_still_render_their_own_bytes() {
    let renderer = RequestRenderer::default();
    let mut g = Gen(42);
    let base: Vec<Message> = (0..20).map(|i| g.message(i)).collect();
    let check = |model: &str, messages: &[Message], stream: bool| {
        let request = ModelRequest {
            messages: messages.to_vec(),
            tools: tools(),
            settings: settings(),
        };
        let got = renderer.render(model, &request, stream);
        assert_eq!(&got[..], &scratch(model, &request, stream)[..]);
    };
    check("script", &base, false);
    let mut edited = base.clone();
    edited[7] = Message::user("edited \"7\"");
    check("script", &edited, false);
    check("script", &base[..12], false);
    let mut other_last = base.clone();
    *other_last.last_mut().unwrap() = Message::assistant_text("other");
    check("script", &other_last, false);
    check("script", &base, true);
    check("another", &base, false);
    check("script", &[], false);
    // 100 runs in turn, each growing its own history from the same start.
    let mut runs: Vec<Vec<Message>> = (0..100).map(|_| base[..3].to_vec()).collect();
    for step in 0..5 {
        for (r, run) in runs.iter_mut().enumerate() {
            run.push(Message::Tool {
                call_id: format!("c{step}"),
                name: "t".into(),
                content: format!("run {r} step {step} ✓ \\ \""),
                ok: true,
            });
            check("script", run, false);
        }
    }
}

/// The offline models record the bytes a scratch rendering gives.
#[tokio::test]
async fn a_script_models_requests_carry_the_scratch_bytes() {
    use crate::{Model, ScriptModel};
    let steps: Vec<_> = (0..8)
        .map(|i| {
            json!({"tool_calls": [{"id": format!("c{i}"), "name": "read_file",
                                         "arguments": {"path": format!("/input/ü{i}")}}]})
        })
        .collect();
    let model = ScriptModel::from_value(&serde_json::Value::Array(steps)).unwrap();
    let mut request = ModelRequest {
        messages: vec![Message::system("be brief"), Message::user("read \"them\"")],
        tools: tools(),
        settings: ModelSettings::default(),
    };
    for i in 0..8 {
        let response = model.request(&request).await.unwrap();
        assert_eq!(
            &response.raw.request_body[..],
            &scratch(model.name(), &request, false)[..],
            "request {i}"
        );
        request.messages.push(Message::Assistant {
            text: None,
            tool_calls: response.tool_calls.clone(),
            provider_items: Vec::new(),
        });
        request.messages.push(Message::Tool {
            call_id: response.tool_calls[0].id.clone(),
            name: "read_file".into(),
            content: format!("content {i}: \u{0}\t\"\\"),
            ok: true,
        });
    }
}

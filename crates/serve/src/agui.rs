//! The AG-UI request a run starts from ([`RunInput`], the protocol's `RunAgentInput`),
//! read with the protocol's field names and checked before anything runs: what a server
//! takes from it is the last user message, the client's tools, its tool results and its
//! resume entries. The events a run answers with are built in `events.rs`.
//!
//! The body is read straight into these types, counting as it goes: no JSON tree of the
//! whole body is built, members the server does not use (`state`, `context`,
//! `forwardedProps`, a message's other members, content parts that are not text) are
//! skipped without being kept, the messages and tools are counted while they are read (a
//! body past a limit is refused at the element that passes it), and a tool's parameter
//! schema is kept as its raw text, bounded in size, until it is used. So a request holds
//! at most about its body's size again, whatever the body holds.

use std::cell::Cell;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::error::ApiError;

/// The most bytes the parameter schemas of one input's tools may hold together.
pub(crate) const MAX_SCHEMA_BYTES: usize = 256 * 1024;

/// The `RunAgentInput` of AG-UI 1.0, as far as a provrun server reads it. Unknown members
/// (`state`, `context`, `forwardedProps`, `parentRunId`, `protocolVersion`) are accepted,
/// skipped and not kept.
#[derive(Debug)]
pub(crate) struct RunInput {
    /// The conversation this run belongs to.
    pub thread_id: String,
    /// The client's id for this run.
    pub run_id: String,
    /// The conversation as the client holds it.
    pub messages: Vec<InputMessage>,
    /// Tools the client runs (frontend tools).
    pub tools: Vec<InputTool>,
    /// Answers to the interrupts the thread's last run ended with.
    pub resume: Vec<ResumeEntry>,
}

/// One message of the input. Only the members a server uses are read.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct InputMessage {
    /// `user`, `assistant`, `tool`, `system`, `developer`, `reasoning` or `activity`.
    pub role: String,
    /// Text, or the text of its `text` content parts (other parts are skipped).
    #[serde(default)]
    pub content: Content,
    /// On a `tool` message: the call it answers.
    #[serde(default)]
    pub tool_call_id: Option<String>,
    /// On a `tool` message: the tool failed, and why.
    #[serde(default)]
    pub error: Option<String>,
}

/// A message's content as far as it is read: its text, or the texts of its `text` parts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) enum Content {
    /// No content, or content of another shape (an object, a number): no text.
    #[default]
    None,
    /// String content.
    Text(String),
    /// The `text` of each part whose `type` is `text`, in order.
    Parts(Vec<String>),
}

impl InputMessage {
    /// The message's text: a string content, or its `text` parts joined by newlines.
    pub(crate) fn text(&self) -> String {
        match &self.content {
            Content::Text(s) => s.clone(),
            Content::Parts(parts) => parts.join("\n"),
            Content::None => String::new(),
        }
    }
}

impl<'de> Deserialize<'de> for Content {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ContentVisitor)
    }
}

struct ContentVisitor;

impl<'de> Visitor<'de> for ContentVisitor {
    type Value = Content;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string or an array of content parts")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Content, E> {
        Ok(Content::Text(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Content, E> {
        Ok(Content::Text(v))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Content, A::Error> {
        let mut texts = Vec::new();
        while let Some(part) = seq.next_element::<Part>()? {
            if let Some(text) = part.0 {
                texts.push(text);
            }
        }
        Ok(Content::Parts(texts))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Content, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Content::None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Content, E> {
        Ok(Content::None)
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Content, E> {
        Ok(Content::None)
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Content, E> {
        Ok(Content::None)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Content, E> {
        Ok(Content::None)
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Content, E> {
        Ok(Content::None)
    }
}

/// A content part: its text when it is a `text` part (its other members skipped).
struct Part(Option<String>);

impl<'de> Deserialize<'de> for Part {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct PartVisitor;
        impl<'de> Visitor<'de> for PartVisitor {
            type Value = Part;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a content part (an object with a `type`)")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Part, A::Error> {
                let (mut kind, mut text) = (None::<String>, None::<String>);
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "type" => kind = Some(map.next_value()?),
                        "text" => text = map.next_value::<Option<String>>()?,
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(Part(text.filter(|_| kind.as_deref() == Some("text"))))
            }
        }
        d.deserialize_map(PartVisitor)
    }
}

/// A tool the client offers (AG-UI `Tool`).
#[derive(Debug, Deserialize)]
pub(crate) struct InputTool {
    /// Its name.
    pub name: String,
    /// What it does.
    #[serde(default)]
    pub description: String,
    /// The JSON Schema of its arguments, as the client wrote it; absent means none.
    #[serde(default)]
    pub parameters: Option<Box<RawValue>>,
}

impl InputTool {
    /// The parameter schema as a value (`None` when absent or `null`).
    pub(crate) fn schema(&self) -> Option<Value> {
        self.parameters
            .as_deref()
            .and_then(|raw| serde_json::from_str::<Value>(raw.get()).ok())
            .filter(|v| !v.is_null())
    }
}

/// An answer to one interrupt (AG-UI `ResumeEntry`).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ResumeEntry {
    /// The interrupt answered.
    pub interrupt_id: String,
    /// `resolved` or `cancelled`.
    pub status: ResumeStatus,
    /// The answer; `{"approved": false}` denies. Only `approved` and `reason` are read.
    #[serde(default)]
    pub payload: Payload,
}

/// What a resume entry's payload says, as far as it is read (a payload that is no object,
/// and other members, are skipped).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Payload {
    /// `approved`, when it is a boolean.
    pub approved: Option<bool>,
    /// `reason`, when it is a string.
    pub reason: Option<String>,
}

impl<'de> Deserialize<'de> for Payload {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match d.deserialize_any(ScalarVisitor(true))? {
            Scalar::Payload(p) => p,
            _ => Payload::default(),
        })
    }
}

/// One JSON value as far as it is read: a boolean or a string kept, a payload's members
/// read, anything else skipped without being kept.
enum Scalar {
    Bool(bool),
    Text(String),
    Payload(Payload),
    Other,
}

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ScalarVisitor(false))
    }
}

/// Reads a [`Scalar`]; `.0`: an object is read as a payload (else skipped).
struct ScalarVisitor(bool);

impl<'de> Visitor<'de> for ScalarVisitor {
    type Value = Scalar;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Scalar, E> {
        Ok(Scalar::Bool(v))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Scalar, E> {
        Ok(Scalar::Text(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Scalar, E> {
        Ok(Scalar::Text(v))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Scalar, E> {
        Ok(Scalar::Other)
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Scalar, E> {
        Ok(Scalar::Other)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Scalar, E> {
        Ok(Scalar::Other)
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Scalar, E> {
        Ok(Scalar::Other)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Scalar, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Scalar::Other)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Scalar, A::Error> {
        let mut payload = Payload::default();
        while let Some(key) = map.next_key::<String>()? {
            match (self.0, key.as_str()) {
                (true, "approved") => {
                    if let Scalar::Bool(b) = map.next_value()? {
                        payload.approved = Some(b);
                    }
                }
                (true, "reason") => {
                    if let Scalar::Text(t) = map.next_value()? {
                        payload.reason = Some(t);
                    }
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(if self.0 {
            Scalar::Payload(payload)
        } else {
            Scalar::Other
        })
    }
}

/// Whether an interrupt was answered or abandoned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ResumeStatus {
    /// Answered: approve, unless the payload says `"approved": false`.
    Resolved,
    /// Abandoned: the call is denied.
    Cancelled,
}

impl ResumeEntry {
    /// Whether this answer approves the call: `resolved`, without `"approved": false`.
    pub(crate) fn approves(&self) -> bool {
        self.status == ResumeStatus::Resolved && self.payload.approved != Some(false)
    }

    /// What a denied call's model is told: the payload's `reason`, or a plain default.
    pub(crate) fn denial(&self) -> String {
        self.payload
            .reason
            .clone()
            .filter(|r| !r.trim().is_empty())
            .unwrap_or_else(|| match self.status {
                ResumeStatus::Cancelled => "the person cancelled this call".to_string(),
                ResumeStatus::Resolved => "the person did not approve this call".to_string(),
            })
    }
}

/// What a request body may hold at most.
#[derive(Debug, Clone, Copy)]
pub(crate) struct InputLimits {
    /// Messages in one input.
    pub max_messages: usize,
    /// Tools in one input.
    pub max_tools: usize,
}

/// The refusal a limit gave while the body was being read (kept beside the parse, whose
/// own error type can only carry text).
type Refused = Cell<Option<ApiError>>;

/// Reads a [`RunInput`] with the limits applied while its arrays are read.
struct InputSeed<'a> {
    limits: InputLimits,
    refused: &'a Refused,
}

impl<'de> DeserializeSeed<'de> for InputSeed<'_> {
    type Value = RunInput;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<RunInput, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for InputSeed<'_> {
    type Value = RunInput;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an AG-UI RunAgentInput object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RunInput, A::Error> {
        let (mut thread_id, mut run_id, mut messages) = (None, None, None);
        let (mut tools, mut resume) = (None, None);
        while let Some(key) = map.next_key::<String>()? {
            let seen = match key.as_str() {
                "threadId" => thread_id.replace(map.next_value::<String>()?).is_some(),
                "runId" => run_id.replace(map.next_value::<String>()?).is_some(),
                "messages" => messages
                    .replace(map.next_value_seed(Counted::<InputMessage>::new(
                        self.limits.max_messages,
                        self.refused,
                        too_many_messages,
                    ))?)
                    .is_some(),
                "tools" => tools
                    .replace(map.next_value_seed(Counted::<InputTool>::new(
                        self.limits.max_tools,
                        self.refused,
                        too_many_tools,
                    ))?)
                    .is_some(),
                "resume" => resume
                    .replace(
                        map.next_value::<Option<Vec<ResumeEntry>>>()?
                            .unwrap_or_default(),
                    )
                    .is_some(),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                    false
                }
            };
            if seen {
                return Err(de::Error::custom(format!("duplicate field `{key}`")));
            }
        }
        Ok(RunInput {
            thread_id: thread_id.ok_or_else(|| de::Error::missing_field("threadId"))?,
            run_id: run_id.ok_or_else(|| de::Error::missing_field("runId"))?,
            messages: messages.ok_or_else(|| de::Error::missing_field("messages"))?,
            tools: tools.unwrap_or_default(),
            resume: resume.unwrap_or_default(),
        })
    }
}

fn too_many_messages(n: usize, max: usize) -> ApiError {
    ApiError::too_large(
        "too_many_messages",
        format!("the input holds {n} messages; this server takes at most {max}"),
    )
}

fn too_many_tools(n: usize, max: usize) -> ApiError {
    ApiError::too_large(
        "too_many_tools",
        format!("the input offers {n} tools; this server takes at most {max}"),
    )
}

/// An array of at most `max` elements, refused (with `refusal`) when it holds more: the
/// elements past the limit are counted, not kept.
struct Counted<'a, T> {
    max: usize,
    refused: &'a Refused,
    refusal: fn(usize, usize) -> ApiError,
    _t: std::marker::PhantomData<T>,
}

impl<'a, T> Counted<'a, T> {
    fn new(max: usize, refused: &'a Refused, refusal: fn(usize, usize) -> ApiError) -> Self {
        Self {
            max,
            refused,
            refusal,
            _t: std::marker::PhantomData,
        }
    }
}

impl<'de, T: Deserialize<'de>> DeserializeSeed<'de> for Counted<'_, T> {
    type Value = Vec<T>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Vec<T>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, T: Deserialize<'de>> Visitor<'de> for Counted<'_, T> {
    type Value = Vec<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array (or null)")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Vec<T>, E> {
        Ok(Vec::new())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
        let mut out = Vec::new();
        while out.len() < self.max {
            match seq.next_element::<T>()? {
                Some(item) => out.push(item),
                None => return Ok(out),
            }
        }
        let mut n = out.len();
        while seq.next_element::<IgnoredAny>()?.is_some() {
            n += 1;
        }
        if n > self.max {
            self.refused.set(Some((self.refusal)(n, self.max)));
            return Err(de::Error::custom("past a limit"));
        }
        Ok(out)
    }
}

/// Parse and check a request body: JSON of the right shape (400 `bad_json`, `bad_input`),
/// within the limits (413 `too_many_messages`, `too_many_tools`), a safe thread id (400
/// `bad_id`), client tools with usable names and schemas (400 `bad_tool`).
pub(crate) fn parse(body: &[u8], limits: InputLimits) -> Result<RunInput, ApiError> {
    let refused = Refused::new(None);
    let mut de = serde_json::Deserializer::from_slice(body);
    let parsed = InputSeed {
        limits,
        refused: &refused,
    }
    .deserialize(&mut de)
    .and_then(|input| de.end().map(|()| input));
    let input = match parsed {
        Ok(input) => input,
        Err(e) => {
            return Err(match refused.take() {
                Some(refusal) => refusal,
                None if e.is_data() => ApiError::bad_request(
                    "bad_input",
                    format!("the body is not an AG-UI RunAgentInput: {e}"),
                ),
                None => ApiError::bad_request("bad_json", format!("the body is not JSON: {e}")),
            });
        }
    };
    if provrun_store::check_id(&input.thread_id).is_err() {
        return Err(ApiError::bad_request(
            "bad_id",
            "threadId must be 1 to 128 of A-Z a-z 0-9 . _ - (not starting with . or -)",
        ));
    }
    let mut schema_bytes = 0usize;
    for tool in &input.tools {
        check_tool(tool)?;
        schema_bytes += tool.parameters.as_deref().map_or(0, |p| p.get().len());
    }
    if schema_bytes > MAX_SCHEMA_BYTES {
        return Err(ApiError::bad_request(
            "bad_tool",
            format!(
                "the tools' parameter schemas hold {schema_bytes} bytes together; this server \
                 takes at most {MAX_SCHEMA_BYTES}"
            ),
        ));
    }
    Ok(input)
}

/// A client tool needs a name a model API takes and, when given, an object schema.
fn check_tool(tool: &InputTool) -> Result<(), ApiError> {
    let name_ok = !tool.name.is_empty()
        && tool.name.len() <= 64
        && tool
            .name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !name_ok {
        return Err(ApiError::bad_request(
            "bad_tool",
            "a tool's name must be 1 to 64 of A-Z a-z 0-9 _ -",
        ));
    }
    let Some(raw) = tool.parameters.as_deref() else {
        return Ok(());
    };
    if raw.get() == "null" {
        return Ok(());
    }
    // Only the schema's `type` is read here; the rest is skipped.
    #[derive(Deserialize)]
    struct Typed {
        #[serde(rename = "type", default)]
        kind: Option<Value>,
    }
    match serde_json::from_str::<Typed>(raw.get()) {
        Ok(Typed {
            kind: Some(Value::String(kind)),
        }) if kind == "object" => Ok(()),
        _ => Err(ApiError::bad_request(
            "bad_tool",
            format!(
                "tool `{}`: parameters must be a JSON Schema of type object",
                tool.name
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: InputLimits = InputLimits {
        max_messages: 3,
        max_tools: 2,
    };

    #[test]
    fn a_minimal_input_parses_and_reads_text_parts() {
        let body = br#"{"threadId":"t1","runId":"r1","state":{"big":[1,2,3]},"messages":[
            {"id":"m1","role":"user","content":[{"type":"text","text":"a"},{"type":"image","source":{}},{"text":"b","type":"text"}]}]}"#;
        let input = parse(body, LIMITS).unwrap();
        assert_eq!(input.messages[0].text(), "a\nb");
        assert!(input.tools.is_empty() && input.resume.is_empty());
    }

    #[test]
    fn bad_bodies_get_their_own_codes() {
        let code = |body: &[u8]| parse(body, LIMITS).unwrap_err().code;
        assert_eq!(code(b"{not json"), "bad_json");
        assert_eq!(
            code(br#"{"threadId":"t","runId":"r","messages":[]} trailing"#),
            "bad_json"
        );
        assert_eq!(code(br#"{"threadId":"t"}"#), "bad_input");
        assert_eq!(code(b"[1,2]"), "bad_input");
        assert_eq!(
            code(br#"{"threadId":"t","threadId":"u","runId":"r","messages":[]}"#),
            "bad_input"
        );
        assert_eq!(
            code(br#"{"threadId":"../x","runId":"r","messages":[]}"#),
            "bad_id"
        );
        let m = r#"{"role":"user"}"#;
        let four = format!(r#"{{"threadId":"t","runId":"r","messages":[{m},{m},{m},{m}]}}"#);
        assert_eq!(code(four.as_bytes()), "too_many_messages");
        assert!(
            parse(four.as_bytes(), LIMITS)
                .unwrap_err()
                .message
                .contains("holds 4 messages")
        );
        assert_eq!(
            code(br#"{"threadId":"t","runId":"r","messages":[],"tools":[{"name":"a"},{"name":"b"},{"name":"c"}]}"#),
            "too_many_tools"
        );
        assert_eq!(
            code(br#"{"threadId":"t","runId":"r","messages":[],"tools":[{"name":"a b","description":""}]}"#),
            "bad_tool"
        );
        assert_eq!(
            code(br#"{"threadId":"t","runId":"r","messages":[],"tools":[{"name":"a","parameters":{"type":"array"}}]}"#),
            "bad_tool"
        );
        let huge = format!(
            r#"{{"threadId":"t","runId":"r","messages":[],"tools":[{{"name":"a","parameters":{{"type":"object","x":"{}"}}}}]}}"#,
            "y".repeat(MAX_SCHEMA_BYTES)
        );
        assert_eq!(code(huge.as_bytes()), "bad_tool");
    }

    #[test]
    fn a_tool_schema_is_kept_as_written() {
        let body = br#"{"threadId":"t","runId":"r","messages":[],"tools":[
            {"name":"a","parameters":{"type":"object","properties":{"x":{"type":"string"}}}},{"name":"b","parameters":null}]}"#;
        let input = parse(body, LIMITS).unwrap();
        assert_eq!(
            input.tools[0].schema().unwrap()["properties"]["x"]["type"],
            "string"
        );
        assert!(input.tools[1].schema().is_none());
    }

    #[test]
    fn resume_entries_approve_unless_told_otherwise() {
        let entry = |json: &str| serde_json::from_str::<ResumeEntry>(json).unwrap();
        assert!(entry(r#"{"interruptId":"i","status":"resolved"}"#).approves());
        assert!(entry(r#"{"interruptId":"i","status":"resolved","payload":"yes"}"#).approves());
        let no = entry(
            r#"{"interruptId":"i","status":"resolved","payload":{"approved":false,"reason":"no","more":[1,{"a":2}]}}"#,
        );
        assert!(!no.approves());
        assert_eq!(no.denial(), "no");
        assert!(!entry(r#"{"interruptId":"i","status":"cancelled"}"#).approves());
    }
}

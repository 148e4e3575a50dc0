//! What a tool returns: [`ToolOutput`], and the conversions from plain return values.

use serde::{Deserialize, Serialize};

/// The result of one tool call, as the model will see it.
///
/// `ok` says whether the call succeeded; `content` is the text returned to the model in
/// either case (the result, or what went wrong).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolOutput {
    /// The text the model sees.
    pub content: String,
    /// Whether the call succeeded.
    pub ok: bool,
    /// The confinement a program ran under, for a tool that ran one (`run_command`, a
    /// manifest command tool): recorded with the call's `tool_called` event. `None` for
    /// every other tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confinement: Option<serde_json::Value>,
}

impl ToolOutput {
    /// This output with the confinement record of the program that produced it.
    pub fn with_confinement(mut self, confinement: impl Serialize) -> Self {
        self.confinement = serde_json::to_value(confinement).ok();
        self
    }

    /// A successful result.
    pub fn succeed(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            ok: true,
            confinement: None,
        }
    }

    /// A failed result; `message` says what went wrong, for the model to read.
    pub fn fail(message: impl Into<String>) -> Self {
        Self {
            content: message.into(),
            ok: false,
            confinement: None,
        }
    }
}

/// Wraps any serialisable value so a tool can return it as JSON text.
///
/// ```
/// use provrun_tools::{IntoToolOutput, Json};
/// let out = Json(vec![1, 2, 3]).into_tool_output();
/// assert_eq!(out.content, "[1,2,3]");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Json<T>(pub T);

/// Turns a tool function's return value into a [`ToolOutput`].
///
/// Text and numbers become a successful output as they are; `Json(value)` and
/// `serde_json::Value` become JSON text; `Result::Err(e)` becomes `ToolOutput::fail(e.to_string())`;
/// `Option::None` becomes an empty success; `()` an empty success.
#[diagnostic::on_unimplemented(
    message = "a tool cannot return `{Self}`",
    label = "this return type has no `IntoToolOutput`",
    note = "return text, a number, `ToolOutput`, `serde_json::Value`, `Json(value)` for any serialisable value, or `Result<_, E: Display>` of those"
)]
pub trait IntoToolOutput {
    /// Convert into the output the model sees.
    fn into_tool_output(self) -> ToolOutput;
}

impl IntoToolOutput for ToolOutput {
    fn into_tool_output(self) -> ToolOutput {
        self
    }
}

impl IntoToolOutput for String {
    fn into_tool_output(self) -> ToolOutput {
        ToolOutput::succeed(self)
    }
}

impl IntoToolOutput for &str {
    fn into_tool_output(self) -> ToolOutput {
        ToolOutput::succeed(self)
    }
}

impl IntoToolOutput for std::borrow::Cow<'_, str> {
    fn into_tool_output(self) -> ToolOutput {
        ToolOutput::succeed(self.into_owned())
    }
}

impl IntoToolOutput for () {
    fn into_tool_output(self) -> ToolOutput {
        ToolOutput::succeed(String::new())
    }
}

impl IntoToolOutput for serde_json::Value {
    fn into_tool_output(self) -> ToolOutput {
        match self {
            serde_json::Value::String(s) => ToolOutput::succeed(s),
            other => ToolOutput::succeed(other.to_string()),
        }
    }
}

impl<T: Serialize> IntoToolOutput for Json<T> {
    fn into_tool_output(self) -> ToolOutput {
        match serde_json::to_string(&self.0) {
            Ok(text) => ToolOutput::succeed(text),
            Err(e) => ToolOutput::fail(format!("the tool's result could not be serialised: {e}")),
        }
    }
}

impl<T: IntoToolOutput> IntoToolOutput for Option<T> {
    fn into_tool_output(self) -> ToolOutput {
        match self {
            Some(v) => v.into_tool_output(),
            None => ToolOutput::succeed(String::new()),
        }
    }
}

impl<T: IntoToolOutput, E: std::fmt::Display> IntoToolOutput for Result<T, E> {
    fn into_tool_output(self) -> ToolOutput {
        match self {
            Ok(v) => v.into_tool_output(),
            Err(e) => ToolOutput::fail(e.to_string()),
        }
    }
}

macro_rules! display_outputs {
    ($($t:ty),*) => {$(
        impl IntoToolOutput for $t {
            fn into_tool_output(self) -> ToolOutput {
                ToolOutput::succeed(self.to_string())
            }
        }
    )*};
}
display_outputs!(
    bool, char, i8, i16, i32, i64, i128, isize, u8, u16, u32, u64, u128, usize, f32, f64
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_values_succeed() {
        assert_eq!("hi".into_tool_output(), ToolOutput::succeed("hi"));
        assert_eq!(42u32.into_tool_output(), ToolOutput::succeed("42"));
        assert_eq!(true.into_tool_output(), ToolOutput::succeed("true"));
        assert_eq!(().into_tool_output(), ToolOutput::succeed(""));
    }

    #[test]
    fn errors_fail_with_their_message() {
        let r: Result<String, std::io::Error> = Err(std::io::Error::other("disk on fire"));
        assert_eq!(r.into_tool_output(), ToolOutput::fail("disk on fire"));
        let r: Result<u8, String> = Ok(7);
        assert_eq!(r.into_tool_output(), ToolOutput::succeed("7"));
    }

    #[test]
    fn json_values_become_json_text() {
        assert_eq!(
            serde_json::json!({"a": [1, 2]}).into_tool_output(),
            ToolOutput::succeed(r#"{"a":[1,2]}"#)
        );
        // A JSON string is returned as its text, not quoted.
        assert_eq!(
            serde_json::json!("plain").into_tool_output(),
            ToolOutput::succeed("plain")
        );
        assert_eq!(
            Json(("x", 1)).into_tool_output(),
            ToolOutput::succeed(r#"["x",1]"#)
        );
    }

    #[test]
    fn option_none_is_empty_success() {
        let none: Option<String> = None;
        assert_eq!(none.into_tool_output(), ToolOutput::succeed(""));
    }
}

//! Filling a tool's confirmation and summary texts (`x-confirm`, `x-summary`) with the
//! arguments of one call: `Delete {path}?` becomes `Delete /output/a.txt?`.

use serde_json::Value;

/// Most characters of one argument value put into a text; longer values are cut with `…`.
pub const TEMPLATE_VALUE_CHARS: usize = 80;

/// `template` with every `{name}` replaced by the call's argument `name`.
///
/// `arguments` is the call's arguments as the model sent them (a JSON object). A string
/// argument goes in as its text, any other value as its JSON. The filling is made safe
/// for hostile values: each value is cut to [`TEMPLATE_VALUE_CHARS`] characters, its
/// control characters (newlines, escapes) are written as escapes (`\n`, `\u{1b}`) so
/// the text stays one line, and a value is put in once (braces inside it are not filled
/// again). A name the arguments lack, arguments that are not a JSON object, and text that
/// is not a `{name}` (an unclosed brace, `{}`) stay as written; `{{` and `}}` give one
/// brace.
///
/// ```
/// use provrun_tools::fill_template;
/// assert_eq!(fill_template("Delete {path}?", r#"{"path": "/output/a.txt"}"#), "Delete /output/a.txt?");
/// assert_eq!(fill_template("Run {n} times", r#"{"n": 3}"#), "Run 3 times");
/// assert_eq!(fill_template("Delete {path}?", "not json"), "Delete {path}?");
/// ```
pub fn fill_template(template: &str, arguments: &str) -> String {
    fill_template_json(
        template,
        &serde_json::from_str(arguments).unwrap_or(Value::Null),
    )
}

/// [`fill_template`] with the arguments already parsed (anything but an object fills
/// nothing).
pub fn fill_template_json(template: &str, arguments: &Value) -> String {
    let args = arguments.as_object();
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(i) = rest.find(['{', '}']) {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if tail.starts_with("{{") || tail.starts_with("}}") {
            out.push_str(&tail[..1]);
            rest = &tail[2..];
            continue;
        }
        if let Some(after) = tail.strip_prefix('}') {
            out.push('}');
            rest = after;
            continue;
        }
        // `{name}`: a name of letters, digits, `_` and `-`.
        let name_len = tail[1..]
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-'))
            .unwrap_or(tail.len() - 1);
        let name = &tail[1..1 + name_len];
        let closed = tail[1 + name_len..].starts_with('}');
        match args
            .and_then(|a| a.get(name))
            .filter(|_| closed && !name.is_empty())
        {
            Some(value) => {
                out.push_str(&shown(value));
                rest = &tail[name_len + 2..];
            }
            None => {
                out.push('{');
                rest = &tail[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// One argument value as a text shows it: cut, controls escaped.
fn shown(value: &Value) -> String {
    let text = match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let mut out = String::new();
    for (n, c) in text.chars().enumerate() {
        if n == TEMPLATE_VALUE_CHARS {
            out.push('…');
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_names_and_leaves_the_rest() {
        let args = r#"{"path": "/input/a.txt", "n": 2, "flag": true, "list": [1, 2]}"#;
        assert_eq!(fill_template("Read {path}", args), "Read /input/a.txt");
        assert_eq!(
            fill_template("{n} of {list} ({flag})", args),
            "2 of [1,2] (true)"
        );
        assert_eq!(fill_template("{missing} and {}", args), "{missing} and {}");
        assert_eq!(fill_template("{{path}} {path", args), "{path} {path");
        assert_eq!(fill_template("a } b {", args), "a } b {");
        assert_eq!(fill_template("Read {path}", "[1]"), "Read {path}");
        assert_eq!(fill_template("", args), "");
        assert_eq!(fill_template("é{path}ü", args), "é/input/a.txtü");
    }

    #[test]
    fn hostile_values_stay_one_line_short_and_unfilled() {
        let args = serde_json::json!({
            "path": "a\nb\u{1b}[31mred\r",
            "loop": "{path}{loop}",
            "long": "x".repeat(500),
        })
        .to_string();
        let filled = fill_template("{path}|{loop}|{long}", &args);
        assert!(!filled.chars().any(char::is_control), "{filled:?}");
        assert!(
            filled.starts_with("a\\nb\\u{1b}[31mred\\r|{path}{loop}|"),
            "{filled}"
        );
        assert_eq!(
            filled.chars().filter(|c| *c == 'x').count(),
            TEMPLATE_VALUE_CHARS
        );
        assert!(filled.ends_with('…'));
    }
}

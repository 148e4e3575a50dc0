//! Two runs compared step by step ([`compare`]): each model step of one run against the
//! step at the same place in the other — the model's text and the tool calls it asked
//! for, then each tool call's name, arguments, result and outcome — and the runs'
//! status and output files (a line diff of text files). Tokens and time are set side by
//! side but are not behaviour: two runs that made the same calls, got the same results
//! and wrote the same outputs are the same ([`RunDiff::same`]), however long they took.
//!
//! Both runs are read with [`crate::page_data`], so the model's text is what the run page
//! shows (the recorded response read back with the model crate's parser).

use serde::Serialize;
use serde_json::{Value, json};

use crate::source::BundleSource;

/// One behaviour that differs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Difference {
    /// What differs: `status`, `steps`, `model_text`, `model_tool_calls`, `tool_calls`,
    /// `tool_name`, `tool_arguments`, `tool_result`, `tool_ok`, `output`, `output_only`.
    pub kind: String,
    /// The step (1 is the first model request, 0 what came before it), when in one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<usize>,
    /// The tool call's place in its step (1-based), or the output's path.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    /// What run A had.
    pub a: Value,
    /// What run B had.
    pub b: Value,
}

/// Two runs compared.
#[derive(Debug, Clone, Serialize)]
pub struct RunDiff {
    /// Whether the runs behaved the same (no [`Difference`]).
    pub same: bool,
    /// Each side's header: bundle, run id, status, steps, tool calls, tokens, duration.
    pub a: Value,
    /// See [`RunDiff::a`].
    pub b: Value,
    /// The behaviours that differ, in the order of the runs.
    pub differences: Vec<Difference>,
    /// Each step side by side: model text, tool calls, tokens and time of both.
    pub steps: Vec<Value>,
    /// Each output path of either run: its digest in both, and a line diff of text.
    pub outputs: Vec<Value>,
}

/// A side's header from its page data.
fn header(data: &Value) -> Value {
    let run = &data["run"];
    let tokens =
        run["input_tokens"].as_u64().unwrap_or(0) + run["output_tokens"].as_u64().unwrap_or(0);
    let ms = match (
        run["started"].as_str().map(humantime::parse_rfc3339),
        run["ended"].as_str().map(humantime::parse_rfc3339),
    ) {
        (Some(Ok(a)), Some(Ok(b))) => b.duration_since(a).map_or(0, |d| d.as_millis() as u64),
        _ => 0,
    };
    json!({
        "bundle": data["bundle"],
        "run_id": run["run_id"],
        "agent": run["agent"],
        "model": run["model"],
        "status": run["status"],
        "verdict": data["verify"]["verdict"],
        "steps": run["requests"],
        "tool_calls": run["tool_calls"],
        "tokens": tokens,
        "duration_ms": ms,
    })
}

/// A step as compared: the model's text and asked calls, and the tool calls that ran.
fn step_view(step: &Value) -> Value {
    let model = &step["model"];
    let tools: Vec<Value> = step["entries"]
        .as_array()
        .map(|entries| {
            entries
                .iter()
                .filter(|e| e["kind"] == "tool" && e["deferred"] != true)
                .map(|e| json!({"name": e["name"], "arguments": e["arguments"], "result": e["result"], "ok": e["ok"]}))
                .collect()
        })
        .unwrap_or_default();
    let asked: Vec<Value> = model["tool_calls"]
        .as_array()
        .map(|calls| {
            calls
                .iter()
                .map(|c| json!({"name": c["name"], "arguments": c["arguments"]}))
                .collect()
        })
        .unwrap_or_default();
    let tokens =
        model["input_tokens"].as_u64().unwrap_or(0) + model["output_tokens"].as_u64().unwrap_or(0);
    json!({
        "n": step["n"],
        "model_text": model["text"],
        "model_tool_calls": asked,
        "tool_calls": tools,
        "tokens": tokens,
        "duration_ms": model["duration_ms"],
    })
}

fn steps_of(data: &Value) -> Vec<Value> {
    data["steps"]
        .as_array()
        .map(|s| s.iter().map(step_view).collect())
        .unwrap_or_default()
}

/// Compares two runs: A and B as their bundles give them.
pub fn compare(a: &BundleSource, b: &BundleSource) -> RunDiff {
    let (da, db) = (crate::page_data(a), crate::page_data(b));
    let (sa, sb) = (steps_of(&da), steps_of(&db));
    let mut differences = Vec::new();
    let mut diff = |kind: &str, step: Option<usize>, at: Option<String>, a: &Value, b: &Value| {
        differences.push(Difference {
            kind: kind.to_owned(),
            step,
            at,
            a: a.clone(),
            b: b.clone(),
        });
    };
    if da["run"]["status"] != db["run"]["status"] {
        diff(
            "status",
            None,
            None,
            &da["run"]["status"],
            &db["run"]["status"],
        );
    }
    if sa.len() != sb.len() {
        diff("steps", None, None, &json!(sa.len()), &json!(sb.len()));
    }
    let mut steps = Vec::new();
    for i in 0..sa.len().max(sb.len()) {
        let (x, y) = (
            sa.get(i).unwrap_or(&Value::Null),
            sb.get(i).unwrap_or(&Value::Null),
        );
        let n = x["n"].as_u64().or(y["n"].as_u64()).map(|n| n as usize);
        steps.push(json!({"n": n, "a": x, "b": y}));
        if x.is_null() || y.is_null() {
            continue;
        }
        for key in ["model_text", "model_tool_calls"] {
            if x[key] != y[key] {
                diff(key, n, None, &x[key], &y[key]);
            }
        }
        let (tx, ty) = (
            x["tool_calls"].as_array().unwrap(),
            y["tool_calls"].as_array().unwrap(),
        );
        if tx.len() != ty.len() {
            diff("tool_calls", n, None, &json!(tx.len()), &json!(ty.len()));
        }
        for (j, (cx, cy)) in tx.iter().zip(ty).enumerate() {
            let at = Some(format!("{} ({})", j + 1, cx["name"].as_str().unwrap_or("")));
            for (key, kind) in [
                ("name", "tool_name"),
                ("arguments", "tool_arguments"),
                ("result", "tool_result"),
                ("ok", "tool_ok"),
            ] {
                if cx[key] != cy[key] {
                    diff(kind, n, at.clone(), &cx[key], &cy[key]);
                }
            }
        }
    }
    let outputs = compare_outputs(&da, &db, &mut diff);
    RunDiff {
        same: differences.is_empty(),
        a: header(&da),
        b: header(&db),
        differences,
        steps,
        outputs,
    }
}

/// Each output path of either run, compared by digest; text files get a line diff.
fn compare_outputs(
    da: &Value,
    db: &Value,
    diff: &mut impl FnMut(&str, Option<usize>, Option<String>, &Value, &Value),
) -> Vec<Value> {
    let files = |d: &Value| -> std::collections::BTreeMap<String, Value> {
        d["outputs"]
            .as_array()
            .map(|o| {
                o.iter()
                    .map(|f| (f["path"].as_str().unwrap_or("").to_owned(), f.clone()))
                    .collect()
            })
            .unwrap_or_default()
    };
    let (fa, fb) = (files(da), files(db));
    let mut paths: Vec<&String> = fa.keys().chain(fb.keys()).collect();
    paths.sort();
    paths.dedup();
    let mut out = Vec::new();
    for path in paths {
        let (x, y) = (fa.get(path), fb.get(path));
        let (ha, hb) = (
            x.map(|f| f["sha256"].clone()),
            y.map(|f| f["sha256"].clone()),
        );
        let same = ha == hb;
        let mut entry = json!({"path": path, "a_sha256": ha, "b_sha256": hb, "same": same});
        if !same {
            if let (Some(x), Some(y)) = (x, y) {
                let (ta, tb) = (x["text"].as_str(), y["text"].as_str());
                if let (Some(ta), Some(tb)) = (ta, tb) {
                    let text = similar::TextDiff::from_lines(ta, tb)
                        .unified_diff()
                        .header(&format!("a/{path}"), &format!("b/{path}"))
                        .to_string();
                    entry["diff"] = json!(text);
                }
                diff(
                    "output",
                    None,
                    Some(path.clone()),
                    &x["sha256"],
                    &y["sha256"],
                );
            } else {
                diff(
                    "output_only",
                    None,
                    Some(path.clone()),
                    &json!(x.is_some()),
                    &json!(y.is_some()),
                );
            }
        }
        out.push(entry);
    }
    out
}

const TEMPLATE: &str = include_str!("compare.html");
const SCRIPT: &str = include_str!("compare.js");
const STYLE: &str = include_str!("compare.css");

/// The Content-Security-Policy of the side-by-side page (its own script and style).
pub fn comparison_security_policy() -> String {
    crate::policy_for(SCRIPT, STYLE)
}

/// Two runs side by side as one HTML page with no outside references.
///
/// # Errors
///
/// [`ViewError::Template`](crate::ViewError::Template) when the comparison cannot be turned
/// into the page's data or the template does not render (a defect of this crate).
pub fn render_comparison(diff: &RunDiff) -> Result<String, crate::ViewError> {
    let data = serde_json::to_value(diff).map_err(|e| crate::ViewError::Template(e.to_string()))?;
    crate::render_template(TEMPLATE, comparison_security_policy(), STYLE, SCRIPT, &data)
}

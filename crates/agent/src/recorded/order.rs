//! The order a recording's turns ran their calls in (batches of calls that ran
//! together), and the first turn a replay ran in a different order.

use std::collections::HashMap;

use provrun_evidence::EventPayload;

use super::bundle::{key_of, legacy_ids};

/// The order a log's turns ran their calls in: for each turn (by the model request whose
/// response asked for the calls), its batches in order, each the ids of calls that ran
/// together. Calls without `start_order`/`end_order` (older logs, deferred calls, calls the
/// runtime answered without running) are left out. A call joins the batch before it when
/// it started before any call of that batch ended.
pub(crate) fn order_batches(log: &[EventPayload], legacy: bool) -> HashMap<u64, Vec<Vec<String>>> {
    let mut spans: HashMap<u64, Vec<(u64, u64, String)>> = HashMap::new();
    let mut step = 0u64;
    for e in log {
        match e {
            EventPayload::ModelCalled(_) => step += 1,
            EventPayload::ToolCalled(p) => {
                if let (Some(start), Some(end), Some(id)) =
                    (p.start_order, p.end_order, key_of(p, legacy))
                {
                    spans
                        .entry(step)
                        .or_default()
                        .push((start, end, id.to_string()));
                }
            }
            _ => {}
        }
    }
    spans
        .into_iter()
        .map(|(step, mut calls)| {
            calls.sort();
            let mut batches: Vec<Vec<String>> = Vec::new();
            let mut first_end = u64::MAX;
            for (start, end, id) in calls {
                match batches.last_mut() {
                    Some(last) if start < first_end => {
                        last.push(id);
                        first_end = first_end.min(end);
                    }
                    _ => {
                        batches.push(vec![id]);
                        first_end = end;
                    }
                }
            }
            (step, batches)
        })
        .collect()
}

/// The first turn whose calls ran in a different order in the replay than in the
/// recording (only calls the recording gives an order count).
pub(crate) fn order_difference(old: &[EventPayload], new: &[EventPayload]) -> Option<String> {
    // Both logs name calls the way the recording does.
    let legacy = legacy_ids(old);
    let (old, new) = (order_batches(old, legacy), order_batches(new, legacy));
    let mut steps: Vec<&u64> = old.keys().collect();
    steps.sort();
    for step in steps {
        let recorded = &old[step];
        let known: std::collections::HashSet<&String> = recorded.iter().flatten().collect();
        let replayed: Vec<Vec<String>> = new
            .get(step)
            .into_iter()
            .flatten()
            .map(|b| b.iter().filter(|id| known.contains(id)).cloned().collect())
            .filter(|b: &Vec<String>| !b.is_empty())
            .collect();
        if *recorded != replayed {
            let show = |batches: &[Vec<String>]| {
                batches
                    .iter()
                    .map(|b| format!("[{}]", b.join(", ")))
                    .collect::<Vec<_>>()
                    .join(" then ")
            };
            return Some(format!(
                "the calls of model response {step} ran in a different order: recorded {}, \
                 replayed {}",
                show(recorded),
                show(&replayed)
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use provrun_evidence::ToolCalled;
    use serde_json::json;

    /// A `model_called` payload; only its place in the log matters here.
    fn model_called() -> EventPayload {
        EventPayload::ModelCalled(provrun_evidence::ModelCalled {
            model: "m".into(),
            stream: false,
            request: None,
            response: None,
            usage: json!(null),
            finish_reason: None,
            duration_ms: 0,
            error: None,
            attempts: Vec::new(),
            response_rendered: false,
            http: None,
            tool_calls: Vec::new(),
        })
    }

    /// A `tool_called` payload of call `id`, with its start and end on the turn's clock
    /// when given.
    fn tool_called(id: &str, span: Option<(u64, u64)>) -> EventPayload {
        EventPayload::ToolCalled(ToolCalled {
            call_id: id.into(),
            start_order: span.map(|s| s.0),
            end_order: span.map(|s| s.1),
            ..ToolCalled::default()
        })
    }

    /// A log of one model response whose calls ran with these (id, start, end) spans.
    fn log(spans: &[(&str, u64, u64)]) -> Vec<EventPayload> {
        let mut events = vec![model_called()];
        for (id, start, end) in spans {
            events.push(tool_called(id, Some((*start, *end))));
        }
        events
    }

    #[test]
    fn batches_are_read_back_from_the_spans_whatever_order_calls_ended_in() {
        // w alone, then r1 r2 r3 together (ending 3, 1, 2), then w2 alone.
        let events = log(&[
            ("w", 1, 2),
            ("r1", 3, 8),
            ("r2", 4, 7),
            ("r3", 5, 6),
            ("w2", 9, 10),
        ]);
        let batches = order_batches(&events, true);
        assert_eq!(
            batches[&1],
            vec![vec!["w"], vec!["r1", "r2", "r3"], vec!["w2"]]
        );
        // A log from before the order fields has no batches.
        let old = vec![model_called(), tool_called("x", None)];
        assert!(order_batches(&old, true).is_empty());
    }

    #[test]
    fn a_replay_that_ran_calls_in_other_groups_differs() {
        let recorded = log(&[("a", 1, 2), ("b", 3, 4)]);
        assert_eq!(order_difference(&recorded, &recorded), None);
        // Overlapping where the recording ran them one after the other.
        let replayed = log(&[("a", 1, 3), ("b", 2, 4)]);
        let diff = order_difference(&recorded, &replayed).unwrap();
        assert!(diff.contains("model response 1"), "{diff}");
        assert!(
            diff.contains("recorded [a] then [b], replayed [a, b]"),
            "{diff}"
        );
        // The other way round too.
        assert!(order_difference(&replayed, &recorded).is_some());
    }
}

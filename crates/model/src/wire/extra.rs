//! How a settings table's `extra` keys join a request body that a wire builder made:
//! added where the body lacks them, never replacing what the builder set.

use serde_json::{Map, Value};

/// Merges `extra` into `body` without replacing anything in it: a key `body` lacks is
/// added; where both hold an object, the objects merge the same way; any other key
/// `body` already has keeps its value (with a warning naming it).
pub(crate) fn merge_extra(body: &mut Map<String, Value>, extra: &Map<String, Value>) {
    for (key, value) in extra {
        match (body.get_mut(key), value) {
            (None, _) => {
                body.insert(key.clone(), value.clone());
            }
            (Some(Value::Object(inner)), Value::Object(more)) => merge_extra(inner, more),
            (Some(_), _) => {
                tracing::warn!(key = %key, "an `extra` field would replace one provrun sets; left out");
            }
        }
    }
}

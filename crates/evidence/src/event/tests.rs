//! Unit tests of the event types: names as documented, blob refs, and the confidence
//! each payload may carry.

use serde_json::json;

use super::*;

#[test]
fn names_serialise_as_documented() {
    assert_eq!(
        serde_json::to_value(Confidence::Observed).unwrap(),
        json!("observed")
    );
    assert_eq!(
        serde_json::to_value(Confidence::Parsed).unwrap(),
        json!("parsed")
    );
    assert_eq!(
        serde_json::to_value(Confidence::Declared).unwrap(),
        json!("declared")
    );
    for t in EventType::ALL {
        assert_eq!(serde_json::to_value(t).unwrap(), json!(t.as_str()));
        assert_eq!(EventType::from_name(t.as_str()), Some(t));
    }
    assert_eq!(EventType::from_name("nope"), None);
}

#[test]
fn a_steered_event_names_its_text_blob_and_is_observed() {
    let blob = json!({"digest": {"sha256": "ab"}, "size": 3, "media_type": "text/plain"});
    let good = json!({"text": blob, "before_request": 2});
    assert!(check_payload(EventType::Steered, Confidence::Observed, &good).is_ok());
    // Only the runtime sees a message arrive: never parsed or declared.
    assert!(check_payload(EventType::Steered, Confidence::Parsed, &good).is_err());
    assert!(check_payload(EventType::Steered, Confidence::Declared, &good).is_err());
    // The text inline instead of as a blob, or no request number: refused.
    let inline = json!({"text": "hello", "before_request": 2});
    assert!(check_payload(EventType::Steered, Confidence::Observed, &inline).is_err());
    let unplaced = json!({"text": blob});
    assert!(check_payload(EventType::Steered, Confidence::Observed, &unplaced).is_err());
}

#[test]
fn blob_ref_shape() {
    let b = BlobRef {
        digest: Digest {
            sha256: "ab".into(),
        },
        size: 3,
        media_type: "text/plain".into(),
    };
    let v = serde_json::to_value(&b).unwrap();
    assert_eq!(
        v,
        json!({"digest":{"sha256":"ab"},"size":3,"media_type":"text/plain"})
    );
    assert_eq!(BlobRef::from_value(&v), Some(b));
    assert_eq!(
        BlobRef::from_value(&json!({"digest":{"sha256":"ab"},"size":3})),
        None
    );
}

#[test]
fn tool_call_confidence_follows_provider_run() {
    let mut t = ToolCalled {
        name: "x".into(),
        call_id: "c".into(),
        arguments: json!({}),
        result: json!(null),
        ok: true,
        duration_ms: 0,
        deferred: false,
        output_tool: false,
        provider_run: false,
        mode: None,
        arguments_blob: None,
        result_blob: None,
        decided_by: None,
        mcp: None,
        mcp_blob: None,
        ..ToolCalled::default()
    };
    assert_eq!(t.confidence(), Confidence::Observed);
    t.provider_run = true;
    assert_eq!(t.confidence(), Confidence::Parsed);
    let v = serde_json::to_value(&t).unwrap();
    assert!(check_payload(EventType::ToolCalled, Confidence::Parsed, &v).is_ok());
    assert!(check_payload(EventType::ToolCalled, Confidence::Observed, &v).is_err());
    assert!(check_payload(EventType::Declared, Confidence::Declared, &v).is_err());
    // An observed call may be written as parsed (a weaker claim), never the reverse.
    t.provider_run = false;
    let v = serde_json::to_value(&t).unwrap();
    assert!(check_payload(EventType::ToolCalled, Confidence::Parsed, &v).is_ok());
    assert!(check_payload(EventType::ToolCalled, Confidence::Declared, &v).is_err());
}

#[test]
fn model_calls_may_be_parsed_but_other_types_keep_their_confidence() {
    let m = ModelCalled {
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
    };
    let v = serde_json::to_value(&m).unwrap();
    assert!(check_payload(EventType::ModelCalled, Confidence::Observed, &v).is_ok());
    assert!(check_payload(EventType::ModelCalled, Confidence::Parsed, &v).is_ok());
    assert!(check_payload(EventType::ModelCalled, Confidence::Declared, &v).is_err());
    let f = FileRecord {
        path: "a".into(),
        sha256: "00".into(),
        size: 0,
    };
    let v = serde_json::to_value(InputStaged(f)).unwrap();
    assert!(check_payload(EventType::InputStaged, Confidence::Parsed, &v).is_err());
}

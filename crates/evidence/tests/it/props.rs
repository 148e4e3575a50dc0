//! Property tests: any single-byte change anywhere in a finished bundle fails `verify`;
//! any byte prefix of a valid log verifies as incomplete, never as corrupt.

use crate::common;

use std::path::PathBuf;
use std::sync::OnceLock;

use common::*;
use proptest::prelude::*;
use provrun_evidence::*;

fn bundle() -> &'static (PathBuf, Vec<PathBuf>) {
    static B: OnceLock<(PathBuf, Vec<PathBuf>)> = OnceLock::new();
    B.get_or_init(|| {
        let dir = make_bundle("props", Durability::Flush);
        let files = bundle_files(&dir);
        (dir, files)
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 192, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn any_flipped_byte_fails(file in any::<prop::sample::Index>(), at in any::<prop::sample::Index>(), xor in 1u8..=255) {
        let (orig, files) = bundle();
        let rel = file.get(files);
        let dir = scratch("flip");
        copy_tree(orig, &dir);
        let path = dir.join(rel);
        let mut bytes = std::fs::read(&path).unwrap();
        let i = at.index(bytes.len());
        bytes[i] ^= xor;
        std::fs::write(&path, &bytes).unwrap();
        let r = verify(&dir);
        std::fs::remove_dir_all(&dir).unwrap();
        prop_assert!(!r.ok, "flipping byte {} of {} went unnoticed: {:#?}", i, rel.display(), r);
    }

    #[test]
    fn any_log_prefix_is_incomplete(cut in any::<prop::sample::Index>()) {
        let (orig, _) = bundle();
        let log = std::fs::read(orig.join("events.jsonl")).unwrap();
        let n = cut.index(log.len() + 1);
        let dir = scratch("cut");
        copy_tree(orig, &dir);
        std::fs::remove_file(dir.join("statement.json")).unwrap();
        std::fs::write(dir.join("events.jsonl"), &log[..n]).unwrap();
        let r = verify(&dir);
        std::fs::remove_dir_all(&dir).unwrap();
        prop_assert!(r.ok && !r.complete, "prefix of {} bytes: {:#?}", n, r);
    }

    #[test]
    fn canonical_json_is_stable(v in json_value()) {
        let text = to_canonical_string(&v).unwrap();
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        prop_assert_eq!(to_canonical_string(&back).unwrap(), text);
    }
}

fn json_value() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::Value;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        any::<String>().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(any::<String>(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

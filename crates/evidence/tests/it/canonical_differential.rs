//! Differential test of the RFC 8785 canonicaliser: every generated JSON value must come
//! out byte for byte as an independent implementation (`serde_json_canonicalizer`, which
//! formats numbers with `ryu-js`) writes it, and the number samples of RFC 8785
//! Appendix B must come out as the RFC gives them.

use proptest::prelude::*;
use provrun_evidence::to_canonical_string;
use serde_json::{Map, Value, json};

/// RFC 8785 Appendix B: IEEE 754 bit patterns and their canonical JSON form (the facts
/// of the RFC's table, typed in here). NaN and Infinity (also in the table) are refused.
const APPENDIX_B: &[(u64, &str)] = &[
    (0x0000000000000000, "0"),
    (0x8000000000000000, "0"),
    (0x0000000000000001, "5e-324"),
    (0x8000000000000001, "-5e-324"),
    (0x7fefffffffffffff, "1.7976931348623157e+308"),
    (0xffefffffffffffff, "-1.7976931348623157e+308"),
    (0x4340000000000000, "9007199254740992"),
    (0xc340000000000000, "-9007199254740992"),
    (0x4430000000000000, "295147905179352830000"),
    (0x44b52d02c7e14af5, "9.999999999999997e+22"),
    (0x44b52d02c7e14af6, "1e+23"),
    (0x44b52d02c7e14af7, "1.0000000000000001e+23"),
    (0x444b1ae4d6e2ef4e, "999999999999999700000"),
    (0x444b1ae4d6e2ef4f, "999999999999999900000"),
    (0x444b1ae4d6e2ef50, "1e+21"),
    (0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"),
    (0x3eb0c6f7a0b5ed8d, "0.000001"),
    (0x41b3de4355555553, "333333333.3333332"),
    (0x41b3de4355555554, "333333333.33333325"),
    (0x41b3de4355555555, "333333333.3333333"),
    (0x41b3de4355555556, "333333333.3333334"),
    (0x41b3de4355555557, "333333333.33333343"),
    (0xbecbf647612f3696, "-0.0000033333333333333333"),
    (0x43143ff3c1cb0959, "1424953923781206.2"),
];

fn theirs(v: &Value) -> String {
    serde_json_canonicalizer::to_string(v).expect("the reference canonicalises every finite value")
}

#[test]
fn rfc_8785_appendix_b_numbers() {
    for &(bits, want) in APPENDIX_B {
        let f = f64::from_bits(bits);
        let v = json!(f);
        assert_eq!(theirs(&v), want, "reference, {bits:016x}");
        assert_eq!(to_canonical_string(&v).unwrap(), want, "ours, {bits:016x}");
    }
    // The table's NaN and Infinity have no JSON form: serde_json turns them into null
    // before either canonicaliser sees them, and the number writer refuses them.
    for bits in [0x7fffffffffffffffu64, 0x7ff0000000000000] {
        assert_eq!(json!(f64::from_bits(bits)), Value::Null);
    }
}

/// Integers beyond 2^53 are numbers like any other: both go through the nearest double.
#[test]
fn large_integers_agree() {
    for v in [
        json!(9007199254740993u64),
        json!(u64::MAX),
        json!(i64::MIN),
        json!(-9007199254740993i64),
        json!(9007199254740992u64),
        json!(295147905179352830000.0),
    ] {
        assert_eq!(to_canonical_string(&v).unwrap(), theirs(&v), "{v}");
    }
}

/// Characters that matter to escaping and to UTF-16 ordering: controls, the two escaped
/// ASCII characters, DEL, line and paragraph separators (not escaped), a character above
/// the surrogate range (U+FB33) and ones that need a surrogate pair.
fn interesting_char() -> impl Strategy<Value = char> {
    prop_oneof![
        prop::char::range('\u{0}', '\u{1f}'),
        Just('"'),
        Just('\\'),
        Just('/'),
        Just('\u{7f}'),
        Just('\u{2028}'),
        Just('\u{2029}'),
        Just('\u{fb33}'),
        Just('\u{ffff}'),
        Just('\u{1f600}'),
        Just('\u{10ffff}'),
        prop::char::range('a', 'e'),
        prop::char::range('A', 'C'),
        Just('é'),
        any::<char>(),
    ]
}

fn text() -> impl Strategy<Value = String> {
    prop::collection::vec(interesting_char(), 0..8).prop_map(|cs| cs.into_iter().collect())
}

fn number() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(|i| json!(i)),
        any::<u64>().prop_map(|u| json!(u)),
        (-10_000i64..10_000).prop_map(|i| json!(i)),
        // Every finite double, by its bits (subnormals, huge and tiny exponents).
        any::<u64>()
            .prop_map(f64::from_bits)
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        // Decimal-looking values, where shortest round-trip digits matter most.
        (any::<i32>(), 0i32..25).prop_map(|(m, e)| json!(f64::from(m) / 10f64.powi(e))),
        (any::<i32>(), 0i32..30).prop_map(|(m, e)| json!(f64::from(m) * 10f64.powi(e))),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        number(),
        text().prop_map(Value::String),
        any::<String>().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((text(), inner), 0..6)
                .prop_map(|members| Value::Object(members.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    #[test]
    fn agrees_with_an_independent_implementation(v in value()) {
        prop_assert_eq!(to_canonical_string(&v).unwrap(), theirs(&v));
    }

    #[test]
    fn numbers_agree(v in number()) {
        prop_assert_eq!(to_canonical_string(&v).unwrap(), theirs(&v));
    }
}

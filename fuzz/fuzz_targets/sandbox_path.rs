//! Fuzz target: `VirtualPath::parse` over arbitrary strings. A path it accepts is
//! normalised (plain names only, within the limits) and parses back to itself.

#![no_main]

use libfuzzer_sys::fuzz_target;
use provrun_sandbox::{Limits, VirtualPath};

fuzz_target!(|data: &[u8]| {
    let Ok(raw) = std::str::from_utf8(data) else {
        return;
    };
    let limits = Limits::default();
    let Ok(path) = VirtualPath::parse(raw, &limits) else {
        return;
    };
    for name in path.names() {
        assert!(
            !name.is_empty() && name != "." && name != "..",
            "{raw:?} gave name {name:?}"
        );
        assert!(!name.contains('/') && !name.contains('\\') && !name.contains('\0'));
        assert!(!name.chars().any(char::is_control));
    }
    let shown = path.to_string();
    let again = VirtualPath::parse(&shown, &limits)
        .unwrap_or_else(|e| panic!("{raw:?} normalised to {shown:?}, which does not parse: {e}"));
    assert_eq!(again, path, "{raw:?} -> {shown:?}");
});

//! The ledger checked by a second implementation written by others: Go's
//! `golang.org/x/mod/sumdb/note` and `sumdb/tlog` from Debian's packages, through
//! tests/interop/ledger_check.go (built offline, in GOPATH mode, into the test target).
//! Go accepts every checkpoint (signed note, C2SP text), reads the tiles (authenticating
//! each against the signed root), and checks inclusion proofs of leaves old and new and a
//! consistency proof from every earlier checkpoint, at sizes across tile boundaries up to
//! a level-2 tile. A changed leaf, proof hash or checkpoint line is refused by Go and by
//! provrun both.
//!
//! Without Go or the Debian package the test is skipped with a loud message, except under
//! `CI=true`, where it fails: `cargo xtask ci` installs `golang-go` and
//! `golang-golang-x-mod-dev` there.

use std::path::{Path, PathBuf};
use std::process::Command;

use provrun_ledger::merkle::leaf_hash;
use provrun_ledger::*;

use crate::common::{leaf, new_ledger};

/// Where Debian puts the Go sources it packages (GOPATH layout).
const GOPATH: &str = "/usr/share/gocode";

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// tests/interop/ledger_check.go built into the test target (once per process).
fn go_checker() -> Result<PathBuf, String> {
    static BUILT: std::sync::Mutex<Option<Result<PathBuf, String>>> = std::sync::Mutex::new(None);
    let mut built = BUILT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    built
        .get_or_insert_with(|| {
            let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
            let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("go");
            std::fs::create_dir_all(&out).map_err(|e| e.to_string())?;
            let exe = out.join("ledger_check");
            let mod_dir = Path::new(GOPATH).join("src/golang.org/x/mod/sumdb/tlog");
            if !mod_dir.is_dir() {
                return Err(format!(
                    "{} is missing (apt-get install golang-golang-x-mod-dev)",
                    mod_dir.display()
                ));
            }
            let made = Command::new("go")
                .args(["build", "-o"])
                .arg(&exe)
                .arg(root.join("tests/interop/ledger_check.go"))
                .env("GO111MODULE", "off")
                .env("GOPATH", GOPATH)
                .env("GOCACHE", out.join("cache"))
                .env("GOFLAGS", "")
                .env("CGO_ENABLED", "0")
                .output()
                .map_err(|e| format!("`go` could not start (apt-get install golang-go): {e}"))?;
            if !made.status.success() {
                return Err(format!(
                    "go build failed: {}",
                    String::from_utf8_lossy(&made.stderr)
                ));
            }
            Ok(exe)
        })
        .clone()
}

fn unavailable(why: &str) {
    assert!(
        !in_ci(),
        "CI=true: the Go interoperability test cannot run: {why}"
    );
    eprintln!(
        "\n*** SKIPPED go_interop: {why}.\n*** The ledger is NOT checked against Go's \
         sumdb/tlog and sumdb/note on this machine (CI=true makes this a failure).\n"
    );
}

/// Run the checker; whether it accepted, and what it printed.
fn go(exe: &Path, args: &[&dyn AsRef<std::ffi::OsStr>]) -> (bool, String) {
    let out = Command::new(exe)
        .args(args.iter().map(|a| a.as_ref()))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    (out.status.success(), text)
}

/// One line of the checker's `proofs` file.
fn proof_line(ledger: &Ledger, index: u64) -> serde_json::Value {
    let p = ledger.inclusion_proof(index).unwrap();
    let mut v = serde_json::to_value(&p).unwrap();
    use base64::Engine as _;
    v["leaf"] = base64::engine::general_purpose::STANDARD
        .encode(leaf(index))
        .into();
    v
}

#[test]
fn go_accepts_every_checkpoint_and_proof_and_refuses_changed_ones() {
    let exe = match go_checker() {
        Ok(e) => e,
        Err(why) => return unavailable(&why),
    };
    let tmp = tempfile::tempdir().unwrap();
    let (dir, vkey) = new_ledger(tmp.path());
    let vk = vkey.to_text();
    let mut kept: Vec<(u64, PathBuf)> = Vec::new();
    let mut size = 0u64;
    for target in [1u64, 2, 3, 7, 255, 256, 257, 600, 4096, 70_000] {
        let leaves: Vec<Vec<u8>> = (size..target).map(leaf).collect();
        add_leaves(&dir, &leaves, None).unwrap();
        size = target;
        let cp = tmp.path().join(format!("checkpoint-{size}"));
        std::fs::copy(dir.join(CHECKPOINT_FILE), &cp).unwrap();
        let (ok, text) = go(&exe, &[&"checkpoint", &vk, &cp]);
        assert!(ok && text.starts_with(&format!("{size} ")), "{text}");
        let (ok, text) = go(&exe, &[&"tiles", &vk, &dir]);
        assert!(ok, "{text}");
        // Inclusion: the first, last and some leaves between.
        let ledger = Ledger::open(&dir, None).unwrap();
        let mut picks: Vec<u64> = (0..size).step_by((size as usize / 40).max(1)).collect();
        picks.push(size - 1);
        let lines: Vec<String> = picks
            .iter()
            .map(|&i| proof_line(&ledger, i).to_string())
            .collect();
        let file = tmp.path().join("proofs.jsonl");
        std::fs::write(&file, lines.join("\n") + "\n").unwrap();
        let (ok, text) = go(&exe, &[&"proofs", &vk, &cp, &file]);
        assert!(ok, "{text}");
        // Consistency from every checkpoint kept so far.
        for (old, old_cp) in &kept {
            let proof = tmp.path().join("consistency.json");
            let p = ledger.consistency_proof(*old).unwrap();
            std::fs::write(&proof, serde_json::to_vec(&p).unwrap()).unwrap();
            let (ok, text) = go(&exe, &[&"consistency", &vk, old_cp, &cp, &proof]);
            assert!(ok, "{old} to {size}: {text}");
        }
        kept.push((size, cp));
    }
    refusals(&exe, &dir, &vkey, tmp.path());
}

/// A changed leaf, proof hash or checkpoint line: refused by Go and by provrun.
fn refusals(exe: &Path, dir: &Path, vkey: &VerifierKey, tmp: &Path) {
    let vk = vkey.to_text();
    let ledger = Ledger::open(dir, None).unwrap();
    let size = ledger.checkpoint().size;
    let note = std::fs::read_to_string(dir.join(CHECKPOINT_FILE)).unwrap();
    let good = proof_line(&ledger, 1234);
    drop(ledger);
    let cp = tmp.join("cp");
    std::fs::write(&cp, &note).unwrap();
    let file = tmp.join("one.jsonl");
    let go_accepts = |line: &serde_json::Value, cp: &Path| {
        std::fs::write(&file, format!("{line}\n")).unwrap();
        go(exe, &[&"proofs", &vk, &cp, &file]).0
    };
    let ours_accepts = |line: &serde_json::Value, note: &[u8]| {
        use base64::Engine as _;
        let data = base64::engine::general_purpose::STANDARD
            .decode(line["leaf"].as_str().unwrap())
            .unwrap();
        let digest = std::str::from_utf8(&data[7..71]).unwrap().to_owned();
        let mut proof = line.clone();
        proof.as_object_mut().unwrap().remove("leaf");
        check_offline(vkey, note, &serde_json::to_vec(&proof).unwrap(), &digest).is_ok()
            && data == leaf_data(&digest)
    };
    assert!(go_accepts(&good, &cp) && ours_accepts(&good, note.as_bytes()));
    // A changed leaf.
    let mut changed = good.clone();
    use base64::Engine as _;
    changed["leaf"] = base64::engine::general_purpose::STANDARD
        .encode(leaf(1235))
        .into();
    assert!(!go_accepts(&changed, &cp) && !ours_accepts(&changed, note.as_bytes()));
    // A changed hash.
    let mut changed = good.clone();
    changed["hashes"][2] = encode_hashes(&[leaf_hash(b"x")])[0].clone().into();
    assert!(!go_accepts(&changed, &cp) && !ours_accepts(&changed, note.as_bytes()));
    // Each changed line of the checkpoint.
    let lines: Vec<&str> = note.split('\n').collect();
    for i in [0usize, 1, 2, 4] {
        let mut l: Vec<String> = lines.iter().map(|s| s.to_string()).collect();
        l[i] = match i {
            1 => (size + 1).to_string(),
            2 => encode_hashes(&[leaf_hash(b"y")])[0].clone(),
            _ => l[i].replacen(|c: char| c.is_ascii_alphanumeric(), "Q", 1),
        };
        let bad = l.join("\n");
        std::fs::write(&cp, &bad).unwrap();
        assert!(
            !go_accepts(&good, &cp),
            "Go accepted checkpoint line {i} changed"
        );
        assert!(
            !ours_accepts(&good, bad.as_bytes()),
            "provrun accepted line {i} changed"
        );
    }
    // A changed leaf in the tiles is refused by Go's tile reader and by `verify`.
    let entries = dir.join("tile/entries/000");
    let mut bytes = std::fs::read(&entries).unwrap();
    bytes[5 * 74 + 2 + 7] ^= 0x01;
    std::fs::write(&entries, &bytes).unwrap();
    let hashes0 = dir.join("tile/0/000");
    let mut h = std::fs::read(&hashes0).unwrap();
    h[5 * 32] ^= 0x01;
    std::fs::write(&hashes0, &h).unwrap();
    assert!(!go(exe, &[&"tiles", &vk, &dir]).0, "Go read a changed tile");
    assert!(!verify_ledger(dir, None).ok);
}

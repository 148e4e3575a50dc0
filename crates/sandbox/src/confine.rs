//! The in-sandbox half of command confinement: what the `provrun-confine` helper does
//! between bubblewrap's set-up and the command's `exec`.
//!
//! Landlock cannot be applied by the runtime before it starts bubblewrap, because a
//! Landlock-restricted process may no longer mount anything and bubblewrap must mount the
//! sandbox's file tree. So bubblewrap runs this helper as the sandbox's first program; the
//! helper sets the resource limits, restricts itself with Landlock, installs the seccomp
//! filter and then replaces itself with the command. All three are inherited across `exec`
//! and by every child, and none can be lifted from inside.
//!
//! The helper takes its orders on the command line:
//!
//! ```text
//! provrun-confine [--probe] [--require landlock|seccomp|rlimits]…
//!                 [--ro PATH]… [--rw PATH]… [--dev PATH]… [--limit NAME=N]…
//!                 [--forward PORT=SOCKET]… -- PROGRAM ARG…
//! ```
//!
//! `--ro` paths may be read and executed, `--rw` paths read and written, `--dev` paths
//! (device nodes such as `/dev/null`) read and written as files; everything else is denied
//! by Landlock. Limits are `cpu` (seconds), `as` (bytes of address space), `nproc`,
//! `fsize` (bytes) and `nofile`. With `--probe` the helper applies everything it can, prints
//! one line saying what held (`landlock=… seccomp=… rlimits=…`) and exits 0.
//!
//! Each `--forward PORT=SOCKET` starts, once the layers are in force and before the
//! program runs, the port forwarder of [`crate::forward`]: `127.0.0.1:PORT` inside the
//! sandbox's network namespace relayed to the Unix socket `SOCKET` (bound into the
//! sandbox). The forwarder is the helper's own executable under the same confinement.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::process::CommandExt as _;
use std::path::PathBuf;

#[cfg(feature = "confine")]
use landlock::{
    ABI, Access, AccessFs, LandlockStatus, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus,
    path_beneath_rules,
};
#[cfg(feature = "confine")]
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// Exit status of the helper when a required layer could not be applied.
pub const EXIT_LAYER_FAILED: i32 = 125;
/// Exit status of the helper when its arguments are wrong or the program cannot be run.
pub const EXIT_CANNOT_RUN: i32 = 127;

/// What the helper was told to do (parsed from its command line).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct HelperArgs {
    /// Report what held instead of running a program.
    pub probe: bool,
    /// Layers whose failure stops the helper (`landlock`, `seccomp`, `rlimits`).
    pub require: Vec<String>,
    /// Paths readable and executable.
    pub read_only: Vec<PathBuf>,
    /// Paths readable and writable.
    pub read_write: Vec<PathBuf>,
    /// Device files readable and writable.
    pub devices: Vec<PathBuf>,
    /// Resource limits by name (`cpu`, `as`, `nproc`, `fsize`, `nofile`).
    pub limits: BTreeMap<String, u64>,
    /// Loopback ports to forward to Unix sockets (see [`crate::forward`]).
    pub forwards: Vec<crate::forward::Forward>,
    /// The program and its arguments.
    pub program: Vec<OsString>,
}

impl HelperArgs {
    /// Parses the helper's arguments (without `argv[0]`).
    ///
    /// # Errors
    ///
    /// A message naming the flag when a flag is unknown, lacks its value, or has a value that
    /// does not parse.
    pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<HelperArgs, String> {
        let mut out = HelperArgs::default();
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            let flag = arg.to_string_lossy().into_owned();
            let mut value = || args.next().ok_or_else(|| format!("`{flag}` needs a value"));
            match flag.as_str() {
                "--probe" => out.probe = true,
                "--require" => out.require.push(value()?.to_string_lossy().into_owned()),
                "--ro" => out.read_only.push(value()?.into()),
                "--rw" => out.read_write.push(value()?.into()),
                "--dev" => out.devices.push(value()?.into()),
                "--limit" => {
                    let v = value()?.to_string_lossy().into_owned();
                    let (name, n) = v
                        .split_once('=')
                        .ok_or_else(|| format!("`--limit {v}`: expected NAME=NUMBER"))?;
                    let n: u64 = n
                        .parse()
                        .map_err(|_| format!("`--limit {v}`: `{n}` is not a number"))?;
                    out.limits.insert(name.to_owned(), n);
                }
                "--forward" => out
                    .forwards
                    .push(crate::forward::Forward::parse(&value()?.to_string_lossy())?),
                "--" => {
                    out.program = args.collect();
                    break;
                }
                other => return Err(format!("unknown argument `{other}`")),
            }
        }
        if !out.probe && out.program.is_empty() {
            return Err("no program given after `--`".to_owned());
        }
        Ok(out)
    }
}

/// How one layer fared in the helper.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// Fully in force.
    Full,
    /// In force, but weaker than asked (an older Landlock ABI).
    Partial(String),
    /// Not in force, and why.
    Failed(String),
}

impl Applied {
    fn word(&self) -> String {
        match self {
            Applied::Full => "full".to_owned(),
            Applied::Partial(why) => format!("partial({})", why.replace(' ', "_")),
            Applied::Failed(why) => format!("none({})", why.replace(' ', "_")),
        }
    }
}

/// Sets the resource limits (soft and hard: the command cannot raise them again), each
/// at most the hard limit the helper inherited.
pub fn apply_rlimits(limits: &BTreeMap<String, u64>) -> Applied {
    use rustix::process::{Resource, Rlimit, setrlimit};
    let mut failed = Vec::new();
    for (name, value) in limits {
        let resource = match name.as_str() {
            "cpu" => Resource::Cpu,
            "as" => Resource::As,
            "nproc" => Resource::Nproc,
            "fsize" => Resource::Fsize,
            "nofile" => Resource::Nofile,
            "core" => Resource::Core,
            other => {
                failed.push(format!("unknown limit {other}"));
                continue;
            }
        };
        // Never above the hard limit already in force: raising it would fail (and lowering
        // is all we want).
        let value = match rustix::process::getrlimit(resource).maximum {
            Some(hard) => (*value).min(hard),
            None => *value,
        };
        let limit = Rlimit {
            current: Some(value),
            maximum: Some(value),
        };
        if let Err(e) = setrlimit(resource, limit) {
            failed.push(format!("{name}: {e}"));
        }
    }
    if failed.is_empty() {
        Applied::Full
    } else {
        Applied::Failed(failed.join(", "))
    }
}

/// The Landlock ABI the sandbox's rules are written for: the file-system rights of this
/// ABI are all handled. A kernel with an older ABI enforces only the rights its ABI has
/// (see [`unenforced_rights`]).
pub const LANDLOCK_ABI_WANTED: u32 = 6;

/// The file-system access rights the sandbox asks Landlock to handle that a kernel with
/// Landlock ABI `found` (0: no Landlock) cannot enforce, by name: `execute`, `write_file`,
/// `read_file`, `read_dir`, `remove_dir`, `remove_file`, `make_char`, `make_dir`,
/// `make_reg`, `make_sock`, `make_fifo`, `make_block`, `make_sym` (ABI 1), `refer`
/// (ABI 2), `truncate` (ABI 3), `ioctl_dev` (ABI 5). Empty from ABI 5 on.
#[cfg(feature = "confine")]
pub fn unenforced_rights(found: u32) -> Vec<&'static str> {
    let wanted = AccessFs::from_all(ABI::from(LANDLOCK_ABI_WANTED as i32));
    let have = AccessFs::from_all(ABI::from(i32::try_from(found).unwrap_or(i32::MAX)));
    (wanted & !have).iter().map(right_name).collect()
}

#[cfg(feature = "confine")]
fn right_name(right: AccessFs) -> &'static str {
    match right {
        AccessFs::Execute => "execute",
        AccessFs::WriteFile => "write_file",
        AccessFs::ReadFile => "read_file",
        AccessFs::ReadDir => "read_dir",
        AccessFs::RemoveDir => "remove_dir",
        AccessFs::RemoveFile => "remove_file",
        AccessFs::MakeChar => "make_char",
        AccessFs::MakeDir => "make_dir",
        AccessFs::MakeReg => "make_reg",
        AccessFs::MakeSock => "make_sock",
        AccessFs::MakeFifo => "make_fifo",
        AccessFs::MakeBlock => "make_block",
        AccessFs::MakeSym => "make_sym",
        AccessFs::Refer => "refer",
        AccessFs::Truncate => "truncate",
        AccessFs::IoctlDev => "ioctl_dev",
        #[allow(unreachable_patterns)]
        _ => "other",
    }
}

/// Restricts this process (and whatever it runs) with Landlock: `read_only` paths may be
/// read and executed, `read_write` paths also written, `devices` read and written as files;
/// nothing else in the file system may be touched.
pub fn apply_landlock(args: &HelperArgs) -> Applied {
    apply_landlock_reporting(args).0
}

/// [`apply_landlock`], also returning the kernel's Landlock ABI (0 when the kernel has no
/// Landlock; `None` when the ruleset could not be built to ask).
#[cfg(feature = "confine")]
pub fn apply_landlock_reporting(args: &HelperArgs) -> (Applied, Option<u32>) {
    let abi = ABI::from(LANDLOCK_ABI_WANTED as i32);
    let result = (|| -> Result<(RulesetStatus, u32), landlock::RulesetError> {
        let all = AccessFs::from_all(abi);
        let read = AccessFs::from_read(abi);
        let device = AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::IoctlDev;
        let status = Ruleset::default()
            .handle_access(all)?
            .create()?
            .add_rules(path_beneath_rules(&args.read_only, read))?
            .add_rules(path_beneath_rules(&args.read_write, all))?
            .add_rules(path_beneath_rules(&args.devices, device))?
            .restrict_self()?;
        let found = match status.landlock {
            LandlockStatus::Available {
                effective_abi,
                kernel_abi,
            } => kernel_abi.unwrap_or(effective_abi as i32),
            _ => 0,
        };
        Ok((status.ruleset, u32::try_from(found).unwrap_or(0)))
    })();
    match result {
        Ok((RulesetStatus::FullyEnforced, found)) => (Applied::Full, Some(found)),
        Ok((RulesetStatus::PartiallyEnforced, found)) => (
            Applied::Partial(format!(
                "the kernel's Landlock ABI is {found}, older than {LANDLOCK_ABI_WANTED}"
            )),
            Some(found),
        ),
        Ok((RulesetStatus::NotEnforced, found)) => (
            Applied::Failed("the kernel does not enforce Landlock".to_owned()),
            Some(found),
        ),
        Err(e) => (Applied::Failed(e.to_string()), None),
    }
}

/// SHA-256 (hex) of the seccomp programs [`apply_seccomp`] installs, instruction by
/// instruction (`code`, `jt`, `jf`, `k`, little-endian), programs in order: the same
/// filter always has the same digest.
///
/// # Errors
///
/// A message when the filters cannot be built for this architecture.
#[cfg(feature = "confine")]
pub fn seccomp_digest() -> Result<String, String> {
    use sha2::Digest as _;
    let mut hash = sha2::Sha256::new();
    for program in seccomp_programs()? {
        hash.update((program.len() as u64).to_le_bytes());
        for insn in &program {
            hash.update(insn.code.to_le_bytes());
            hash.update([insn.jt, insn.jf]);
            hash.update(insn.k.to_le_bytes());
        }
    }
    Ok(hex::encode(hash.finalize()))
}

/// Namespace flags a confined command may never ask for.
#[cfg(feature = "confine")]
const NAMESPACE_FLAGS: [libc::c_int; 8] = [
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWNS,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWCGROUP,
    0x80, // CLONE_NEWTIME
];

/// System calls refused outright (EPERM): debugging other processes, mounting, kernel key
/// rings, eBPF, performance counters, namespace joins, module and kexec loading, swap,
/// reboot, and other processes' memory.
#[cfg(feature = "confine")]
const DENIED: &[libc::c_long] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_open_tree,
    libc::SYS_move_mount,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_setns,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_reboot,
    libc::SYS_userfaultfd,
    libc::SYS_chroot,
];

/// On x86-64 the x32 ABI reaches the same calls with this bit set; the filter refuses
/// those numbers too, so the x32 entry points cannot go around it.
#[cfg(all(feature = "confine", target_arch = "x86_64"))]
const X32_BIT: libc::c_long = 0x4000_0000;

#[cfg(feature = "confine")]
fn with_x32(nr: libc::c_long) -> Vec<i64> {
    #[cfg(target_arch = "x86_64")]
    {
        vec![nr, nr | X32_BIT]
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        vec![nr]
    }
}

/// Builds the seccomp programs: one answering EPERM to the denied calls (ptrace, mount,
/// keyctl, bpf, perf_event_open, setns, … — the `DENIED` list) and to `unshare`/`clone`
/// with a namespace flag, one answering `clone3` with ENOSYS (its flags live in memory a
/// filter cannot read, so libc is made to fall back to `clone`).
///
/// # Errors
///
/// A message when this architecture is not supported or a filter cannot be compiled.
#[cfg(feature = "confine")]
pub fn seccomp_programs() -> Result<Vec<BpfProgram>, String> {
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|e| e.to_string())?;
    let err = |e: seccompiler::BackendError| e.to_string();
    let mut deny: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for &nr in DENIED {
        for n in with_x32(nr) {
            deny.insert(n, Vec::new());
        }
    }
    let mut ns_rules = Vec::new();
    for flag in NAMESPACE_FLAGS {
        let flag = u64::from(flag.unsigned_abs());
        let cond = SeccompCondition::new(
            0,
            SeccompCmpArgLen::Qword,
            SeccompCmpOp::MaskedEq(flag),
            flag,
        )
        .map_err(err)?;
        ns_rules.push(SeccompRule::new(vec![cond]).map_err(err)?);
    }
    for nr in [libc::SYS_unshare, libc::SYS_clone] {
        for n in with_x32(nr) {
            deny.insert(n, ns_rules.clone());
        }
    }
    let deny = SeccompFilter::new(
        deny,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(err)?;
    let mut nosys: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for n in with_x32(libc::SYS_clone3) {
        nosys.insert(n, Vec::new());
    }
    let nosys = SeccompFilter::new(
        nosys,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch,
    )
    .map_err(err)?;
    let mut programs = Vec::new();
    for filter in [deny, nosys] {
        programs.push(BpfProgram::try_from(filter).map_err(|e| e.to_string())?);
    }
    Ok(programs)
}

/// Installs the seccomp filter (this also sets no-new-privileges).
#[cfg(feature = "confine")]
pub fn apply_seccomp() -> Applied {
    let programs = match seccomp_programs() {
        Ok(p) => p,
        Err(e) => return Applied::Failed(e),
    };
    for program in &programs {
        if let Err(e) = seccompiler::apply_filter(program) {
            return Applied::Failed(e.to_string());
        }
    }
    Applied::Full
}

/// Why a layer is missing from a build without the `confine` feature.
#[cfg(not(feature = "confine"))]
const NOT_BUILT: &str = "provrun-sandbox was built without its `confine` feature";

/// Every right a build without the `confine` feature leaves unenforced: all of them.
#[cfg(not(feature = "confine"))]
pub fn unenforced_rights(_found: u32) -> Vec<&'static str> {
    vec![
        "execute",
        "write_file",
        "read_file",
        "read_dir",
        "remove_dir",
        "remove_file",
        "make_char",
        "make_dir",
        "make_reg",
        "make_sock",
        "make_fifo",
        "make_block",
        "make_sym",
        "refer",
        "truncate",
        "ioctl_dev",
    ]
}

/// Without the `confine` feature no Landlock ruleset can be built: the layer fails, and
/// says why.
#[cfg(not(feature = "confine"))]
pub fn apply_landlock_reporting(_args: &HelperArgs) -> (Applied, Option<u32>) {
    (Applied::Failed(NOT_BUILT.to_owned()), None)
}

/// Without the `confine` feature there is no seccomp filter, hence no digest.
///
/// # Errors
///
/// Always: without the `confine` feature, a message saying it was not built in.
#[cfg(not(feature = "confine"))]
pub fn seccomp_digest() -> Result<String, String> {
    Err(NOT_BUILT.to_owned())
}

/// Without the `confine` feature no seccomp filter is installed: the layer fails, and
/// says why.
#[cfg(not(feature = "confine"))]
pub fn apply_seccomp() -> Applied {
    Applied::Failed(NOT_BUILT.to_owned())
}

/// The helper's whole life: parse, apply the layers, then probe-report or exec. Returns the
/// exit status when it does not exec.
pub fn helper_main(args: impl IntoIterator<Item = OsString>) -> i32 {
    let mut args = args.into_iter().peekable();
    #[cfg(feature = "confine")]
    if args.peek().is_some_and(|a| a == crate::trail::TRACER_FLAG) {
        args.next();
        return crate::trail::tracer::tracer_main(args).unwrap_or_else(|e| {
            eprintln!("provrun-confine --trail: {e}");
            EXIT_CANNOT_RUN
        });
    }
    #[cfg(feature = "confine")]
    if args.peek().is_some_and(|a| a == crate::trail::STUB_FLAG) {
        args.next();
        let e = crate::trail::stub::stub_main(args);
        eprintln!("provrun-confine --trail-stub: {e}");
        return EXIT_CANNOT_RUN;
    }
    if args
        .peek()
        .is_some_and(|a| a == crate::forward::FORWARDER_FLAG)
    {
        args.next();
        return match crate::forward::forwarder_main(args) {
            Ok(()) => 0,
            Err(crate::forward::ForwarderFailed) => EXIT_CANNOT_RUN,
        };
    }
    let args = match HelperArgs::parse(args) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("provrun-confine: {e}");
            return EXIT_CANNOT_RUN;
        }
    };
    // Order: limits first (setrlimit is not filtered, but keep it early), then Landlock,
    // then seccomp last so the helper's own set-up calls are not caught by it.
    let rlimits = apply_rlimits(&args.limits);
    let (landlock, landlock_abi) = apply_landlock_reporting(&args);
    let seccomp = apply_seccomp();
    if args.probe {
        // Extra words after the three layers: the kernel's Landlock ABI and the rights it
        // leaves unenforced (`-` for none).
        let unenforced = unenforced_rights(landlock_abi.unwrap_or(0)).join(",");
        println!(
            "landlock={} seccomp={} rlimits={} landlock_abi={} landlock_unenforced={}",
            landlock.word(),
            seccomp.word(),
            rlimits.word(),
            landlock_abi.map_or("unknown".to_owned(), |a| a.to_string()),
            if unenforced.is_empty() {
                "-"
            } else {
                &unenforced
            }
        );
        return 0;
    }
    for (name, applied) in [
        ("landlock", &landlock),
        ("seccomp", &seccomp),
        ("rlimits", &rlimits),
    ] {
        if let Applied::Failed(why) = applied
            && args.require.iter().any(|r| r == name)
        {
            eprintln!("provrun-confine: the {name} layer could not be applied: {why}");
            return EXIT_LAYER_FAILED;
        }
    }
    if !args.forwards.is_empty()
        && let Err(e) = crate::forward::start(&args.forwards)
    {
        eprintln!("provrun-confine: the port forwarder could not start: {e}");
        return EXIT_CANNOT_RUN;
    }
    let Some((program, rest)) = args.program.split_first() else {
        return EXIT_CANNOT_RUN;
    };
    let e = std::process::Command::new(program).args(rest).exec();
    eprintln!(
        "provrun-confine: cannot run `{}`: {e}",
        program.to_string_lossy()
    );
    EXIT_CANNOT_RUN
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_parse() {
        let a = HelperArgs::parse(
            [
                "--require",
                "landlock",
                "--ro",
                "/usr",
                "--rw",
                "/output",
                "--dev",
                "/dev/null",
                "--limit",
                "nproc=64",
                "--forward",
                "4180=/run/s/openai.sock",
                "--",
                "sh",
                "-c",
                "true",
            ]
            .map(OsString::from),
        )
        .unwrap();
        assert_eq!(a.require, ["landlock"]);
        assert_eq!(a.read_only, [PathBuf::from("/usr")]);
        assert_eq!(a.limits.get("nproc"), Some(&64));
        assert_eq!(a.program.len(), 3);
        assert_eq!(a.forwards.len(), 1);
        assert_eq!(a.forwards[0].port, 4180);
        assert!(HelperArgs::parse(["--forward", "x", "--", "true"].map(OsString::from)).is_err());
        assert!(HelperArgs::parse(["--limit", "x"].map(OsString::from)).is_err());
        assert!(HelperArgs::parse(["--rw", "/a"].map(OsString::from)).is_err());
    }

    #[test]
    fn the_rights_an_older_landlock_abi_leaves_unenforced_are_named() {
        let all = unenforced_rights(0);
        assert_eq!(all.len(), 16, "{all:?}");
        assert!(all.contains(&"write_file") && all.contains(&"execute"));
        assert_eq!(unenforced_rights(1), ["refer", "truncate", "ioctl_dev"]);
        assert_eq!(unenforced_rights(2), ["truncate", "ioctl_dev"]);
        assert_eq!(unenforced_rights(3), ["ioctl_dev"]);
        assert_eq!(unenforced_rights(4), ["ioctl_dev"]);
        for abi in [5, 6, 7, 99] {
            assert!(unenforced_rights(abi).is_empty(), "{abi}");
        }
    }

    #[test]
    fn the_seccomp_digest_is_stable() {
        let a = seccomp_digest().unwrap();
        assert_eq!(a.len(), 64);
        assert_eq!(a, seccomp_digest().unwrap());
    }

    #[test]
    fn the_seccomp_programs_compile() {
        let programs = seccomp_programs().unwrap();
        assert_eq!(programs.len(), 2);
        assert!(programs.iter().all(|p| !p.is_empty()));
    }
}

//! The port forwarder inside a program's network namespace.
//!
//! A program confined in a network namespace of its own reaches no socket of the host,
//! loopback included. To let it reach one service of the host (the recording proxy of
//! `provrun wrap`), the host service listens on a Unix socket whose folder is bound into
//! the sandbox, and this forwarder, started by the confinement helper inside the
//! namespace, listens on `127.0.0.1:PORT` there and relays each TCP connection to the
//! socket, byte for byte in both directions. The program sees an ordinary loopback port.
//!
//! It runs as the helper's own executable (`provrun-confine --forwarder PORT=SOCKET…`),
//! started after the helper has applied its layers, so it is confined like the program:
//! same Landlock domain, same seccomp filter, same limits. It says `ready` on its stdout
//! once every port listens, then serves until the sandbox ends.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, Shutdown, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

/// The helper's first argument that makes it the forwarder.
pub(crate) const FORWARDER_FLAG: &str = "--forwarder";

/// What the forwarder prints once every port listens.
pub(crate) const READY: &str = "ready";

/// One forwarded port: `127.0.0.1:port` inside relays to the Unix socket at `socket`
/// (as the sandbox sees it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forward {
    /// The TCP port on `127.0.0.1` inside the sandbox.
    pub port: u16,
    /// The Unix socket it relays to.
    pub socket: PathBuf,
}

impl Forward {
    /// Parses `PORT=SOCKET`.
    ///
    /// # Errors
    ///
    /// A message when the text is not `PORT=SOCKET`, the port is not a number from 1 to 65535,
    /// or the socket path is empty.
    pub fn parse(text: &str) -> Result<Forward, String> {
        let (port, socket) = text
            .split_once('=')
            .ok_or_else(|| format!("`{text}`: expected PORT=SOCKET"))?;
        let port: u16 = port
            .parse()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| format!("`{text}`: `{port}` is not a port number"))?;
        if socket.is_empty() {
            return Err(format!("`{text}`: no socket path"));
        }
        Ok(Forward {
            port,
            socket: PathBuf::from(socket),
        })
    }

    /// `PORT=SOCKET`, as [`Forward::parse`] reads it.
    pub fn to_arg(&self) -> String {
        format!("{}={}", self.port, self.socket.display())
    }
}

/// The forwarder's whole life (`args`: its `PORT=SOCKET` arguments). Returns `Ok` when
/// every listener has ended, and `Err` at once when it cannot start, after printing why on
/// the line the helper reads instead of `ready`; the helper turns that into its "cannot
/// run" status.
pub(crate) fn forwarder_main(
    args: impl IntoIterator<Item = std::ffi::OsString>,
) -> Result<(), ForwarderFailed> {
    let forwards: Result<Vec<Forward>, String> = args
        .into_iter()
        .map(|a| Forward::parse(&a.to_string_lossy()))
        .collect();
    let listeners = forwards.and_then(|forwards| {
        forwards
            .into_iter()
            .map(|f| {
                TcpListener::bind((Ipv4Addr::LOCALHOST, f.port))
                    .map(|l| (l, f.socket))
                    .map_err(|e| format!("cannot listen on 127.0.0.1:{}: {e}", f.port))
            })
            .collect::<Result<Vec<_>, String>>()
    });
    let listeners = match listeners {
        Ok(l) if !l.is_empty() => l,
        Ok(_) => {
            println!("provrun-confine: the forwarder has no port to forward");
            return Err(ForwarderFailed);
        }
        Err(e) => {
            // The helper reads this line instead of `ready` and reports it.
            println!("provrun-confine: {e}");
            return Err(ForwarderFailed);
        }
    };
    println!("{READY}");
    let _ = std::io::stdout().flush();
    let threads: Vec<_> = listeners
        .into_iter()
        .map(|(listener, socket)| std::thread::spawn(move || serve(&listener, &socket)))
        .collect();
    for t in threads {
        let _ = t.join();
    }
    Ok(())
}

/// The forwarder could not start (it has printed why).
#[derive(Debug)]
pub(crate) struct ForwarderFailed;

/// Starts the port forwarder (this executable, confined as the helper is now) in a process
/// group of its own, so that a signal sent to the program's group does not end it, and
/// waits until it says every port listens.
pub(crate) fn start(forwards: &[Forward]) -> Result<(), String> {
    use std::io::BufRead as _;
    use std::os::unix::process::CommandExt as _;
    let mut cmd = std::process::Command::new("/proc/self/exe");
    cmd.arg0(crate::command::HELPER_NAME)
        .arg(FORWARDER_FLAG)
        .args(forwards.iter().map(Forward::to_arg))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .process_group(0);
    let mut child = cmd.spawn().map_err(|e| e.to_string())?;
    let stdout = child.stdout.take().ok_or("its stdout was not opened")?;
    let mut line = String::new();
    std::io::BufReader::new(stdout)
        .read_line(&mut line)
        .map_err(|e| e.to_string())?;
    match line.trim_end() {
        READY => Ok(()),
        "" => Err(format!(
            "it ended without a word ({})",
            child
                .wait()
                .map_or_else(|e| e.to_string(), |s| s.to_string())
        )),
        other => Err(other.to_owned()),
    }
}

/// Accepts connections on `listener` for ever, each relayed to `socket` on a thread:
/// what the forwarder does for each port (public so that a benchmark can measure the
/// relay outside a sandbox).
pub fn serve(listener: &TcpListener, socket: &Path) {
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let socket = socket.to_path_buf();
        std::thread::spawn(move || relay(stream, &socket));
    }
}

/// Relays one TCP connection to a fresh connection to `socket`, both ways, passing each
/// side's end of stream on to the other. A socket that cannot be reached closes the TCP
/// connection at once.
fn relay(tcp: TcpStream, socket: &Path) {
    // Small writes (a streamed model response) go out at once.
    let _ = tcp.set_nodelay(true);
    let Ok(unix) = UnixStream::connect(socket) else {
        let _ = tcp.shutdown(Shutdown::Both);
        return;
    };
    let (Ok(tcp_reader), Ok(unix_writer)) = (tcp.try_clone(), unix.try_clone()) else {
        return;
    };
    let upstream = std::thread::spawn(move || {
        pump(tcp_reader, &unix_writer);
        let _ = unix_writer.shutdown(Shutdown::Write);
    });
    pump(unix, &tcp);
    let _ = tcp.shutdown(Shutdown::Write);
    let _ = upstream.join();
}

/// Copies `from` into `to` until `from` ends or either side fails, writing each read at
/// once (no buffering beyond one read).
fn pump(mut from: impl Read, mut to: impl Write) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    return;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    #[test]
    fn forwards_parse_and_print_back() {
        let f = Forward::parse("4180=/run/x/openai.sock").unwrap();
        assert_eq!(f.port, 4180);
        assert_eq!(f.socket, PathBuf::from("/run/x/openai.sock"));
        assert_eq!(Forward::parse(&f.to_arg()).unwrap(), f);
        for bad in ["4180", "x=/s", "0=/s", "70000=/s", "4180="] {
            assert!(Forward::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_tcp_connection_is_relayed_to_the_socket_both_ways_with_its_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let unix = UnixListener::bind(&path).unwrap();
        let tcp = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let port = tcp.local_addr().unwrap().port();
        let socket = path.clone();
        std::thread::spawn(move || serve(&tcp, &socket));
        // The service behind the socket: reads everything, answers it reversed.
        let service = std::thread::spawn(move || {
            let (mut s, _) = unix.accept().unwrap();
            let mut got = Vec::new();
            s.read_to_end(&mut got).unwrap();
            got.reverse();
            s.write_all(&got).unwrap();
        });
        let mut client = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).unwrap();
        client.write_all(b"hello, socket").unwrap();
        client.shutdown(Shutdown::Write).unwrap();
        let mut answer = Vec::new();
        client.read_to_end(&mut answer).unwrap();
        assert_eq!(answer, b"tekcos ,olleh");
        service.join().unwrap();
    }

    #[test]
    fn a_socket_nobody_listens_on_closes_the_connection() {
        let dir = tempfile::tempdir().unwrap();
        let tcp = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let port = tcp.local_addr().unwrap().port();
        let socket = dir.path().join("absent.sock");
        std::thread::spawn(move || serve(&tcp, &socket));
        let mut client = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).unwrap();
        let mut answer = Vec::new();
        let _ = client.read_to_end(&mut answer);
        assert!(answer.is_empty());
    }
}

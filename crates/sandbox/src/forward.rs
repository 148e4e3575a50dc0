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
//!
//! It is one thread, whatever the program does: every connection is relayed by one loop
//! over `poll(2)` with non-blocking sockets, at most [`MAX_CONNECTIONS`] at once (two
//! descriptors each, well within the sandbox's 1 024). A connection beyond the bound waits
//! in the kernel's queue until one ends; one the proxy does not take is closed. Nothing a
//! program does (a thousand connections, half-closed ones, ones that never read) spawns a
//! thread, fails an allocation it could not survive, or ends the forwarder.

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
/// it stops serving (it does not, but for a listener it cannot make non-blocking), and `Err` at once when it cannot start, after printing why on
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
    relay_all(listeners);
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

/// Connections relayed at once, over every port; more wait in the kernel's queue.
pub const MAX_CONNECTIONS: usize = 256;

/// Accepts connections on `listener` for ever, each relayed to `socket`: what the
/// forwarder does for each port (public so that a benchmark can measure the relay outside
/// a sandbox). See the module docs for the bound.
pub fn serve(listener: &TcpListener, socket: &Path) {
    match listener.try_clone() {
        Ok(l) => relay_all(vec![(l, socket.to_path_buf())]),
        Err(e) => eprintln!("provrun-confine: the forwarder cannot serve a port: {e}"),
    }
}

/// Bytes in flight one way: read from one side, not yet written to the other.
struct Pipe {
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// The source side ended.
    eof: bool,
    /// The end was passed on (`shutdown(Write)` of the other side).
    shut: bool,
}

impl Pipe {
    fn new() -> Self {
        Pipe {
            buf: vec![0; 16 * 1024],
            start: 0,
            end: 0,
            eof: false,
            shut: false,
        }
    }

    fn pending(&self) -> bool {
        self.start < self.end
    }

    /// Moves what it can from `from` to `to` without blocking; `Err` when either side
    /// failed. Returns whether anything moved.
    fn step(
        &mut self,
        mut from: impl Read,
        mut to: impl Write,
        shut: impl FnOnce(),
    ) -> std::io::Result<bool> {
        let mut moved = false;
        if !self.eof && !self.pending() {
            match from.read(&mut self.buf) {
                Ok(0) => self.eof = true,
                Ok(n) => {
                    (self.start, self.end) = (0, n);
                    moved = true;
                }
                Err(e) if would_block(&e) => {}
                Err(e) => return Err(e),
            }
        }
        while self.pending() {
            match to.write(&self.buf[self.start..self.end]) {
                Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.start += n;
                    moved = true;
                }
                Err(e) if would_block(&e) => break,
                Err(e) => return Err(e),
            }
        }
        if self.eof && !self.pending() && !self.shut {
            shut();
            self.shut = true;
            moved = true;
        }
        Ok(moved)
    }
}

fn would_block(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
    )
}

/// One relayed connection.
struct Conn {
    tcp: TcpStream,
    unix: UnixStream,
    /// From the program to the socket.
    up: Pipe,
    /// From the socket to the program.
    down: Pipe,
}

impl Conn {
    /// Relays what can be relayed now; whether the connection is over (both ends passed
    /// on, or a side failed).
    fn pump(&mut self) -> bool {
        loop {
            let up = self.up.step(&self.tcp, &self.unix, || {
                let _ = self.unix.shutdown(Shutdown::Write);
            });
            let down = self.down.step(&self.unix, &self.tcp, || {
                let _ = self.tcp.shutdown(Shutdown::Write);
            });
            match (up, down) {
                (Ok(a), Ok(b)) if a || b => {}
                (Ok(_), Ok(_)) => return self.up.shut && self.down.shut,
                _ => return true,
            }
        }
    }
}

/// The forwarder's loop: accepts on every listener (while fewer than [`MAX_CONNECTIONS`]
/// are relayed) and relays every connection, on this one thread.
fn relay_all(listeners: Vec<(TcpListener, PathBuf)>) {
    use rustix::event::{PollFd, PollFlags};
    use std::os::fd::AsFd as _;
    for (l, _) in &listeners {
        if let Err(e) = l.set_nonblocking(true) {
            eprintln!("provrun-confine: the forwarder cannot serve a port: {e}");
            return;
        }
    }
    let mut conns: Vec<Conn> = Vec::new();
    loop {
        let accepting = conns.len() < MAX_CONNECTIONS;
        // Only what each side waits for: a descriptor with nothing to wait for is left
        // out (a hung-up socket would otherwise wake the loop for ever).
        let mut fds: Vec<PollFd<'_>> = Vec::with_capacity(listeners.len() + 2 * conns.len());
        let mut owners: Vec<Option<usize>> = Vec::with_capacity(fds.capacity());
        if accepting {
            for (l, _) in &listeners {
                fds.push(PollFd::new(l, PollFlags::IN));
                owners.push(None);
            }
        }
        for (i, c) in conns.iter().enumerate() {
            let wants = |read: bool, write: bool| {
                let mut f = PollFlags::empty();
                if read {
                    f |= PollFlags::IN;
                }
                if write {
                    f |= PollFlags::OUT;
                }
                f
            };
            let tcp = wants(!c.up.eof && !c.up.pending(), c.down.pending());
            let unix = wants(!c.down.eof && !c.down.pending(), c.up.pending());
            for (fd, flags) in [(c.tcp.as_fd(), tcp), (c.unix.as_fd(), unix)] {
                if !flags.is_empty() {
                    fds.push(PollFd::from_borrowed_fd(fd, flags));
                    owners.push(Some(i));
                }
            }
        }
        match rustix::event::poll(&mut fds, None) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(_) => {
                // Out of memory for the poll set, say: wait, and try again.
                drop(fds);
                std::thread::sleep(std::time::Duration::from_millis(50));
                continue;
            }
        }
        let mut woke = vec![false; conns.len()];
        let mut accept_now = false;
        for (f, owner) in fds.iter().zip(&owners) {
            if f.revents().is_empty() {
                continue;
            }
            match owner {
                Some(i) => woke[*i] = true,
                None => accept_now = true,
            }
        }
        drop(fds);
        // Relay first, so that ended connections make room for new ones.
        let mut k = 0;
        conns.retain_mut(|c| {
            let over = woke[k] && c.pump();
            k += 1;
            !over
        });
        if !accept_now {
            continue;
        }
        for (listener, socket) in &listeners {
            while conns.len() < MAX_CONNECTIONS {
                let tcp = match listener.accept() {
                    Ok((tcp, _)) => tcp,
                    Err(e) if would_block(&e) => break,
                    // Out of descriptors, say: the connection waits in the queue.
                    Err(_) => break,
                };
                if let Some(mut c) = connect(tcp, socket)
                    && !c.pump()
                {
                    conns.push(c);
                }
            }
        }
    }
}

/// A connection to `socket` for the accepted `tcp`, both non-blocking; `None` (and `tcp`
/// closed) when the socket does not take it.
fn connect(tcp: TcpStream, socket: &Path) -> Option<Conn> {
    // Small writes (a streamed model response) go out at once.
    let _ = tcp.set_nodelay(true);
    let Ok(unix) = UnixStream::connect(socket) else {
        let _ = tcp.shutdown(Shutdown::Both);
        return None;
    };
    if tcp.set_nonblocking(true).is_err() || unix.set_nonblocking(true).is_err() {
        let _ = tcp.shutdown(Shutdown::Both);
        return None;
    }
    Some(Conn {
        tcp,
        unix,
        up: Pipe::new(),
        down: Pipe::new(),
    })
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
    fn connections_beyond_the_bound_wait_their_turn_on_one_thread() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let unix = UnixListener::bind(&path).unwrap();
        let tcp = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let port = tcp.local_addr().unwrap().port();
        let socket = path.clone();
        std::thread::spawn(move || serve(&tcp, &socket));
        // The service: answers each connection's line with the line, then closes it.
        std::thread::spawn(move || {
            for s in unix.incoming().flatten() {
                std::thread::spawn(move || {
                    let mut line = String::new();
                    let mut r = std::io::BufReader::new(&s);
                    let _ = std::io::BufRead::read_line(&mut r, &mut line);
                    let _ = (&s).write_all(line.as_bytes());
                });
            }
        });
        let n = MAX_CONNECTIONS + 44;
        let mut clients: Vec<TcpStream> = (0..n)
            .map(|_| TcpStream::connect((Ipv4Addr::LOCALHOST, port)).unwrap())
            .collect();
        for (i, c) in clients.iter_mut().enumerate() {
            c.write_all(format!("hello {i}\n").as_bytes()).unwrap();
        }
        // Each read to its end and closed: the ones beyond the bound are relayed as
        // the first ones end.
        for (i, mut c) in clients.drain(..).enumerate() {
            let mut answer = String::new();
            c.read_to_string(&mut answer).unwrap();
            assert_eq!(answer, format!("hello {i}\n"));
        }
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

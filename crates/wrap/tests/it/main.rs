//! provrun-wrap's integration tests as one test binary: the proxy on its own (streaming,
//! secrets, records), driven over its Unix sockets as the sandbox's forwarder drives it.

mod proxy;

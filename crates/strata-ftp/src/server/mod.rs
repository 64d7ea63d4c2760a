//! The FTP server: one thread per control connection, up to a cap.
//!
//! Everything a client sends is bounded: the number of sessions (the next
//! connection is told `421` and closed), a command line's length (`500`, the
//! line skipped), a control connection's idle time (`421`, closed), and the
//! wait for a passive data connection (`425`). Only the control connection's
//! peer may open its data connections.

mod data;
mod session;

use std::io::{self, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use crate::net::{Conn, Port, Via};
use crate::transport::Transport;
use crate::vpath::Root;

/// How a server runs.
#[derive(Clone, Debug)]
pub struct Config {
    /// The folder served; `/` to clients.
    pub root: PathBuf,
    /// Control connections served at once.
    pub max_sessions: usize,
    /// The longest command line accepted, in bytes.
    pub max_line: usize,
    /// A control connection silent this long is closed.
    pub idle_timeout: Duration,
    /// The wait for a passive data connection, and for a stalled transfer.
    pub data_timeout: Duration,
    /// Refuse every command that writes (`STOR`, `APPE`, `DELE`, `MKD`, `RMD`).
    pub read_only: bool,
    /// Offer data connections over seed 001's transport (`XPSV`).
    pub transport: Option<Transport>,
}

impl Config {
    /// Serves `root` with the default bounds: 64 sessions, 1 KiB lines, five
    /// minutes idle, 30 s for data connections, writable, TCP data
    /// connections only.
    pub fn new(root: impl Into<PathBuf>) -> Config {
        Config {
            root: root.into(),
            max_sessions: 64,
            max_line: 1024,
            idle_timeout: Duration::from_secs(300),
            data_timeout: Duration::from_secs(30),
            read_only: false,
            transport: None,
        }
    }
}

macro_rules! stats {
    ($($(#[doc = $doc:literal])* $name:ident: $label:literal,)*) => {
        /// A server's counters, shared by its sessions.
        #[derive(Debug, Default)]
        pub struct Stats {
            $($(#[doc = $doc])* pub $name: AtomicU64,)*
        }

        impl Stats {
            /// Every counter by its name, in a fixed order.
            pub fn snapshot(&self) -> Vec<(&'static str, u64)> {
                vec![$(($label, self.$name.load(Ordering::Relaxed)),)*]
            }
        }
    };
}

stats! {
    /// Control connections served.
    sessions: "sessions",
    /// Control connections refused at the session cap.
    refused: "refused",
    /// Anonymous logins.
    logins: "logins",
    /// Commands answered.
    commands: "commands",
    /// Files sent whole (`RETR`).
    files_sent: "files-sent",
    /// Files received whole (`STOR`, `APPE`).
    files_received: "files-received",
    /// File bytes sent.
    bytes_sent: "bytes-sent",
    /// File bytes received.
    bytes_received: "bytes-received",
    /// Paths refused for leading out of the served folder.
    denied: "denied",
    /// Lines that were no command, or commands unknown or out of place.
    bad_commands: "bad-commands",
    /// Command lines over the length cap.
    long_lines: "long-lines",
    /// Control connections closed for idling.
    idle_timeouts: "idle-timeouts",
    /// Data connections never opened, or opened by another host (dropped).
    data_failures: "data-failures",
}

impl std::fmt::Display for Stats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self
            .snapshot()
            .into_iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        f.write_str(&parts.join(" "))
    }
}

/// What every session shares.
struct Shared {
    config: Config,
    root: Root,
    stats: Stats,
    live: AtomicUsize,
    /// Transport connections closing after their transfer (`data::Linger`).
    lingering: Arc<AtomicUsize>,
    /// Where every connection runs.
    via: Via,
}

/// A bound FTP server.
pub struct Server {
    listener: Port,
    shared: Arc<Shared>,
}

impl Server {
    /// Binds the control port on the kernel's TCP and checks the served
    /// folder.
    pub fn bind(addr: SocketAddr, config: Config) -> io::Result<Server> {
        Server::bind_via(addr, config, Via::Kernel)
    }

    /// Like [`Server::bind`], every connection of every session — control,
    /// passive TCP data, the transport's — on `via`: a Strata host listens
    /// on its own address, at `addr`'s port.
    pub fn bind_via(addr: SocketAddr, config: Config, via: Via) -> io::Result<Server> {
        let root = Root::new(&config.root)?;
        let listener = Port::bind(&via, addr)?;
        Ok(Server {
            listener,
            shared: Arc::new(Shared {
                config,
                root,
                stats: Stats::default(),
                live: AtomicUsize::new(0),
                lingering: Arc::default(),
                via,
            }),
        })
    }

    /// The control port's address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The counters.
    pub fn stats(&self) -> &Stats {
        &self.shared.stats
    }

    /// Serves until `stop` is set (checked at least every quarter second;
    /// sessions in progress carry on to their end on their own threads).
    pub fn run(&self, stop: &AtomicBool) -> io::Result<()> {
        while !stop.load(Ordering::Relaxed) {
            if let Some((stream, peer)) =
                self.listener.accept_timeout(Duration::from_millis(250))?
            {
                self.admit(stream, peer);
            }
        }
        Ok(())
    }

    fn admit(&self, mut stream: Conn, peer: SocketAddr) {
        let shared = &self.shared;
        if shared.live.fetch_add(1, Ordering::AcqRel) >= shared.config.max_sessions {
            shared.live.fetch_sub(1, Ordering::AcqRel);
            shared.stats.refused.fetch_add(1, Ordering::Relaxed);
            let _ = stream.set_timeouts(Duration::from_secs(1));
            let _ = stream.write_all(b"421 Too many sessions; try again later.\r\n");
            return;
        }
        shared.stats.sessions.fetch_add(1, Ordering::Relaxed);
        let shared = Arc::clone(shared);
        let spawned = std::thread::Builder::new()
            .name(format!("ftpd {peer}"))
            .spawn(move || {
                session::serve(&shared, stream, peer);
                shared.live.fetch_sub(1, Ordering::AcqRel);
            });
        if spawned.is_err() {
            self.shared.live.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

//! One control connection: RFC 959's commands (§4.1) with RFC 2428's `EPSV`
//! and RFC 3659's `SIZE`, `MDTM` and `REST STREAM`.

use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom, Write};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::SystemTime;

use sha2::{Digest, Sha256};

use super::Shared;
use super::data::{DataConn, Linger, Passive, Pending};
use crate::command::{self, Line, Request};
use crate::listing;
use crate::net::Conn;
use crate::vpath::{PathError, VPath};

/// Serves one control connection to its end.
pub(super) fn serve(shared: &Shared, stream: Conn, peer: SocketAddr) {
    let Ok(mut session) = Session::new(shared, stream, peer) else {
        return;
    };
    // An error here is the control connection failing: nothing to answer.
    let _ = session.run();
}

enum Flow {
    Continue,
    Quit,
}

struct Session<'a> {
    shared: &'a Shared,
    reader: BufReader<Conn>,
    out: Conn,
    peer: SocketAddr,
    local: SocketAddr,
    user_given: bool,
    logged_in: bool,
    cwd: VPath,
    binary: bool,
    rest: u64,
    pending: Option<Pending>,
    epsv_all: bool,
}

/// Commands that need no login (RFC 959 §5.4 allows these before `USER`).
const BEFORE_LOGIN: [&str; 9] = [
    "USER", "PASS", "QUIT", "NOOP", "SYST", "FEAT", "HELP", "OPTS", "AUTH",
];

impl<'a> Session<'a> {
    fn new(shared: &'a Shared, stream: Conn, peer: SocketAddr) -> io::Result<Session<'a>> {
        stream.set_timeouts(shared.config.idle_timeout)?;
        stream.set_nodelay();
        let local = stream.local_addr()?;
        Ok(Session {
            shared,
            out: stream.try_clone()?,
            reader: BufReader::with_capacity(4096, stream),
            peer,
            local,
            user_given: false,
            logged_in: false,
            cwd: VPath::root(),
            binary: false,
            rest: 0,
            pending: None,
            epsv_all: false,
        })
    }

    fn count(&self, counter: fn(&super::Stats) -> &std::sync::atomic::AtomicU64, n: u64) {
        counter(&self.shared.stats).fetch_add(n, Ordering::Relaxed);
    }

    fn reply(&mut self, code: u16, text: &str) -> io::Result<()> {
        self.out.write_all(format!("{code} {text}\r\n").as_bytes())
    }

    fn run(&mut self) -> io::Result<()> {
        self.reply(220, "Strata FTP server ready.")?;
        let mut buf = Vec::new();
        loop {
            let max = self.shared.config.max_line;
            let line = match command::read_line(&mut self.reader, max, &mut buf) {
                Ok(l) => l,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    self.count(|s| &s.idle_timeouts, 1);
                    return self.reply(421, "Idle time-out; closing the control connection.");
                }
                Err(e) => return Err(e),
            };
            match line {
                Line::Eof => return Ok(()),
                Line::TooLong => {
                    self.count(|s| &s.long_lines, 1);
                    self.reply(500, "Command line too long.")?;
                }
                Line::Text(text) => match command::parse(&text) {
                    None => {
                        self.count(|s| &s.bad_commands, 1);
                        self.reply(500, "Syntax error, command unrecognized.")?;
                    }
                    Some(req) => {
                        self.count(|s| &s.commands, 1);
                        if let Flow::Quit = self.handle(req)? {
                            return Ok(());
                        }
                    }
                },
            }
        }
    }

    fn handle(&mut self, req: Request) -> io::Result<Flow> {
        let arg = req.arg.as_str();
        if !self.logged_in && !BEFORE_LOGIN.contains(&req.verb.as_str()) {
            self.count(|s| &s.bad_commands, 1);
            self.reply(530, "Please log in with USER and PASS.")?;
            return Ok(Flow::Continue);
        }
        match req.verb.as_str() {
            "USER" => {
                self.logged_in = false;
                self.user_given = matches!(arg.to_ascii_lowercase().as_str(), "anonymous" | "ftp");
                if self.user_given {
                    self.reply(331, "Anonymous login ok; send any password.")?;
                } else {
                    self.reply(530, "Only anonymous login is served.")?;
                }
            }
            "PASS" => {
                if self.user_given {
                    self.logged_in = true;
                    self.count(|s| &s.logins, 1);
                    self.reply(230, "Logged in.")?;
                } else {
                    self.reply(503, "Log in with USER first.")?;
                }
            }
            "QUIT" => {
                self.reply(221, "Goodbye.")?;
                return Ok(Flow::Quit);
            }
            "NOOP" => self.reply(200, "OK.")?,
            "SYST" => self.reply(215, "UNIX Type: L8")?,
            "FEAT" => {
                let xpsv = if self.shared.config.transport.is_some() {
                    " XPSV\r\n"
                } else {
                    ""
                };
                let feat = format!(
                    "211-Features:\r\n EPSV\r\n PASV\r\n{xpsv} SIZE\r\n MDTM\r\n HASH SHA-256*\r\n REST STREAM\r\n UTF8\r\n211 End\r\n"
                );
                self.out.write_all(feat.as_bytes())?
            }
            "HELP" => self.reply(214, "See RFC 959; PASV/EPSV only, no active mode.")?,
            "OPTS" => {
                if arg.eq_ignore_ascii_case("UTF8 ON") {
                    self.reply(200, "UTF8 is always on.")?;
                } else {
                    self.reply(501, "Option not understood.")?;
                }
            }
            "PWD" | "XPWD" => {
                let quoted = self.cwd.display().replace('"', "\"\"");
                self.reply(257, &format!("\"{quoted}\" is the current folder."))?;
            }
            "CWD" | "XCWD" => self.change_dir(arg)?,
            "CDUP" | "XCUP" => self.change_dir("..")?,
            "TYPE" => self.set_type(arg)?,
            "MODE" => self.only(arg, "S", "Mode S (stream) only.")?,
            "STRU" => self.only(arg, "F", "Structure F (file) only.")?,
            "PASV" => self.pasv()?,
            "XPSV" => self.xpsv()?,
            "EPSV" => self.epsv(arg)?,
            "PORT" | "EPRT" => self.reply(502, "Active mode is not served; use PASV or EPSV.")?,
            "LIST" | "NLST" => self.list(arg, req.verb == "NLST")?,
            "RETR" => self.retr(arg)?,
            "STOR" => self.store(arg, false)?,
            "APPE" => self.store(arg, true)?,
            "SIZE" => self.size(arg)?,
            "MDTM" => self.mdtm(arg)?,
            "HASH" => self.hash(arg)?,
            "REST" => match arg.parse::<u64>() {
                Ok(n) => {
                    self.rest = n;
                    self.reply(350, &format!("Restarting at {n}; send RETR or STOR."))?;
                }
                Err(_) => self.reply(501, "REST needs a byte offset.")?,
            },
            "DELE" | "RMD" | "XRMD" | "MKD" | "XMKD" => self.modify(&req.verb, arg)?,
            "ABOR" => self.reply(226, "No transfer in progress.")?,
            "ALLO" => self.reply(202, "No storage to allocate.")?,
            _ => {
                self.count(|s| &s.bad_commands, 1);
                self.reply(502, "Command not implemented.")?;
            }
        }
        Ok(Flow::Continue)
    }

    /// Answers a path that cannot be used.
    fn refuse(&mut self, e: PathError) -> io::Result<()> {
        match e {
            PathError::Escape | PathError::Outside => {
                self.count(|s| &s.denied, 1);
                self.reply(550, "Permission denied: outside the served folder.")
            }
            PathError::NotFound => self.reply(550, "No such file or folder."),
            PathError::Io(e) => self.reply(550, &format!("Cannot: {e}.")),
        }
    }

    fn resolve(&self, arg: &str) -> Result<VPath, PathError> {
        self.shared.root.resolve(&self.cwd, arg)
    }

    fn only(&mut self, arg: &str, ok: &str, text: &str) -> io::Result<()> {
        if arg.eq_ignore_ascii_case(ok) {
            self.reply(200, text)
        } else {
            self.reply(504, text)
        }
    }

    fn set_type(&mut self, arg: &str) -> io::Result<()> {
        let upper = arg.to_ascii_uppercase();
        if self.pending_xport() && upper.starts_with('A') {
            return self.reply(504, "XPSV carries TYPE I only.");
        }
        match upper.as_str() {
            "I" | "L 8" => {
                self.binary = true;
                self.reply(200, "Type set to I.")
            }
            "A" | "A N" => {
                self.binary = false;
                self.reply(200, "Type set to A.")
            }
            _ => self.reply(504, "Types I and A (non-print) only."),
        }
    }

    fn change_dir(&mut self, arg: &str) -> io::Result<()> {
        let found = self
            .resolve(arg)
            .and_then(|v| Ok((self.shared.root.existing(&v)?, v)));
        match found {
            Ok((real, v)) if real.is_dir() => {
                self.cwd = v;
                let shown = self.cwd.display();
                self.reply(250, &format!("Folder changed to {shown}."))
            }
            Ok(_) => self.reply(550, "Not a folder."),
            Err(e) => self.refuse(e),
        }
    }

    fn pasv(&mut self) -> io::Result<()> {
        if self.epsv_all {
            return self.reply(501, "EPSV ALL is in effect.");
        }
        let SocketAddr::V4(local) = self.local else {
            return self.reply(501, "PASV is for IPv4; use EPSV.");
        };
        let passive = match Passive::open(&self.shared.via, self.local.ip()) {
            Ok(p) => p,
            Err(_) => return self.reply(425, "Cannot open a passive port."),
        };
        let port = passive.port()?;
        self.pending = Some(Pending::Tcp(passive));
        let [a, b, c, d] = local.ip().octets();
        let text = format!(
            "Entering Passive Mode ({a},{b},{c},{d},{},{}).",
            port >> 8,
            port & 0xff
        );
        self.reply(227, &text)
    }

    fn epsv(&mut self, arg: &str) -> io::Result<()> {
        let family = if self.local.is_ipv4() { "1" } else { "2" };
        if arg.eq_ignore_ascii_case("ALL") {
            self.epsv_all = true;
            return self.reply(200, "EPSV ALL accepted.");
        }
        if !arg.is_empty() && arg != family {
            return self.reply(
                522,
                &format!("Network protocol not supported, use ({family})."),
            );
        }
        let passive = match Passive::open(&self.shared.via, self.local.ip()) {
            Ok(p) => p,
            Err(_) => return self.reply(425, "Cannot open a passive port."),
        };
        let port = passive.port()?;
        self.pending = Some(Pending::Tcp(passive));
        self.reply(
            229,
            &format!("Entering Extended Passive Mode (|||{port}|)."),
        )
    }

    /// `XPSV`: a transport listener for the next transfer (see
    /// [`crate::transport`]).
    fn xpsv(&mut self) -> io::Result<()> {
        let Some(t) = &self.shared.config.transport else {
            self.count(|s| &s.bad_commands, 1);
            return self.reply(502, "This server does not offer the transport.");
        };
        if !self.binary {
            return self.reply(504, "XPSV carries TYPE I only.");
        }
        match Pending::xport(&self.shared.via, self.local.ip(), self.peer.ip(), t) {
            Ok((pending, port)) => {
                self.pending = Some(pending);
                let text = format!("Entering Transport Passive Mode (|||{port}|).");
                self.reply(229, &text)
            }
            Err(_) => self.reply(425, "Cannot open a transport port."),
        }
    }

    /// Whether the next transfer waits on a transport listener.
    fn pending_xport(&self) -> bool {
        matches!(self.pending, Some(Pending::Xport(..)))
    }

    /// Answers 150 with `text` and opens the data connection the last
    /// `PASV`/`EPSV`/`XPSV` prepared, with time-outs; answers 425 itself
    /// when there is none or it does not come.
    fn data(&mut self, text: &str) -> io::Result<Option<DataConn>> {
        let Some(pending) = self.pending.take() else {
            self.reply(425, "Use PASV or EPSV first.")?;
            return Ok(None);
        };
        self.reply(150, text)?;
        let mut strays = 0;
        let timeout = self.shared.config.data_timeout;
        let got = pending.accept(self.peer.ip(), timeout, &mut strays);
        self.count(|s| &s.data_failures, strays);
        match got {
            Ok(c) => Ok(Some(c)),
            Err(_) => {
                self.count(|s| &s.data_failures, 1);
                self.reply(425, "Cannot open the data connection.")?;
                Ok(None)
            }
        }
    }

    fn list(&mut self, arg: &str, names_only: bool) -> io::Result<()> {
        // Clients pass ls options ("LIST -la"); they change nothing here.
        let path = if arg.starts_with('-') {
            arg.split_once(' ').map_or("", |(_, p)| p.trim_start())
        } else {
            arg
        };
        let found = self
            .resolve(path)
            .and_then(|v| Ok((self.shared.root.existing(&v)?, v)));
        let (real, v) = match found {
            Ok(f) => f,
            Err(e) => return self.refuse(e),
        };
        let now = SystemTime::now();
        let mut text = String::new();
        let mut line = |name: &str, meta: &std::fs::Metadata| {
            text.push_str(&if names_only {
                name.to_string()
            } else {
                listing::long_line(name, meta, now)
            });
            text.push_str("\r\n");
        };
        if real.is_dir() {
            let mut entries: Vec<_> = match std::fs::read_dir(&real) {
                Ok(d) => d.filter_map(Result::ok).collect(),
                Err(e) => return self.refuse(e.into()),
            };
            entries.sort_by_key(|e| e.file_name());
            for e in entries {
                if let Ok(meta) = e.metadata() {
                    line(&e.file_name().to_string_lossy(), &meta);
                }
            }
        } else {
            let meta = std::fs::metadata(&real)?;
            line(v.name().unwrap_or("/"), &meta);
        }
        let Some(conn) = self.data("Here comes the listing.")? else {
            return Ok(());
        };
        let sent = conn.send(&mut text.as_bytes(), false);
        self.answer(sent, "Listing sent.", "listing aborted", |_, _| {})
    }

    /// The final reply of a data transfer: 226 `done` and the data
    /// connection closed in the background once `moved` (counted first)
    /// went through, 426 naming the failure and `lost` otherwise.
    fn answer(
        &mut self,
        result: io::Result<(u64, Linger)>,
        done: &str,
        lost: &str,
        moved: impl FnOnce(&mut Self, u64),
    ) -> io::Result<()> {
        match result {
            Ok((n, linger)) => {
                moved(self, n);
                self.reply(226, done)?;
                linger.close(&self.shared.lingering);
                Ok(())
            }
            Err(e) => self.reply(426, &format!("Data connection lost ({e}); {lost}.")),
        }
    }

    fn retr(&mut self, arg: &str) -> io::Result<()> {
        let offset = std::mem::take(&mut self.rest);
        let opened = self
            .resolve(arg)
            .and_then(|v| Ok(File::open(self.shared.root.existing(&v)?)?));
        let mut file = match opened {
            Ok(f) => f,
            Err(e) => return self.refuse(e),
        };
        let len = file.metadata()?.len();
        if !file.metadata()?.is_file() {
            return self.reply(550, "Not a plain file.");
        }
        if offset > len {
            return self.reply(554, "Restart offset past the end of the file.");
        }
        file.seek(SeekFrom::Start(offset))?;
        let mode = if self.binary { "BINARY" } else { "ASCII" };
        let text = format!(
            "Opening {mode} mode data connection ({} bytes).",
            len - offset
        );
        let Some(conn) = self.data(&text)? else {
            return Ok(());
        };
        let sent = conn.send(&mut file, !self.binary);
        self.answer(sent, "Transfer complete.", "transfer aborted", |s, n| {
            s.count(|s| &s.bytes_sent, n);
            s.count(|s| &s.files_sent, 1);
        })
    }

    fn store(&mut self, arg: &str, append: bool) -> io::Result<()> {
        let offset = std::mem::take(&mut self.rest);
        if self.shared.config.read_only {
            return self.reply(550, "This server is read-only.");
        }
        if self.pending.is_none() {
            // Before the file is opened: a refused upload leaves it as it was.
            return self.reply(425, "Use PASV or EPSV first.");
        }
        let opened = self
            .resolve(arg)
            .and_then(|v| self.shared.root.open_write(&v, offset, append));
        let mut file = match opened {
            Ok(f) => f,
            Err(e) => return self.refuse(e),
        };
        if !append {
            file.seek(SeekFrom::Start(offset))?;
        }
        let Some(conn) = self.data("Ready to receive.")? else {
            return Ok(());
        };
        let got = conn.receive(&mut file, !self.binary);
        self.answer(got, "Transfer complete.", "what arrived is kept", |s, n| {
            s.count(|s| &s.bytes_received, n);
            s.count(|s| &s.files_received, 1);
        })
    }

    fn size(&mut self, arg: &str) -> io::Result<()> {
        let found = self
            .resolve(arg)
            .and_then(|v| Ok(std::fs::metadata(self.shared.root.existing(&v)?)?));
        match found {
            Ok(m) if m.is_file() => self.reply(213, &m.len().to_string()),
            Ok(_) => self.reply(550, "Not a plain file."),
            Err(e) => self.refuse(e),
        }
    }

    fn mdtm(&mut self, arg: &str) -> io::Result<()> {
        let found = self
            .resolve(arg)
            .and_then(|v| Ok(std::fs::metadata(self.shared.root.existing(&v)?)?));
        match found {
            Ok(m) => self.reply(213, &listing::mdtm(&m)),
            Err(e) => self.refuse(e),
        }
    }

    /// `HASH` (draft-bryan-ftpext-hash §3): the SHA-256 of a whole file,
    /// so a client checks a transfer end to end.
    fn hash(&mut self, arg: &str) -> io::Result<()> {
        let opened = self
            .resolve(arg)
            .and_then(|v| Ok(File::open(self.shared.root.existing(&v)?)?));
        let mut file = match opened {
            Ok(f) if f.metadata()?.is_file() => f,
            Ok(_) => return self.reply(550, "Not a plain file."),
            Err(e) => return self.refuse(e),
        };
        let mut h = Sha256::new();
        let mut buf = vec![0u8; 256 * 1024];
        let mut len = 0u64;
        loop {
            match file.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    h.update(&buf[..n]);
                    len += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return self.reply(451, &format!("Cannot read: {e}.")),
            }
        }
        let hex: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
        let last = len.saturating_sub(1);
        self.reply(213, &format!("SHA-256 0-{last} {hex} {arg}"))
    }

    fn modify(&mut self, verb: &str, arg: &str) -> io::Result<()> {
        if self.shared.config.read_only {
            return self.reply(550, "This server is read-only.");
        }
        let root = &self.shared.root;
        let done = self.resolve(arg).and_then(|v| {
            match verb {
                "DELE" => std::fs::remove_file(root.entry(&v)?)?,
                "MKD" | "XMKD" => std::fs::create_dir(root.creatable(&v)?)?,
                _ => std::fs::remove_dir(root.entry(&v)?)?,
            }
            Ok(v)
        });
        match (done, verb) {
            (Ok(v), "MKD" | "XMKD") => {
                let quoted = v.display().replace('"', "\"\"");
                self.reply(257, &format!("\"{quoted}\" created."))
            }
            (Ok(_), _) => self.reply(250, "Done."),
            (Err(e), _) => self.refuse(e),
        }
    }
}

//! An FTP client: log in, get and put files, list folders, over passive data
//! connections (`EPSV`, falling back to `PASV`), or over seed 001's
//! transport (`XPSV`) with a server that offers it — from the kernel's
//! sockets or from a Strata host's own stack ([`Via`]).

use std::io::{self, BufReader, Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use strata::xport::{Stream, XportError, XportStream};
use strata::xport_stack::StackStream;

use crate::command::{self, Line};
use crate::copy::copy;
pub use crate::net::Via;
use crate::net::{Conn, v4};
use crate::transport::{self, Transport};

/// What can go wrong talking to a server.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The connection failed.
    #[error(transparent)]
    Io(#[from] io::Error),
    /// The server refused a command.
    #[error("{command}: the server answered {code} {text}")]
    Refused {
        /// The command, without its argument.
        command: String,
        /// The reply's code.
        code: u16,
        /// The reply's text.
        text: String,
    },
    /// The transport failed (`XPSV` data connections).
    #[error("transport: {0}")]
    Transport(#[from] XportError),
    /// The server's reply could not be read.
    #[error("malformed reply from the server: {0}")]
    Malformed(String),
}

/// A server's reply: its code and its text (lines joined by `\n`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The three-digit code.
    pub code: u16,
    /// The text after the code.
    pub text: String,
}

/// The longest reply line read, and the most lines in one reply: a hostile
/// server cannot make the client hold more.
const MAX_LINE: usize = 8192;
const MAX_LINES: usize = 10_000;

/// A logged-in control connection.
pub struct Client {
    reader: BufReader<Conn>,
    out: Conn,
    peer: SocketAddr,
    features: Vec<String>,
    timeout: Duration,
    transport: Option<Transport>,
    via: Via,
}

impl Client {
    /// Connects to `addr` and reads the greeting; every later wait on the
    /// server is bounded by `timeout`.
    pub fn connect(addr: SocketAddr, timeout: Duration) -> Result<Client, Error> {
        Client::connect_via(addr, timeout, Via::Kernel)
    }

    /// Like [`Client::connect`], every connection of the session leaving
    /// from `via`.
    pub fn connect_via(addr: SocketAddr, timeout: Duration, via: Via) -> Result<Client, Error> {
        let stream = Conn::connect(&via, addr, timeout)?;
        let mut c = Client {
            out: stream.try_clone()?,
            reader: BufReader::new(stream),
            peer: addr,
            features: Vec::new(),
            timeout,
            transport: None,
            via,
        };
        c.expect("connect", 2)?;
        Ok(c)
    }

    /// Logs in as `user` (the password only if asked), reads the server's
    /// features and switches to binary transfers.
    ///
    /// The password (when asked), `FEAT` and `TYPE I` go in one write and
    /// their replies are read in order (RFC 959 §5.4's replies come one per
    /// command, in order): one round trip instead of three. A refused
    /// password is reported as such, whatever follows it.
    pub fn login(&mut self, user: &str, pass: &str) -> Result<(), Error> {
        let r = self.command(&format!("USER {user}"))?;
        let mut lines = vec![format!("PASS {pass}"), "FEAT".into(), "TYPE I".into()];
        match r.code {
            230 => {
                lines.remove(0);
            }
            331 | 332 => {}
            _ => return check("USER", r, 2).map(drop),
        }
        let mut replies = self.pipeline(&lines)?.into_iter();
        if lines.len() == 3 {
            let pass = replies
                .next()
                .ok_or_else(|| Error::Malformed("no reply".into()))?;
            check("PASS", pass, 2)?;
        }
        let (Some(feat), Some(ty)) = (replies.next(), replies.next()) else {
            return Err(Error::Malformed("no reply".into()));
        };
        if feat.code == 211 {
            self.features = feat
                .text
                .lines()
                .skip(1)
                .map(|l| l.trim().to_ascii_uppercase())
                .filter(|l| !l.is_empty() && l != "END")
                .collect();
        }
        check("TYPE", ty, 2)?;
        Ok(())
    }

    /// Sends `lines` in one write and reads their replies, in order.
    fn pipeline(&mut self, lines: &[String]) -> Result<Vec<Reply>, Error> {
        if lines.iter().any(|l| l.contains(['\r', '\n'])) {
            return Err(Error::Malformed("a command may not hold a line end".into()));
        }
        let text: String = lines.iter().map(|l| format!("{l}\r\n")).collect();
        self.out.write_all(text.as_bytes())?;
        lines.iter().map(|_| self.read_reply()).collect()
    }

    /// Whether the server listed `feature` in its `FEAT` reply.
    pub fn has_feature(&self, feature: &str) -> bool {
        let f = feature.to_ascii_uppercase();
        self.features
            .iter()
            .any(|l| l.split_whitespace().next() == Some(&f))
    }

    /// Sends a command line and reads its reply, whatever the code.
    pub fn command(&mut self, line: &str) -> Result<Reply, Error> {
        if line.contains(['\r', '\n']) {
            return Err(Error::Malformed("a command may not hold a line end".into()));
        }
        self.out.write_all(format!("{line}\r\n").as_bytes())?;
        self.read_reply()
    }

    fn read_reply(&mut self) -> Result<Reply, Error> {
        let mut buf = Vec::new();
        let mut read = |buf: &mut Vec<u8>| -> Result<String, Error> {
            match command::read_line(&mut self.reader, MAX_LINE, buf)? {
                Line::Text(t) => Ok(String::from_utf8_lossy(&t).into_owned()),
                Line::TooLong => Err(Error::Malformed("reply line too long".into())),
                Line::Eof => Err(Error::Io(io::ErrorKind::UnexpectedEof.into())),
            }
        };
        let first = read(&mut buf)?;
        let code: u16 = first
            .get(..3)
            .and_then(|c| c.parse().ok())
            .filter(|c| (100..600).contains(c))
            .ok_or_else(|| Error::Malformed(first.clone()))?;
        let mut text = first.get(4..).unwrap_or("").to_string();
        if first.as_bytes().get(3) == Some(&b'-') {
            // Multi-line: up to a line starting with the code and a space.
            let end = format!("{code} ");
            for _ in 0..MAX_LINES {
                let l = read(&mut buf)?;
                text.push('\n');
                if let Some(last) = l.strip_prefix(&end) {
                    text.push_str(last);
                    return Ok(Reply { code, text });
                }
                text.push_str(&l);
            }
            return Err(Error::Malformed("reply too long".into()));
        }
        Ok(Reply { code, text })
    }

    fn expect(&mut self, what: &str, class: u16) -> Result<Reply, Error> {
        let r = self.read_reply()?;
        check(what, r, class)
    }

    /// A file's size (`SIZE`).
    pub fn size(&mut self, path: &str) -> Result<u64, Error> {
        let r = self.command(&format!("SIZE {path}"))?;
        parse_size(r)
    }

    /// The SHA-256 of a remote file, in lowercase hex, when the server
    /// offers `HASH` with SHA-256 (draft-bryan-ftpext-hash); `None` if not.
    pub fn sha256(&mut self, path: &str) -> Result<Option<String>, Error> {
        if !self
            .features
            .iter()
            .any(|f| f.starts_with("HASH") && f.contains("SHA-256"))
        {
            return Ok(None);
        }
        let r = self.command(&format!("HASH {path}"))?;
        let r = check("HASH", r, 2)?;
        // "SHA-256 0-49 169cd2… name"
        let mut words = r.text.split_whitespace();
        match (words.next(), words.next(), words.next()) {
            (Some(alg), Some(_range), Some(hex))
                if alg.eq_ignore_ascii_case("SHA-256")
                    && hex.len() == 64
                    && hex.bytes().all(|b| b.is_ascii_hexdigit()) =>
            {
                Ok(Some(hex.to_ascii_lowercase()))
            }
            _ => Err(Error::Malformed(r.text.clone())),
        }
    }

    /// Changes the current folder.
    pub fn cwd(&mut self, path: &str) -> Result<(), Error> {
        let r = self.command(&format!("CWD {path}"))?;
        check("CWD", r, 2).map(drop)
    }

    /// A passive data connection: `EPSV`, or `PASV` when the server does not
    /// know it. The port is joined at the control connection's address,
    /// whatever address `PASV` names (as ftplib does: a server cannot point
    /// the client at a third host).
    fn passive(&mut self, r: Reply) -> Result<Conn, Error> {
        let port = if r.code == 229 {
            epsv_port(&r.text).ok_or_else(|| Error::Malformed(r.text.clone()))?
        } else {
            let r = self.command("PASV")?;
            let r = check("PASV", r, 2)?;
            pasv_port(&r.text).ok_or_else(|| Error::Malformed(r.text.clone()))?
        };
        let at = SocketAddr::new(self.peer.ip(), port);
        Ok(Conn::connect(&self.via, at, self.timeout)?)
    }

    /// The server's control address.
    pub fn peer_ip(&self) -> IpAddr {
        self.peer.ip()
    }

    /// Moves data over the transport from now on when the server offers
    /// `XPSV` (its `FEAT` lists it); returns whether it does. Otherwise
    /// transfers stay on passive TCP.
    pub fn use_transport(&mut self, t: Transport) -> bool {
        if self.has_feature("XPSV") {
            self.transport = Some(t);
            true
        } else {
            false
        }
    }

    /// What carries file data: "xport" (seed 001's transport) or "tcp".
    pub fn data_path(&self) -> &'static str {
        if self.transport.is_some() {
            "xport"
        } else {
            "tcp"
        }
    }

    /// Prepares the next transfer's data connection: `XPSV` and the start
    /// of the transport's set-up when the transport is in use (it completes
    /// during the transfer command, see [`crate::transport`]), else a
    /// passive TCP connection. With `size_of`, that file's `SIZE` goes in
    /// the same write (one round trip for both) and is returned when the
    /// server knows it.
    fn prepare(&mut self, size_of: Option<&str>) -> Result<(Prepared, Option<u64>), Error> {
        let passive = if self.transport.is_some() {
            "XPSV"
        } else {
            "EPSV"
        };
        let mut lines = vec![passive.to_string()];
        if let Some(path) = size_of {
            lines.insert(0, format!("SIZE {path}"));
        }
        let mut replies = self.pipeline(&lines)?.into_iter();
        let size = match size_of {
            Some(_) => replies.next().and_then(|r| parse_size(r).ok()),
            None => None,
        };
        let r = replies
            .next()
            .ok_or_else(|| Error::Malformed("no reply".into()))?;
        let Some(t) = &self.transport else {
            return Ok((Prepared::Tcp(self.passive(r)?), size));
        };
        let t = t.clone();
        let r = check("XPSV", r, 2)?;
        let port = epsv_port(&r.text).ok_or_else(|| Error::Malformed(r.text.clone()))?;
        let addr = SocketAddr::new(self.peer.ip(), port);
        let prepared = match &self.via {
            Via::Kernel => Prepared::Kernel(Box::new(XportStream::begin(addr, &t.options)?), t),
            Via::Host(h) => Prepared::Host(StackStream::begin(h, v4(addr)?)?, t),
        };
        Ok((prepared, size))
    }

    /// One transfer: the data connection (with `SIZE` of `sized`, told to
    /// `on_size` before any data moves), `REST` when `offset` is not 0, the
    /// command, the data one way or the other, the final reply.
    fn transfer(
        &mut self,
        (verb, line): (&str, &str),
        offset: u64,
        flow: Flow<'_>,
        sized: Option<Sized<'_, '_>>,
        progress: &mut dyn FnMut(u64),
    ) -> Result<u64, Error> {
        let (prepared, size) = self.prepare(sized.as_ref().map(|s| s.0))?;
        if let Some((_, on_size)) = sized {
            on_size(size);
        }
        self.restart(offset)?;
        let r = self.command(line)?;
        check(verb, r, 1)?;
        match prepared {
            Prepared::Tcp(mut s) => {
                let total = match flow {
                    Flow::Down(mut to) => copy(&mut s, &mut to, progress)?,
                    Flow::Up(mut from) => {
                        let n = copy(&mut from, &mut s, progress)?;
                        s.shutdown_write()?;
                        n
                    }
                };
                self.expect(verb, 2)?;
                Ok(total)
            }
            Prepared::Kernel(s, t) => self.over(verb, *s, flow, &t, progress),
            Prepared::Host(s, t) => self.over(verb, s, flow, &t, progress),
        }
    }

    /// Moves a transfer's data over the transport's stream `s` and reads
    /// the final reply, keeping the stream running until the reply is
    /// there: the server replies once its side is through (for `RETR`, all
    /// of the file acknowledged and our stream's end received; for `STOR`,
    /// all of it received), and may still need an acknowledgement of ours
    /// for its stream's end. The stream is dropped after the reply, without
    /// the linger of a full close: the reply says the server needs nothing
    /// more.
    fn over<S: Linger>(
        &mut self,
        verb: &str,
        mut s: S,
        flow: Flow<'_>,
        t: &Transport,
        progress: &mut dyn FnMut(u64),
    ) -> Result<u64, Error> {
        s.wait_connected()?;
        let n = match flow {
            Flow::Down(mut to) => {
                let n = transport::receive(&mut s, &mut to, t, progress)?;
                // Our (empty) stream ends too: the server waits for it.
                s.finish()?;
                n
            }
            Flow::Up(mut from) => transport::send(&mut s, &mut from, t, progress)?,
        };
        s.until_readable(&self.reader, self.timeout);
        self.expect(verb, 2)?;
        Ok(n)
    }

    /// Gets `remote` from byte `offset` on into `to`, telling `progress` the
    /// bytes received so far. Returns the bytes received.
    pub fn get(
        &mut self,
        remote: &str,
        offset: u64,
        to: &mut impl Write,
        progress: &mut dyn FnMut(u64),
    ) -> Result<u64, Error> {
        self.get_sized(remote, offset, to, &mut |_| {}, progress)
    }

    /// [`Client::get`], also asking the file's size (`SIZE`) in the same
    /// round trip as the data connection: `on_size` is told it (`None` when
    /// the server does not know it) before any data moves.
    pub fn get_sized(
        &mut self,
        remote: &str,
        offset: u64,
        to: &mut impl Write,
        on_size: &mut dyn FnMut(Option<u64>),
        progress: &mut dyn FnMut(u64),
    ) -> Result<u64, Error> {
        let line = format!("RETR {remote}");
        let sized = Some((remote, on_size));
        self.transfer(("RETR", &line), offset, Flow::Down(to), sized, progress)
    }

    /// Puts everything `from` holds as `remote`, from byte `offset` of the
    /// remote file on (the caller has `from` at the matching place).
    pub fn put(
        &mut self,
        from: &mut impl Read,
        remote: &str,
        offset: u64,
        progress: &mut dyn FnMut(u64),
    ) -> Result<u64, Error> {
        let line = format!("STOR {remote}");
        self.transfer(("STOR", &line), offset, Flow::Up(from), None, progress)
    }

    fn restart(&mut self, offset: u64) -> Result<(), Error> {
        if offset > 0 {
            let r = self.command(&format!("REST {offset}"))?;
            check("REST", r, 3)?;
        }
        Ok(())
    }

    /// The `LIST` of `path` (empty: the current folder).
    pub fn list(&mut self, path: &str) -> Result<String, Error> {
        let line = if path.is_empty() {
            "LIST".to_string()
        } else {
            format!("LIST {path}")
        };
        let mut text = Vec::new();
        let flow = Flow::Down(&mut text);
        self.transfer(("LIST", &line), 0, flow, None, &mut |_| {})?;
        Ok(String::from_utf8_lossy(&text).into_owned())
    }

    /// Says goodbye.
    pub fn quit(mut self) -> Result<(), Error> {
        let r = self.command("QUIT")?;
        check("QUIT", r, 2).map(drop)
    }
}

/// A transport stream kept running while the client waits for a reply on
/// the control connection.
trait Linger: Stream {
    /// Waits until the set-up started before the transfer command completes.
    fn wait_connected(&mut self) -> Result<(), XportError>;
    /// Keeps the stream running until `control` has a reply to read (or
    /// `timeout` passes, or the stream fails: the reply says what that means).
    fn until_readable(&mut self, control: &BufReader<Conn>, timeout: Duration);
}

impl Linger for XportStream {
    fn wait_connected(&mut self) -> Result<(), XportError> {
        XportStream::wait_connected(self)
    }

    /// The stream runs on this thread: it waits on the control socket
    /// beside its own (§3.6's `select` replacement).
    fn until_readable(&mut self, control: &BufReader<Conn>, timeout: Duration) {
        let Conn::Kernel(tcp) = control.get_ref() else {
            return;
        };
        let fd = std::os::fd::AsRawFd::as_raw_fd(tcp);
        let end = std::time::Instant::now() + timeout;
        while control.buffer().is_empty() {
            let left = end.saturating_duration_since(std::time::Instant::now());
            match self.wait(&[fd], Some(left)) {
                Ok(ready) if ready[0] || left.is_zero() => return,
                Ok(_) => {}
                Err(_) => return,
            }
        }
    }
}

impl Linger for StackStream {
    fn wait_connected(&mut self) -> Result<(), XportError> {
        StackStream::wait_connected(self)
    }

    /// The host runs the stream on its own: nothing to do here.
    fn until_readable(&mut self, _: &BufReader<Conn>, _: Duration) {}
}

/// A data connection made ready before its transfer command.
enum Prepared {
    Tcp(Conn),
    /// The transport's set-up, under way from the kernel's sockets.
    Kernel(Box<XportStream>, Transport),
    /// The transport's set-up, under way from a Strata host.
    Host(StackStream, Transport),
}

/// Which way a transfer's data goes.
enum Flow<'a> {
    Down(&'a mut dyn Write),
    Up(&'a mut dyn Read),
}

/// `r` if its code is of `class` (1 for 1xx …), else the refusal.
/// A file whose `SIZE` a transfer asks, and who is told it.
type Sized<'a, 'b> = (&'a str, &'b mut dyn FnMut(Option<u64>));

/// A `SIZE` reply's byte count (RFC 3659 §4).
fn parse_size(r: Reply) -> Result<u64, Error> {
    let r = check("SIZE", r, 2)?;
    r.text
        .trim()
        .parse()
        .map_err(|_| Error::Malformed(r.text.clone()))
}

fn check(command: &str, r: Reply, class: u16) -> Result<Reply, Error> {
    if r.code / 100 == class {
        Ok(r)
    } else {
        Err(Error::Refused {
            command: command.to_string(),
            code: r.code,
            text: r.text,
        })
    }
}

/// The port of `229 Entering Extended Passive Mode (|||port|)` (RFC 2428 §3).
fn epsv_port(text: &str) -> Option<u16> {
    let inner = text.split_once('(')?.1.split_once(')')?.0;
    let d = inner.chars().next()?;
    let fields: Vec<&str> = inner.split(d).collect();
    match fields.as_slice() {
        ["", "", "", port, ""] => port.parse().ok(),
        _ => None,
    }
}

/// The port of `227 Entering Passive Mode (h1,h2,h3,h4,p1,p2)`.
fn pasv_port(text: &str) -> Option<u16> {
    let start = text.find(|c: char| c.is_ascii_digit())?;
    let nums: Vec<u16> = text[start..]
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .take(6)
        .map(|s| s.parse().ok().filter(|&n| n < 256))
        .collect::<Option<_>>()?;
    match nums.as_slice() {
        [_, _, _, _, p1, p2] => Some(p1 << 8 | p2),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passive_replies_name_their_ports() {
        assert_eq!(
            epsv_port("Entering Extended Passive Mode (|||40001|)."),
            Some(40001)
        );
        assert_eq!(epsv_port("Entering (!!!21!)"), Some(21));
        assert_eq!(epsv_port("Entering (|||x|)"), None);
        assert_eq!(epsv_port("no parens"), None);
        assert_eq!(
            pasv_port("Entering Passive Mode (127,0,0,1,156,65)."),
            Some(156 * 256 + 65)
        );
        assert_eq!(pasv_port("Entering Passive Mode (127,0,0,1,300,1)"), None);
        assert_eq!(pasv_port("Entering Passive Mode (1,2,3)"), None);
    }
}

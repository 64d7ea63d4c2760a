//! A minimal static HTTP/1.1 server: GET and HEAD of the files under one
//! folder, enough for curl and wget.
//!
//! - One request per connection: every response says `Connection: close`.
//!   No keep-alive means no idle connections to keep and no pipelining to
//!   order. Once the response went to TCP the server shuts its direction
//!   and lingers, dropping what the client still sends, until the client
//!   closes or [`LINGER`] passes; closing at once would answer a client
//!   still sending (a long head, a body) with a reset that could destroy the
//!   response before it is read (RFC 9112 §9.6).
//! - Responses carry `Content-Length` and a `Content-Type` guessed from the
//!   extension; a folder serves its `index.html`. Errors: 400 (a request this
//!   server cannot read, or a `..` in the path), 404 (no such file, or one
//!   outside the folder through a symbolic link), 403, 405 (methods other
//!   than GET and HEAD), 431 (a head over 8 KB), 500.
//! - Files are streamed: a chunk is read whenever TCP has send room (asked
//!   with `tcp::SendSpace`; `Writable` says when it comes back), so a large
//!   file is never read whole into memory and a slow client holds back only
//!   the reads. The reads happen on the engine's thread — fine for files in
//!   the page cache, which is what a test server serves.

mod request;

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::path::PathBuf;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use strata_core::{
    Addr, App, AppCx, AppEvent, AppId, Control, Engine, Message, PacketMeta, Participants, ProtoId,
    Qos, Reply, SessionId, SessionRef, UpiError,
};
use strata_proto::tcp;

use super::{any_app, tcp_of};
use request::{MAX_HEAD, Request, content_type, head_end, parse, resolve};

/// The most read from a file for one write.
const CHUNK: usize = 64 * 1024;

/// How long a connection whose response went out waits for the client to
/// close before it is closed anyway (nginx's `lingering_timeout`).
pub const LINGER: Duration = Duration::from_secs(5);

/// What the server did, for reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HttpStats {
    /// Connections accepted.
    pub connections: u64,
    /// Responses with status 200.
    pub ok: u64,
    /// Responses with an error status.
    pub errors: u64,
    /// File bytes handed to TCP.
    pub body_bytes: u64,
    /// Responses cut short (the file shrank, the client went away).
    pub aborted: u64,
}

/// A connection: reading its request, sending its response, or waiting
/// for the client to close.
enum Conn {
    Reading(Vec<u8>),
    Sending(Response),
    Lingering,
}

/// What is left of a response.
struct Response {
    head: Bytes,
    body: Option<(File, u64)>,
}

/// The server.
pub struct HttpServer {
    root: PathBuf,
    conns: HashMap<SessionRef, Conn>,
    /// What it did.
    pub stats: HttpStats,
}

fn op(cx: &mut AppCx, s: SessionRef, op: impl Into<Control>) -> Result<Reply, UpiError> {
    cx.control(s.proto, Some(s.sess), op.into())
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        _ => "Internal Server Error",
    }
}

fn head(status: u16, len: u64, ctype: &str, extra: &str) -> Bytes {
    Bytes::from(format!(
        "HTTP/1.1 {status} {}\r\nServer: strata\r\nContent-Length: {len}\r\n\
         Content-Type: {ctype}\r\n{extra}Connection: close\r\n\r\n",
        reason(status)
    ))
}

/// An error response with a one-line text body (left out for HEAD).
fn error(status: u16, head_only: bool) -> Response {
    let text = format!("{status} {}\n", reason(status));
    let allow = if status == 405 {
        "Allow: GET, HEAD\r\n"
    } else {
        ""
    };
    let mut h = BytesMut::from(&head(status, text.len() as u64, "text/plain", allow)[..]);
    if !head_only {
        h.extend_from_slice(text.as_bytes());
    }
    Response {
        head: h.freeze(),
        body: None,
    }
}

impl HttpServer {
    /// Adds a server of the files under `root` on TCP port `port`.
    pub fn install(engine: &mut Engine, port: u16, root: PathBuf) -> Result<AppId, UpiError> {
        let root = root
            .canonicalize()
            .ok()
            .filter(|r| r.is_dir())
            .ok_or_else(|| UpiError::NoSuchObject(format!("the folder {}", root.display())))?;
        let tcp = tcp_of(engine)?;
        let id = engine.add_app(Box::new(HttpServer {
            root,
            conns: HashMap::new(),
            stats: HttpStats::default(),
        }));
        engine.with_app(id, |_, cx| {
            cx.open_enable(tcp, Participants::local([Addr::Port(port)]), Qos::default())
        })??;
        Ok(id)
    }

    /// The status of and response to a complete request head.
    fn respond(&self, head_bytes: &[u8]) -> (u16, Response) {
        let (head_only, segments) = match parse(head_bytes) {
            Request::Get { head, segments } => (head, segments),
            Request::Method => return (405, error(405, false)),
            Request::Bad(_) => return (400, error(400, false)),
        };
        let opened = resolve(&self.root, &segments)
            .and_then(|p| File::open(&p).map(|f| (p, f)))
            .and_then(|(p, f)| Ok((f.metadata()?.len(), p, f)));
        let status = match opened {
            Ok((len, path, file)) => {
                let response = Response {
                    head: head(200, len, content_type(&path), ""),
                    body: (!head_only && len > 0).then_some((file, len)),
                };
                return (200, response);
            }
            Err(e) => match e.kind() {
                std::io::ErrorKind::NotFound => 404,
                std::io::ErrorKind::PermissionDenied => 403,
                _ => 500,
            },
        };
        (status, error(status, head_only))
    }

    /// Sends what TCP has room for; closes the session when all went.
    fn pump(&mut self, s: SessionRef, cx: &mut AppCx) {
        let Some(Conn::Sending(r)) = self.conns.get_mut(&s) else {
            return;
        };
        loop {
            let room = match op(cx, s, tcp::SendSpace) {
                Ok(Reply::Size(n)) => n,
                _ => return self.abort(s, cx),
            };
            if room == 0 {
                // Marks the full buffer as wanted, so Writable follows.
                let _ = op(cx, s, tcp::Write(Message::new()));
                return;
            }
            let msg = if !r.head.is_empty() {
                r.head.split_to(room.min(r.head.len()))
            } else if let Some((file, left)) = r.body.as_mut() {
                let n = (*left).min(room.min(CHUNK) as u64) as usize;
                let mut buf = BytesMut::zeroed(n);
                if file.read_exact(&mut buf).is_err() {
                    return self.abort(s, cx);
                }
                *left -= n as u64;
                self.stats.body_bytes += n as u64;
                if *left == 0 {
                    r.body = None;
                }
                buf.freeze()
            } else {
                let _ = op(cx, s, tcp::Shutdown);
                self.conns.insert(s, Conn::Lingering);
                let at = cx.now() + LINGER;
                cx.set_timer(at, token_of(s));
                return;
            };
            let len = msg.len();
            if !matches!(op(cx, s, tcp::Write(Message::from_bytes(msg))), Ok(Reply::Size(n)) if n == len)
            {
                return self.abort(s, cx);
            }
        }
    }

    fn close(&mut self, s: SessionRef, cx: &mut AppCx) {
        self.conns.remove(&s);
        let _ = cx.close(s);
    }

    fn abort(&mut self, s: SessionRef, cx: &mut AppCx) {
        self.stats.aborted += 1;
        self.conns.remove(&s);
        let _ = op(cx, s, tcp::Abort);
    }
}

impl App for HttpServer {
    fn receive(&mut self, s: Option<SessionRef>, msg: Message, _: &PacketMeta, cx: &mut AppCx) {
        let Some(s) = s else { return };
        // Anything after the request head (a body, another request) is
        // dropped: the connection ends with this response.
        let Some(Conn::Reading(buf)) = self.conns.get_mut(&s) else {
            return;
        };
        for chunk in msg.chunks() {
            buf.extend_from_slice(chunk);
        }
        let (status, response) = match head_end(buf) {
            Some(end) => {
                let head_bytes = buf[..end].to_vec();
                self.respond(&head_bytes)
            }
            None if buf.len() > MAX_HEAD => (431, error(431, false)),
            None => return,
        };
        if status == 200 {
            self.stats.ok += 1;
        } else {
            self.stats.errors += 1;
        }
        self.conns.insert(s, Conn::Sending(response));
        self.pump(s, cx);
    }

    fn event(&mut self, event: AppEvent, cx: &mut AppCx) {
        match event {
            AppEvent::OpenDone { session, .. } => {
                self.stats.connections += 1;
                self.conns.insert(session, Conn::Reading(Vec::new()));
            }
            AppEvent::Writable(s) => self.pump(s, cx),
            AppEvent::PeerClosed(s) => {
                // A client that leaves before its request is complete gets
                // nothing; one that half-closes after it still gets its answer.
                if matches!(self.conns.get(&s), Some(Conn::Reading(_) | Conn::Lingering)) {
                    self.close(s, cx);
                }
            }
            AppEvent::Closed { session, .. } => {
                if matches!(self.conns.remove(&session), Some(Conn::Sending(_))) {
                    self.stats.aborted += 1;
                }
            }
            AppEvent::Connected(_) => {}
        }
    }

    fn timer(&mut self, token: u64, cx: &mut AppCx) {
        let s = session_of(token);
        if matches!(self.conns.get(&s), Some(Conn::Lingering)) {
            self.close(s, cx);
        }
    }

    any_app!();
}

/// A session as a timer token, and back.
fn token_of(s: SessionRef) -> u64 {
    u64::from(s.proto.0) << 32 | u64::from(s.sess.0)
}

fn session_of(token: u64) -> SessionRef {
    SessionRef::new(ProtoId((token >> 32) as u16), SessionId(token as u32))
}

//! Data connections over seed 001's transport: what the paper changed in
//! ncftp and wu-ftpd (§5.1), as the `XPSV` command.
//!
//! `XPSV` is `EPSV` for the transport: the server binds a transport listener
//! (a control socket and its data sockets) on the control connection's
//! address and answers `229 Entering Transport Passive Mode (|||port|)`
//! with its control port. The client sends the transport's first set-up
//! packet to that port and the transfer command at once; the server answers
//! the set-up (queued in its socket meanwhile) once it has sent its 1xx
//! reply, and the client completes it after reading that reply — the set-up
//! overlaps the command's round trip. The file then moves as the transport's
//! stream, in application buffers handed over without copying (§3.5.2), and
//! ends with the stream's end; the server checks the connection comes from
//! the control connection's peer, as it does for TCP.
//!
//! The final reply comes as soon as the server's side is through — for
//! `RETR` every byte acknowledged and the client's (empty) stream ended,
//! which the client does once it holds the whole file; for `STOR` every
//! byte received — not after the transport's close, whose last
//! acknowledgements and linger (3 RTOs) would cost the transfer a second at
//! long RTTs: the server closes in the background after replying, and the
//! client keeps its end running until the reply is there, then drops it.

use std::io::{self, Read, Write};

use bytes::Bytes;
use strata::xport::{Stream, XportError, XportOptions};

/// How the transport carries FTP data: its settings and the application
/// buffering of §3.5.2 (the paper's FTP used two buffers of 512,000 bytes,
/// Table 3).
#[derive(Clone, Debug)]
pub struct Transport {
    /// The transport's and its UDP sockets' settings.
    pub options: XportOptions,
    /// Application buffers handed to the transport at once (sending), or
    /// posted for its data (receiving).
    pub buffers: usize,
    /// Bytes per application buffer.
    pub buffer_size: usize,
}

impl Default for Transport {
    /// Four buffers of 1 MiB: the goal is set with four or more.
    fn default() -> Transport {
        let buffer_size = 1 << 20;
        let mut options = XportOptions::default();
        options.config.app_buffer = buffer_size as u32;
        Transport {
            options,
            buffers: 4,
            buffer_size,
        }
    }
}

/// Fills `buf` from `from` as far as it goes; fewer bytes only at the end.
fn read_full(from: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match from.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Sends everything `from` holds as the stream, keeping up to
/// `t.buffers` application buffers with the transport, then ends the stream
/// and waits until all of it is acknowledged. Buffers the transport gives
/// back are filled again (no allocation per buffer once running).
pub(crate) fn send(
    stream: &mut impl Stream,
    from: &mut impl Read,
    t: &Transport,
    progress: &mut dyn FnMut(u64),
) -> Result<u64, XportError> {
    let size = t.buffer_size.max(1);
    let mut spare: Vec<Vec<u8>> = Vec::new();
    let mut total = 0u64;
    let mut eof = false;
    while !eof {
        let mut batch = Vec::new();
        while !eof && stream.in_flight() + batch.len() < t.buffers.max(1) {
            let mut buf = spare.pop().unwrap_or_default();
            buf.resize(size, 0);
            let n = read_full(from, &mut buf)?;
            eof = n < size;
            if n == 0 {
                break;
            }
            buf.truncate(n);
            total += n as u64;
            batch.push(Bytes::from(buf));
        }
        if batch.is_empty() {
            break;
        }
        // Returns once at least one buffer is acknowledged: what is given
        // back is ours again, to refill.
        for back in stream.send(batch)? {
            if let Ok(b) = back.try_into_mut() {
                spare.push(Vec::from(b));
            }
        }
        progress(total);
    }
    stream.finish()?;
    progress(total);
    Ok(total)
}

/// Receives the stream into `to` until its end, with `t.buffers`
/// application buffers posted so data lands in them at its final place.
pub(crate) fn receive(
    stream: &mut impl Stream,
    to: &mut impl Write,
    t: &Transport,
    progress: &mut dyn FnMut(u64),
) -> Result<u64, XportError> {
    let size = t.buffer_size.max(1);
    for _ in 1..t.buffers.max(1) {
        stream.post_recv(vec![0u8; size])?;
    }
    let mut buf = vec![0u8; size];
    let mut total = 0u64;
    loop {
        let (mut got, n) = stream.recv(buf)?;
        if n == 0 {
            return Ok(total);
        }
        to.write_all(&got[..n])?;
        total += n as u64;
        progress(total);
        got.resize(size, 0);
        buf = got;
    }
}

//! One API for both ways to run the transport: [`Stream`], implemented by
//! [`XportStream`] (over the kernel's UDP) and by
//! [`StackStream`] (over Strata's own `xport/udp/ip/eth`, on any link).
//! Tools are written once against it — `strata xsend`/`xrecv`/`xperf` and
//! `strata ftp`'s data connections run over either.
//!
//! ```
//! use bytes::Bytes;
//! use strata::link::{LinkParams, SimNet};
//! use strata::xport::{Stream, XportError, XportListener, XportOptions, XportStream};
//! use strata::xport_stack::{StackListener, StackStream};
//! use strata::{HostBuilder, HostParams, Network};
//!
//! /// Sends `data` in buffers of 256 KiB, four at a time, and closes.
//! fn send_all(s: &mut impl Stream, data: &Bytes) -> Result<(), XportError> {
//!     for chunk in data.chunks(256 << 10) {
//!         while s.in_flight() >= 4 {
//!             s.send(Vec::new())?; // waits for one given back
//!         }
//!         s.send(vec![data.slice_ref(chunk)])?;
//!     }
//!     s.finish()?;
//!     Ok(())
//! }
//!
//! /// Receives the whole stream into buffers of 256 KiB; its length.
//! fn recv_all(s: &mut impl Stream) -> Result<usize, XportError> {
//!     let mut total = 0;
//!     loop {
//!         let (_, n) = s.recv(vec![0u8; 256 << 10])?;
//!         if n == 0 {
//!             return Ok(total);
//!         }
//!         total += n;
//!     }
//! }
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let data = Bytes::from(vec![7u8; 3 << 20]);
//!
//! // Over the kernel's UDP, on the loopback.
//! let mut listener = XportListener::bind("127.0.0.1:0", &XportOptions::default())?;
//! let at = listener.local_addr()?;
//! let server = std::thread::spawn(move || -> Result<usize, XportError> {
//!     let mut s = listener.accept()?;
//!     let n = recv_all(&mut s)?;
//!     s.close()?;
//!     Ok(n)
//! });
//! let mut s = XportStream::connect(at, &XportOptions::default())?;
//! send_all(&mut s, &data)?;
//! s.close()?;
//! assert_eq!(server.join().unwrap()?, 3 << 20);
//!
//! // Over Strata's own stack, two hosts on the in-memory network.
//! let host = |n| {
//!     HostBuilder::spec("xport/udp/ip/eth", HostParams::numbered(n), "net0", strata::link::SIM)
//!         .build()
//! };
//! let mut net = SimNet::new(1);
//! let (a, b) = (net.add_host("a", host(1)?), net.add_host("b", host(2)?));
//! net.connect((a, "net0"), (b, "net0"), LinkParams::default(), LinkParams::default())?;
//! let network = Network::start(net);
//! let mut listener = StackListener::bind(&network.host(b), 7100)?;
//! let server = std::thread::spawn(move || -> Result<usize, XportError> {
//!     let mut s = listener.accept()?;
//!     let n = recv_all(&mut s)?;
//!     s.close()?;
//!     Ok(n)
//! });
//! let to = std::net::SocketAddrV4::new(HostParams::numbered(2).address.address(), 7100);
//! let mut s = StackStream::connect(&network.host(a), to)?;
//! send_all(&mut s, &data)?;
//! s.close()?;
//! assert_eq!(server.join().unwrap()?, 3 << 20);
//! network.stop();
//! # Ok(())
//! # }
//! ```

use std::net::SocketAddr;

use bytes::Bytes;
use strata_xport::{Drops, PathInfo, Stats};

use super::{XportError, XportStream};
use crate::xport_stack::StackStream;

/// Where received data went: straight to its final offset in the
/// application's buffer, or through a copy of the library's first (§3.5.1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Placement {
    /// Payload bytes written to their place by the kernel (kernel UDP) or
    /// copied there once from the received frame (Strata's stack).
    pub placed: u64,
    /// Payload bytes that took one copy more: out of the driver's buffer
    /// (kernel UDP), or gathered from a datagram in pieces (Strata's stack).
    pub copied: u64,
}

/// A connection of seed 001's transport, whichever way it runs: send
/// application buffers, receive into application buffers (§3.5).
pub trait Stream {
    /// Hands `bufs` to the transport and returns, once at least one buffer
    /// is acknowledged, every buffer given back so far (§3.5.2). With no
    /// new buffers it waits for the next given back (at once when none is
    /// in flight).
    fn send(&mut self, bufs: Vec<Bytes>) -> Result<Vec<Bytes>, XportError>;
    /// Buffers handed over and not yet given back.
    fn in_flight(&self) -> usize;
    /// Ends the stream and waits until every buffer is acknowledged;
    /// returns those not yet given back.
    fn finish(&mut self) -> Result<Vec<Bytes>, XportError>;
    /// Posts a buffer for the next bytes of the peer's stream without
    /// waiting (several may be posted: multiple buffering on receive).
    fn post_recv(&mut self, buf: Vec<u8>) -> Result<(), XportError>;
    /// Posts `buf` and waits for the oldest posted buffer to come back with
    /// data: `(buffer, bytes)`; `bytes` is 0 once the peer's stream ended.
    fn recv(&mut self, buf: Vec<u8>) -> Result<(Vec<u8>, usize), XportError>;
    /// Ends this side's stream and waits until every buffer is
    /// acknowledged and the peer's stream has ended — both directions'
    /// data are through — without `close`'s wait for the last
    /// acknowledgements and its linger (for applications that learn the
    /// peer's state another way, as FTP does from its final reply).
    fn end(&mut self) -> Result<(), XportError>;
    /// Ends this side's stream and waits until both directions are
    /// complete and acknowledged: nothing sent is lost.
    fn close(self) -> Result<(), XportError>
    where
        Self: Sized;
    /// The connection's counters.
    fn stats(&mut self) -> Stats;
    /// Every datagram refused for this connection, by reason.
    fn drops(&mut self) -> Drops;
    /// RTT, windows and rate.
    fn info(&mut self) -> Result<PathInfo, XportError>;
    /// The peer's control address.
    fn peer_addr(&mut self) -> Result<SocketAddr, XportError>;
    /// The local data ports.
    fn data_ports(&mut self) -> Vec<u16>;
    /// Where received data went (the end's or the driver's counts: a
    /// listener's connections share them).
    fn placement(&mut self) -> Placement;
}

impl Stream for XportStream {
    fn send(&mut self, bufs: Vec<Bytes>) -> Result<Vec<Bytes>, XportError> {
        XportStream::send(self, bufs)
    }
    fn in_flight(&self) -> usize {
        XportStream::in_flight(self)
    }
    fn finish(&mut self) -> Result<Vec<Bytes>, XportError> {
        XportStream::finish(self)
    }
    fn post_recv(&mut self, buf: Vec<u8>) -> Result<(), XportError> {
        XportStream::post_recv(self, buf);
        Ok(())
    }
    fn recv(&mut self, buf: Vec<u8>) -> Result<(Vec<u8>, usize), XportError> {
        XportStream::recv(self, buf)
    }
    fn end(&mut self) -> Result<(), XportError> {
        XportStream::end(self)
    }
    fn close(self) -> Result<(), XportError> {
        XportStream::close(self)
    }
    fn stats(&mut self) -> Stats {
        XportStream::stats(self)
    }
    fn drops(&mut self) -> Drops {
        XportStream::drops(self)
    }
    fn info(&mut self) -> Result<PathInfo, XportError> {
        Ok(XportStream::info(self))
    }
    fn peer_addr(&mut self) -> Result<SocketAddr, XportError> {
        Ok(XportStream::peer_addr(self))
    }
    fn data_ports(&mut self) -> Vec<u16> {
        XportStream::data_ports(self)
    }
    fn placement(&mut self) -> Placement {
        let u = self.udp_stats();
        Placement {
            placed: u.placed_bytes,
            copied: u.copied_bytes,
        }
    }
}

impl Stream for StackStream {
    fn send(&mut self, bufs: Vec<Bytes>) -> Result<Vec<Bytes>, XportError> {
        StackStream::send(self, bufs)
    }
    fn in_flight(&self) -> usize {
        StackStream::in_flight(self)
    }
    fn finish(&mut self) -> Result<Vec<Bytes>, XportError> {
        StackStream::finish(self)
    }
    fn post_recv(&mut self, buf: Vec<u8>) -> Result<(), XportError> {
        StackStream::post_recv(self, buf)
    }
    fn recv(&mut self, buf: Vec<u8>) -> Result<(Vec<u8>, usize), XportError> {
        StackStream::recv(self, buf)
    }
    fn end(&mut self) -> Result<(), XportError> {
        StackStream::end(self)
    }
    fn close(self) -> Result<(), XportError> {
        StackStream::close(self)
    }
    fn stats(&mut self) -> Stats {
        StackStream::stats(self)
    }
    fn drops(&mut self) -> Drops {
        StackStream::drops(self)
    }
    fn info(&mut self) -> Result<PathInfo, XportError> {
        StackStream::info(self)
    }
    fn peer_addr(&mut self) -> Result<SocketAddr, XportError> {
        StackStream::peer_addr(self)
    }
    fn data_ports(&mut self) -> Vec<u16> {
        StackStream::data_ports(self)
    }
    fn placement(&mut self) -> Placement {
        StackStream::placement(self)
    }
}

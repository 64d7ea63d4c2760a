//! smoltcp's TCP ping-pong over the in-memory loopback device of
//! [`smoltcp_tcp`](super::smoltcp_tcp): the peer of the TCP round trips of
//! `strata bench paper004-smoltcp`.
//!
//! One interface carries a connected client and server socket, both with
//! Nagle off, as seed 000's ping-pong runs TCP. A round trip is: the client
//! writes, egress, ingress at the server, the server reads and writes the
//! bytes back, egress, ingress at the client, the client reads them — each
//! segment through TCP, IPv4 and Ethernet once out and once in, as between
//! Strata's two hosts. The clock stands still, as it does in Strata's
//! in-memory ping-pong (`rtt::MemPingPong`): no timer fires during a
//! measurement in either, so each ACK rides on the next segment.

use anyhow::{Result, bail};
use smoltcp::iface::{Interface, SocketHandle, SocketSet};
use smoltcp::socket::tcp;
use smoltcp::time::Instant;

use super::smoltcp_tcp::{ADDR, MemLoopback, egress_then_ingress, loopback, socket};

const PORT: u16 = 7;

/// A connected smoltcp client and server on one interface.
pub struct SmolTcpPingPong {
    iface: Interface,
    device: MemLoopback,
    sockets: SocketSet<'static>,
    client: SocketHandle,
    server: SocketHandle,
    buf: Vec<u8>,
}

impl SmolTcpPingPong {
    /// Both sockets with `buffer`-byte rings and congestion control `cc`,
    /// over a loopback with an `mtu`-byte MTU, connected.
    pub fn new(buffer: usize, mtu: usize, cc: tcp::CongestionControl) -> Result<SmolTcpPingPong> {
        let (iface, device) = loopback(mtu);
        let mut sockets = SocketSet::new(Vec::new());
        let mut server = socket(buffer, cc);
        server.set_nagle_enabled(false);
        server.listen(PORT)?;
        let mut client = socket(buffer, cc);
        client.set_nagle_enabled(false);
        let server = sockets.add(server);
        let client = sockets.add(client);
        let mut pp = SmolTcpPingPong {
            iface,
            device,
            sockets,
            client,
            server,
            buf: vec![0; buffer],
        };
        let cx = pp.iface.context();
        pp.sockets
            .get_mut::<tcp::Socket>(client)
            .connect(cx, (ADDR, PORT), 49152)?;
        for _ in 0..8 {
            pp.turn();
        }
        if !pp.sockets.get::<tcp::Socket>(client).may_send() {
            bail!("smoltcp's handshake did not complete");
        }
        Ok(pp)
    }

    /// Everything due goes out, everything queued comes in.
    fn turn(&mut self) {
        egress_then_ingress(
            &mut self.iface,
            &mut self.device,
            &mut self.sockets,
            Instant::ZERO,
        );
    }

    /// One round trip of `payload`; returns the bytes that came back.
    pub fn round_trip(&mut self, payload: &[u8]) -> usize {
        let client = self.sockets.get_mut::<tcp::Socket>(self.client);
        if client.send_slice(payload).unwrap_or(0) != payload.len() {
            return 0;
        }
        let mut back = 0;
        // Two turns make a round trip; a few more cover a lost race.
        for _ in 0..4 {
            self.turn();
            let server = self.sockets.get_mut::<tcp::Socket>(self.server);
            if let Ok(n) = server.recv_slice(&mut self.buf)
                && n > 0
            {
                let _ = server.send_slice(&self.buf[..n]);
            }
            let client = self.sockets.get_mut::<tcp::Socket>(self.client);
            back += client.recv_slice(&mut self.buf).unwrap_or(0);
            if back >= payload.len() {
                break;
            }
        }
        back
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_comes_back_each_round_trip() {
        let mut pp = SmolTcpPingPong::new(64 * 1024, 1500, tcp::CongestionControl::Cubic).unwrap();
        for size in [1, 100, 1400, 4000] {
            for _ in 0..3 {
                assert_eq!(pp.round_trip(&vec![0x5a; size]), size, "size {size}");
            }
        }
    }
}

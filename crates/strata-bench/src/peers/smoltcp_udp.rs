//! smoltcp's UDP over its in-memory loopback device: the peer for Strata's
//! in-memory UDP-IP-ETH ping-pong (`strata bench rtt-peers`).
//!
//! One smoltcp interface on a `Loopback` device carries a client and a server
//! socket. A round trip is client send → egress → loopback → ingress → server
//! socket → echo → egress → ingress → client socket: the same two traversals of
//! UDP, IPv4 and Ethernet each way that Strata's two hosts make. We drive
//! smoltcp with its leanest calls (`poll_egress` and `poll_ingress_single`)
//! rather than the all-purpose `poll`, so it is measured at its best. Checksums
//! are computed and verified in software on both sides.

use smoltcp::iface::{Config, Interface, SocketHandle, SocketSet};
use smoltcp::phy::{Loopback, Medium};
use smoltcp::socket::udp;
use smoltcp::time::Instant;
use smoltcp::wire::{EthernetAddress, IpAddress, IpCidr, IpEndpoint};

const ADDR: IpAddress = IpAddress::v4(198, 18, 0, 1);
const SERVER_PORT: u16 = 7;
const CLIENT_PORT: u16 = 40000;

/// A smoltcp UDP ping-pong on the loopback device.
pub struct SmolUdpPingPong {
    iface: Interface,
    device: Loopback,
    sockets: SocketSet<'static>,
    client: SocketHandle,
    server: SocketHandle,
    payload: Vec<u8>,
    buf: Vec<u8>,
}

fn socket() -> udp::Socket<'static> {
    let rx = udp::PacketBuffer::new(vec![udp::PacketMetadata::EMPTY; 16], vec![0; 65536]);
    let tx = udp::PacketBuffer::new(vec![udp::PacketMetadata::EMPTY; 16], vec![0; 65536]);
    udp::Socket::new(rx, tx)
}

impl SmolUdpPingPong {
    /// A ping-pong of `size`-byte payloads.
    pub fn new(size: usize) -> SmolUdpPingPong {
        let mut device = Loopback::new(Medium::Ethernet);
        let config = Config::new(EthernetAddress([0x02, 0, 0, 0, 0, 1]).into());
        let mut iface = Interface::new(config, &mut device, Instant::ZERO);
        iface.update_ip_addrs(|addrs| {
            addrs.push(IpCidr::new(ADDR, 24)).expect("one address fits");
        });
        let mut sockets = SocketSet::new(Vec::new());
        let mut server = socket();
        server.bind(SERVER_PORT).expect("fresh socket binds");
        let mut client = socket();
        client.bind(CLIENT_PORT).expect("fresh socket binds");
        let server = sockets.add(server);
        let client = sockets.add(client);
        SmolUdpPingPong {
            iface,
            device,
            sockets,
            client,
            server,
            payload: vec![0x5a; size],
            buf: vec![0; 65536],
        }
    }

    fn egress_then_ingress(&mut self) {
        let now = Instant::ZERO;
        self.iface
            .poll_egress(now, &mut self.device, &mut self.sockets);
        while !matches!(
            self.iface
                .poll_ingress_single(now, &mut self.device, &mut self.sockets),
            smoltcp::iface::PollIngressSingleResult::None
        ) {}
    }

    /// One round trip; returns the bytes the client got back.
    pub fn round_trip(&mut self) -> usize {
        let to_server = IpEndpoint::new(ADDR, SERVER_PORT);
        self.sockets
            .get_mut::<udp::Socket>(self.client)
            .send_slice(&self.payload, to_server)
            .expect("the send buffer is empty between round trips");
        // A few passes cover neighbour resolution on the first round trip.
        for _ in 0..4 {
            self.egress_then_ingress();
            let server = self.sockets.get_mut::<udp::Socket>(self.server);
            if let Ok((n, meta)) = server.recv_slice(&mut self.buf) {
                server
                    .send_slice(&self.buf[..n], meta.endpoint)
                    .expect("the send buffer is empty between round trips");
            }
            let client = self.sockets.get_mut::<udp::Socket>(self.client);
            if let Ok((n, _)) = client.recv_slice(&mut self.buf) {
                return n;
            }
        }
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smoltcp_echoes_every_size_we_measure() {
        for size in [1, 100, 500, 1000, 1400] {
            let mut pp = SmolUdpPingPong::new(size);
            for _ in 0..3 {
                assert_eq!(pp.round_trip(), size, "size {size}");
            }
        }
    }
}

//! [`UdpSocket`]: `std::net::UdpSocket`'s shape over a Strata host.

use std::any::Any;
use std::collections::HashMap;
use std::io;
use std::net::SocketAddrV4;
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError, sync_channel};
use std::time::Duration;
use strata_proto::info::source;

use bytes::Bytes;
use strata_core::{
    Addr, App, AppCx, AppId, Engine, Message, PacketMeta, Participants, ProtoId, Qos, SessionRef,
    UpiError,
};
use strata_link::EngineHandle;

use super::{io_error, stopped};

/// Datagrams waiting for `recv_from`; more are dropped and counted.
const QUEUE: usize = 1024;
/// Destinations a socket keeps a connected session to; the oldest is closed
/// beyond this.
const PEERS: usize = 256;

type Datagram = (Bytes, SocketAddrV4);

/// The socket's side inside the engine.
struct SocketApp {
    udp: ProtoId,
    port: u16,
    /// The bound session that receives from anyone.
    bound: Option<SessionRef>,
    rx: SyncSender<Datagram>,
    /// Connected sessions by destination, in the order they were opened.
    peers: HashMap<SocketAddrV4, SessionRef>,
    order: Vec<SocketAddrV4>,
    /// Datagrams dropped because the caller was not reading.
    overflow: u64,
}

impl App for SocketApp {
    fn receive(&mut self, _: Option<SessionRef>, msg: Message, meta: &PacketMeta, _: &mut AppCx) {
        let from = source(meta);
        match self.rx.try_send((msg.into_bytes(), from)) {
            Ok(()) | Err(TrySendError::Disconnected(_)) => {}
            Err(TrySendError::Full(_)) => self.overflow += 1,
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

impl SocketApp {
    fn session_to(&mut self, to: SocketAddrV4, cx: &mut AppCx) -> Result<SessionRef, UpiError> {
        if let Some(&s) = self.peers.get(&to) {
            return Ok(s);
        }
        if self.order.len() >= PEERS {
            let oldest = self.order.remove(0);
            if let Some(s) = self.peers.remove(&oldest) {
                cx.close(s)?;
            }
        }
        let parts = Participants::remote([Addr::Ip(*to.ip()), Addr::Port(to.port())])
            .with_local([Addr::Port(self.port)]);
        let s = cx.open(self.udp, parts, Qos::default())?;
        self.peers.insert(to, s);
        self.order.push(to);
        Ok(s)
    }
}

/// A UDP socket on a Strata host, for blocking code.
pub struct UdpSocket {
    host: EngineHandle,
    app: AppId,
    local: SocketAddrV4,
    rx: Receiver<Datagram>,
    read_timeout: Option<Duration>,
    peer: Option<SocketAddrV4>,
}

impl UdpSocket {
    /// Binds `port` (0 for an ephemeral one) on the host behind `host`.
    pub fn bind(host: &EngineHandle, port: u16) -> io::Result<UdpSocket> {
        let (tx, rx) = sync_channel(QUEUE);
        let (app, local) = host
            .call(move |engine: &mut Engine| bind_in(engine, port, tx))
            .map_err(|_| stopped())?
            .map_err(io_error)?;
        Ok(UdpSocket {
            host: host.clone(),
            app,
            local,
            rx,
            read_timeout: None,
            peer: None,
        })
    }

    /// The address and port this socket is bound to.
    pub fn local_addr(&self) -> SocketAddrV4 {
        self.local
    }

    /// Sends one datagram to `to`.
    pub fn send_to(&self, buf: &[u8], to: SocketAddrV4) -> io::Result<usize> {
        let data = Bytes::copy_from_slice(buf);
        let app = self.app;
        let len = buf.len();
        self.host
            .call(move |engine: &mut Engine| {
                engine.with_app(app, |a, cx| {
                    let me = a
                        .as_any_mut()
                        .downcast_mut::<SocketApp>()
                        .ok_or(UpiError::NoSuchSession)?;
                    let s = me.session_to(to, cx)?;
                    cx.send(s, Message::from_bytes(data));
                    Ok(())
                })?
            })
            .map_err(|_| stopped())?
            .map_err(io_error)?;
        Ok(len)
    }

    /// Receives one datagram, waiting at most the read timeout; returns its length
    /// (truncated to `buf` like `recv_from(2)`) and its sender.
    pub fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddrV4)> {
        let (data, from) = match self.read_timeout {
            None => self.rx.recv().map_err(|_| stopped())?,
            Some(t) => self.rx.recv_timeout(t).map_err(|e| match e {
                RecvTimeoutError::Timeout => {
                    io::Error::new(io::ErrorKind::WouldBlock, "read timed out")
                }
                RecvTimeoutError::Disconnected => stopped(),
            })?,
        };
        let n = data.len().min(buf.len());
        buf[..n].copy_from_slice(&data[..n]);
        Ok((n, from))
    }

    /// Sets the default destination of `send` and the only source `recv` accepts.
    pub fn connect(&mut self, to: SocketAddrV4) {
        self.peer = Some(to);
    }

    /// Sends to the connected destination.
    pub fn send(&self, buf: &[u8]) -> io::Result<usize> {
        let to = self
            .peer
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotConnected, "connect before send"))?;
        self.send_to(buf, to)
    }

    /// Receives from the connected source, discarding datagrams from others.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let (n, from) = self.recv_from(buf)?;
            if self.peer.is_none_or(|p| p == from) {
                return Ok(n);
            }
        }
    }

    /// Sets how long `recv_from` waits (`None`: forever).
    pub fn set_read_timeout(&mut self, timeout: Option<Duration>) {
        self.read_timeout = timeout;
    }

    /// Datagrams dropped because nobody was reading.
    pub fn overflow(&self) -> io::Result<u64> {
        let app = self.app;
        self.host
            .call(move |engine: &mut Engine| engine.app::<SocketApp>(app).map_or(0, |a| a.overflow))
            .map_err(|_| stopped())
    }
}

impl Drop for UdpSocket {
    fn drop(&mut self) {
        let app = self.app;
        // The host may be gone already; then there is nothing left to close.
        let _ = self.host.submit(Box::new(move |engine: &mut Engine| {
            let _ = engine.with_app(app, |a, cx| {
                if let Some(me) = a.as_any_mut().downcast_mut::<SocketApp>() {
                    for s in me.peers.values().chain(me.bound.iter()) {
                        let _ = cx.close(*s);
                    }
                }
            });
            engine.remove_app(app);
        }));
    }
}

fn bind_in(
    engine: &mut Engine,
    port: u16,
    tx: SyncSender<Datagram>,
) -> Result<(AppId, SocketAddrV4), UpiError> {
    let udp = crate::apps::proto_of_kind(engine, "udp")?;
    let app = engine.add_app(Box::new(SocketApp {
        udp,
        port,
        bound: None,
        rx: tx,
        peers: HashMap::new(),
        order: Vec::new(),
        overflow: 0,
    }));
    let opened = engine.with_app(app, |a, cx| {
        let s = cx.open(udp, Participants::local([Addr::Port(port)]), Qos::default())?;
        let reply = cx.control(s.proto, Some(s.sess), strata_core::Control::GetParticipants)?;
        let local = match reply {
            strata_core::Reply::Participants(mut p) => (p.local.pop_port(), p.local.pop_ip()),
            _ => (None, None),
        };
        if let Some(me) = a.as_any_mut().downcast_mut::<SocketApp>() {
            me.bound = Some(s);
            me.port = local.0.unwrap_or(port);
        }
        Ok::<_, UpiError>(local)
    });
    match opened {
        Ok(Ok((Some(p), Some(ip)))) => Ok((app, SocketAddrV4::new(ip, p))),
        Ok(Ok(_)) => Err(UpiError::BadParticipant(
            "udp did not say which port it bound",
        )),
        Ok(Err(e)) | Err(e) => {
            engine.remove_app(app);
            Err(e)
        }
    }
}

//! A UDP client on one connected session: sends what it is given and streams
//! every datagram that comes back, with its sender, through a bounded channel
//! (`nc -u` as an in-engine application).

use std::net::SocketAddrV4;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use strata_proto::info::source;

use bytes::Bytes;
use strata_core::{
    Addr, App, AppCx, AppEvent, AppId, Engine, Message, PacketMeta, Participants, Qos, SessionRef,
    UpiError,
};

use super::{any_app, proto_of_kind};

/// Datagrams that may wait in the channel; more are counted and dropped.
pub const CAPACITY: usize = 1024;

/// Something that happened on the session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientEvent {
    /// A datagram arrived from `from`.
    Datagram {
        /// Who sent it.
        from: SocketAddrV4,
        /// Its payload.
        data: Vec<u8>,
    },
    /// The session closed (an ICMP port or host unreachable closes it).
    Closed(Option<String>),
}

/// The client.
pub struct UdpClient {
    session: SessionRef,
    events: SyncSender<ClientEvent>,
    /// Datagrams sent.
    pub sent: u64,
    /// Datagrams received.
    pub received: u64,
    /// Events dropped because nobody read the channel.
    pub dropped: u64,
}

impl UdpClient {
    /// Adds a client talking to `dest` from local port `local_port` (0 picks
    /// one) to `engine`; what comes back arrives on the channel.
    pub fn install(
        engine: &mut Engine,
        dest: SocketAddrV4,
        local_port: u16,
    ) -> Result<(AppId, Receiver<ClientEvent>), UpiError> {
        let udp = proto_of_kind(engine, "udp")?;
        let (tx, rx) = sync_channel(CAPACITY);
        let id = engine.add_app(Box::new(UdpClient {
            session: SessionRef::new(udp, strata_core::SessionId(0)),
            events: tx,
            sent: 0,
            received: 0,
            dropped: 0,
        }));
        engine.with_app(id, |app, cx| {
            let parts = Participants::remote([Addr::Ip(*dest.ip()), Addr::Port(dest.port())])
                .with_local([Addr::Port(local_port)]);
            let session = cx.open(udp, parts, Qos::default())?;
            if let Some(me) = app.as_any_mut().downcast_mut::<UdpClient>() {
                me.session = session;
            }
            Ok::<_, UpiError>(())
        })??;
        Ok((id, rx))
    }

    /// Sends one datagram (call through `Engine::app_mut` and then run the
    /// engine, or from a job).
    pub fn send(engine: &mut Engine, id: AppId, data: Bytes) -> Result<(), UpiError> {
        engine.with_app(id, |app, cx| {
            let Some(me) = app.as_any_mut().downcast_mut::<UdpClient>() else {
                return Err(UpiError::NoSuchObject(id.to_string()));
            };
            me.sent += 1;
            cx.send(me.session, Message::from_bytes(data));
            Ok(())
        })?
    }

    fn emit(&mut self, e: ClientEvent) {
        if let Err(TrySendError::Full(_)) = self.events.try_send(e) {
            self.dropped += 1;
        }
    }
}

impl App for UdpClient {
    fn receive(
        &mut self,
        _s: Option<SessionRef>,
        msg: Message,
        meta: &PacketMeta,
        _cx: &mut AppCx,
    ) {
        self.received += 1;
        self.emit(ClientEvent::Datagram {
            from: source(meta),
            data: msg.to_vec(),
        });
    }

    fn event(&mut self, event: AppEvent, _cx: &mut AppCx) {
        if let AppEvent::Closed { session, error } = event
            && session == self.session
        {
            self.emit(ClientEvent::Closed(error.map(|e| e.to_string())));
        }
    }

    any_app!();
}

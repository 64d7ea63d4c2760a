//! The UDP discard service (RFC 863): datagrams are counted and thrown away.

use strata_core::{
    Addr, App, AppCx, AppId, Engine, Message, PacketMeta, Participants, Qos, SessionRef, UpiError,
};

use super::{any_app, proto_of_kind};

/// The discard server.
#[derive(Debug, Default)]
pub struct UdpDiscard {
    /// Datagrams received.
    pub datagrams: u64,
    /// Their payload bytes.
    pub bytes: u64,
}

impl UdpDiscard {
    /// Adds a discard server on UDP port `port` to `engine`: a bound session,
    /// which takes datagrams from anyone.
    pub fn install(engine: &mut Engine, port: u16) -> Result<AppId, UpiError> {
        let udp = proto_of_kind(engine, "udp")?;
        let id = engine.add_app(Box::new(UdpDiscard::default()));
        engine.with_app(id, |_, cx| {
            cx.open(udp, Participants::local([Addr::Port(port)]), Qos::default())
        })??;
        Ok(id)
    }
}

impl App for UdpDiscard {
    fn receive(
        &mut self,
        _session: Option<SessionRef>,
        msg: Message,
        _meta: &PacketMeta,
        _cx: &mut AppCx,
    ) {
        self.datagrams += 1;
        self.bytes += msg.len() as u64;
    }

    any_app!();
}

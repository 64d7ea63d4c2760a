//! The UDP echo service (RFC 862): every datagram goes back to its sender.
//!
//! A passive open on the port makes one connected session per peer (UDP's
//! `open_enable`); each datagram is sent back on the session it came on, the
//! same message without a copy.

use strata_core::{
    Addr, App, AppCx, AppId, Engine, Message, PacketMeta, Participants, Qos, SessionRef, UpiError,
};

use super::{any_app, proto_of_kind};

/// The echo server.
#[derive(Debug, Default)]
pub struct UdpEcho {
    /// Datagrams echoed.
    pub echoed: u64,
    /// Their payload bytes.
    pub bytes: u64,
}

impl UdpEcho {
    /// Adds an echo server on UDP port `port` to `engine`.
    pub fn install(engine: &mut Engine, port: u16) -> Result<AppId, UpiError> {
        let udp = proto_of_kind(engine, "udp")?;
        let id = engine.add_app(Box::new(UdpEcho::default()));
        engine.with_app(id, |_, cx| {
            cx.open_enable(udp, Participants::local([Addr::Port(port)]), Qos::default())
        })??;
        Ok(id)
    }
}

impl App for UdpEcho {
    fn receive(
        &mut self,
        session: Option<SessionRef>,
        msg: Message,
        _meta: &PacketMeta,
        cx: &mut AppCx,
    ) {
        // Passively opened sessions are connected, so every delivery names one.
        if let Some(s) = session {
            self.echoed += 1;
            self.bytes += msg.len() as u64;
            cx.send(s, msg);
        }
    }

    any_app!();
}

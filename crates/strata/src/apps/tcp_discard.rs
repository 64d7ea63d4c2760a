//! The TCP discard service (RFC 863): every byte is read and dropped; when
//! the client closes its direction, the session is closed too.

use strata_core::{
    Addr, App, AppCx, AppEvent, AppId, Engine, Message, PacketMeta, Participants, Qos, SessionRef,
    UpiError,
};

use super::{any_app, tcp_of};

/// The discard server.
#[derive(Debug, Default)]
pub struct TcpDiscard {
    /// Connections accepted.
    pub connections: u64,
    /// Bytes received.
    pub bytes: u64,
}

impl TcpDiscard {
    /// Adds a discard server on TCP port `port` to `engine`.
    pub fn install(engine: &mut Engine, port: u16) -> Result<AppId, UpiError> {
        let tcp = tcp_of(engine)?;
        let id = engine.add_app(Box::new(TcpDiscard::default()));
        engine.with_app(id, |_, cx| {
            cx.open_enable(tcp, Participants::local([Addr::Port(port)]), Qos::default())
        })??;
        Ok(id)
    }
}

impl App for TcpDiscard {
    fn receive(&mut self, _: Option<SessionRef>, msg: Message, _: &PacketMeta, _: &mut AppCx) {
        // TCP counts delivered data as consumed: the window stays open.
        self.bytes += msg.len() as u64;
    }

    fn event(&mut self, event: AppEvent, cx: &mut AppCx) {
        match event {
            AppEvent::OpenDone { .. } => self.connections += 1,
            // Nothing is owed the peer: close, and TCP sends our FIN.
            AppEvent::PeerClosed(s) => {
                let _ = cx.close(s);
            }
            _ => {}
        }
    }

    any_app!();
}

//! ETHDAA: Ethernet extended for Direct Application Association (seed 000 §3.2,
//! §4.2). It is the demultiplexing protocol of a DAA stack: it assigns
//! application identifiers to paths (a server may demand a well-known one), finds
//! a frame's path from the identifier in its header in one lookup, and carries
//! each path's deadline/priority so the receiver's engine can order its work.
//!
//! Frames with any other ethertype are plain Ethernet II and are handled exactly
//! as the `eth` protocol handles them (this protocol wraps one), so ARP runs on
//! ETHDAA unchanged, and messages that travel on no path — ARP, answers a protocol
//! makes on its own — go out as plain Ethernet frames a Linux peer understands.

pub mod wire;

use rustc_hash::FxHashMap;
use std::any::Any;
use std::cell::Cell;

use strata_core::graph::{BuildInfo, ProtocolConfig, ProtocolSpec};
use strata_core::{
    Control, Cx, Demux, DropReason, GraphError, Message, Next, Open, PacketMeta, PathId, Priority,
    Protocol, Reply, SessionId, Target, Up, UpiError,
};

use crate::eth::wire::{HEADER_LEN as ETH_LEN, Repr as EthRepr};
use crate::eth::{self, Eth};
use wire::{ETHERTYPE, EXTENSION_LEN, Extension};

/// Identifiers handed out when no particular one is demanded start here, above
/// the range servers demand well-known identifiers from.
const FIRST_DYNAMIC_ID: u32 = 0x0001_0000;

/// Most identifiers (paths) one host holds.
const MAX_IDS: usize = 65_536;

/// Header length of a DAA frame.
const DAA_LEN: usize = ETH_LEN + EXTENSION_LEN;

/// The protocol's registry entry.
pub const SPEC: ProtocolSpec = ProtocolSpec {
    kind: "ethdaa",
    doc: "Ethernet with DAA application identifiers and deadline/priority (seed 000 §4.2)",
    options: eth::OPTIONS,
    demux_by_number: true,
    implies_above: &[],
    implies_beside: &[],
    factory: make,
};

fn make(c: &ProtocolConfig, b: &BuildInfo) -> Result<Box<dyn Protocol>, GraphError> {
    Ok(Box::new(EthDaa {
        eth: eth::from_config(c, b)?,
        paths: FxHashMap::default(),
        last: Cell::new(None),
        next_id: FIRST_DYNAMIC_ID,
    }))
}

/// Ethernet with application identifiers.
pub struct EthDaa {
    eth: Eth,
    /// The demux table: application identifier → path.
    paths: FxHashMap<u32, PathId>,
    /// The last identifier demux found in `paths`, and its path: the frames
    /// of one flow follow each other, and comparing one number is cheaper
    /// than hashing it. Forgotten whenever `paths` changes, so it never
    /// answers what the table would not.
    last: Cell<Option<(u32, PathId)>>,
    next_id: u32,
}

impl EthDaa {
    /// The path an application identifier names, if any.
    pub fn path_of(&self, app_id: u32) -> Option<PathId> {
        self.paths.get(&app_id).copied()
    }

    /// Reads a DAA frame's extension (the bytes after its Ethernet header)
    /// into `meta`; returns the inner ethertype.
    #[inline]
    fn extension(&self, ext: &[u8], meta: &mut PacketMeta) -> Result<u16, Demux> {
        let ext = Extension::parse(ext).map_err(|_| Demux::Short(DAA_LEN))?;
        meta.peer = ext.sender;
        meta.priority = Priority(ext.priority);
        meta.path = match self.last.get() {
            Some((id, path)) if id == ext.app_id => Some(path),
            _ => {
                let path = self.paths.get(&ext.app_id).copied();
                if let Some(path) = path {
                    self.last.set(Some((ext.app_id, path)));
                }
                path
            }
        };
        Ok(ext.ethertype)
    }

    /// The header length and upper ethertype of a frame, filling `meta`.
    fn read(&self, hdr: &[u8], meta: &mut PacketMeta) -> Result<(usize, u16), Demux> {
        // The usual frame, a whole DAA header in view: the same checks, made
        // on a fixed-size view, so that no length is checked twice.
        if let Some(h) = hdr.first_chunk::<DAA_LEN>()
            && h[12..14] == ETHERTYPE.to_be_bytes()
        {
            self.eth.accept(&h[..ETH_LEN], meta).map_err(Demux::Drop)?;
            return Ok((DAA_LEN, self.extension(&h[ETH_LEN..], meta)?));
        }
        if hdr.len() < ETH_LEN {
            return Err(Demux::Short(ETH_LEN));
        }
        let ethertype = self.eth.accept(hdr, meta).map_err(Demux::Drop)?;
        if ethertype != ETHERTYPE {
            return Ok((ETH_LEN, ethertype));
        }
        Ok((DAA_LEN, self.extension(&hdr[ETH_LEN..], meta)?))
    }
}

impl Protocol for EthDaa {
    fn demux(&self, hdr: &[u8], meta: &mut PacketMeta) -> Demux {
        match self.read(hdr, meta) {
            Ok((hdr_len, ethertype)) => Demux::To {
                target: Target::Protocol,
                hdr_len,
                next: Next::Number(u32::from(ethertype)),
            },
            Err(d) => d,
        }
    }

    fn pop(&mut self, _t: Target, msg: &mut Message, meta: &mut PacketMeta, _cx: &mut Cx) -> Up {
        let Some(hdr) = msg.pullup(ETH_LEN) else {
            return Up::Drop(DropReason::Truncated);
        };
        let is_daa = hdr[12..14] == ETHERTYPE.to_be_bytes();
        let need = if is_daa { DAA_LEN } else { ETH_LEN };
        if meta.demuxed {
            // Demux has just checked this header and filled this meta.
            return if msg.strip(need) {
                Up::Continue
            } else {
                Up::Drop(DropReason::Truncated)
            };
        }
        // No demux of this header filled this metadata (a path whose
        // recorded target the early demux did not find): read it again.
        let Some(hdr) = msg.pullup(need) else {
            return Up::Drop(DropReason::Truncated);
        };
        match self.read(hdr, meta) {
            Ok((hdr_len, _)) => {
                msg.strip(hdr_len);
                Up::Continue
            }
            Err(Demux::Drop(reason)) => Up::Drop(reason),
            Err(_) => Up::Drop(DropReason::Truncated),
        }
    }

    fn pop_is_strip(&self) -> bool {
        true
    }

    fn push(&mut self, sess: SessionId, mut msg: Message, cx: &mut Cx) {
        let path = msg.path().and_then(|p| cx.path(p));
        let (Some(path), Some((remote, ethertype, _))) = (path, self.eth.session(sess)) else {
            // No path: a plain Ethernet frame.
            self.eth.push(sess, msg, cx);
            return;
        };
        if msg.len() > self.eth.mtu() - EXTENSION_LEN {
            cx.count_drop(DropReason::Other("too-big"));
            return;
        }
        let ext = Extension {
            app_id: path.remote_id,
            priority: path.priority.0,
            sender: path.local_id,
            ethertype,
        };
        let priority = path.priority;
        let header = EthRepr {
            dst: remote,
            src: self.eth.mac(),
            ethertype: ETHERTYPE,
        };
        // Both headers in one push: one check of the room in front.
        let mut both = [0u8; DAA_LEN];
        both[..ETH_LEN].copy_from_slice(&header.to_bytes());
        both[ETH_LEN..].copy_from_slice(&ext.to_bytes());
        msg.push_slice(&both);
        cx.transmit(self.eth.link(), msg, priority);
    }

    fn open(&mut self, req: Open, cx: &mut Cx) -> Result<SessionId, UpiError> {
        self.eth.open(req, cx)
    }

    fn close(&mut self, sess: SessionId, cx: &mut Cx) {
        self.eth.close(sess, cx);
    }

    fn control(
        &mut self,
        sess: Option<SessionId>,
        op: Control,
        cx: &mut Cx,
    ) -> Result<Reply, UpiError> {
        match op {
            // Every frame may carry the extension, so upper layers get that much
            // less: a DAA frame stays within the link's frame size.
            Control::GetMaxPayload => Ok(Reply::Size(self.eth.mtu() - EXTENSION_LEN)),
            op => self.eth.control(sess, op, cx),
        }
    }

    fn assign_app_id(
        &mut self,
        path: PathId,
        demand: Option<u32>,
        _cx: &mut Cx,
    ) -> Result<u32, UpiError> {
        if self.paths.len() >= MAX_IDS {
            return Err(UpiError::Exhausted("ethdaa application identifiers"));
        }
        let id = match demand {
            Some(0) => {
                return Err(UpiError::BadParticipant(
                    "application identifier 0 means none",
                ));
            }
            Some(id) if self.paths.contains_key(&id) => return Err(UpiError::InUse),
            Some(id) => id,
            None => {
                while self.next_id == 0 || self.paths.contains_key(&self.next_id) {
                    self.next_id = self.next_id.wrapping_add(1).max(FIRST_DYNAMIC_ID);
                }
                let id = self.next_id;
                self.next_id = self.next_id.wrapping_add(1).max(FIRST_DYNAMIC_ID);
                id
            }
        };
        self.paths.insert(id, path);
        self.last.set(None);
        Ok(id)
    }

    fn release_app_id(&mut self, id: u32, _cx: &mut Cx) {
        self.paths.remove(&id);
        self.last.set(None);
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::info::EthInfo;
    use strata_core::{HwAddr, Instant, LinkId};

    const ME: HwAddr = HwAddr([2, 0, 0, 0, 0, 1]);
    const PEER: HwAddr = HwAddr([2, 0, 0, 0, 0, 9]);

    fn frame(dst: HwAddr, src: HwAddr) -> Vec<u8> {
        let ext = Extension {
            app_id: 7,
            priority: 9,
            sender: 5,
            ethertype: 0x0800,
        };
        let eth = EthRepr {
            dst,
            src,
            ethertype: ETHERTYPE,
        };
        [&eth.to_bytes()[..], &ext.to_bytes(), b"data"].concat()
    }

    fn meta() -> PacketMeta {
        PacketMeta::new(LinkId(0), Instant::ZERO)
    }

    #[test]
    fn a_whole_daa_header_reads_as_the_general_path_reads_it() {
        let mut p = EthDaa {
            eth: Eth::new(LinkId(0), ME, 1500),
            paths: FxHashMap::default(),
            last: Cell::new(None),
            next_id: FIRST_DYNAMIC_ID,
        };
        p.paths.insert(7, PathId(3));
        let group = HwAddr([3, 0, 0, 0, 0, 2]);
        for f in [
            frame(ME, PEER),
            frame(HwAddr::BROADCAST, PEER),
            frame(PEER, ME),
            frame(ME, group),
        ] {
            let (mut fast, mut general) = (meta(), meta());
            let got = p.read(&f, &mut fast);
            let want = p
                .eth
                .accept(&f, &mut general)
                .map_err(Demux::Drop)
                .and_then(|_| p.extension(&f[ETH_LEN..], &mut general))
                .map(|t| (DAA_LEN, t));
            assert_eq!(got, want);
            assert_eq!(
                (fast.peer, fast.priority, fast.path),
                (general.peer, general.priority, general.path)
            );
            assert_eq!(fast.get::<EthInfo>(), general.get::<EthInfo>());
        }
        assert_eq!(p.read(&frame(ME, PEER), &mut meta()), Ok((DAA_LEN, 0x0800)));
        assert_eq!(
            p.read(&frame(PEER, ME), &mut meta()),
            Err(Demux::Drop(DropReason::NotForUs))
        );
        // One byte short of the extension: the general path asks for the
        // whole header.
        let f = frame(ME, PEER);
        assert_eq!(
            p.read(&f[..DAA_LEN - 1], &mut meta()),
            Err(Demux::Short(DAA_LEN))
        );
    }
}

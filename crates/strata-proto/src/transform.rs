//! Data-manipulation layers for integrated layer processing (seed 000 §2.2): a
//! cipher (ChaCha20, RFC 8439's stream), a presentation conversion (XDR's 32-bit
//! big-endian words, RFC 4506 §3, to host order) and the final copy into the
//! application's buffer. Each sits on the layer below one session to one, passes
//! the participants through, and on the way up declares its manipulation as a
//! stage (`Cx::stage`): under LLM each runs as its own pass when the layer pops;
//! under ILLM and DAA the engine runs them all fused, block by block.
//!
//! A stack such as `copy/xdr/cipher/udp/ip/eth` is the experiment of
//! `strata bench paper000 ilp`. Only the cipher has a header: the 12-byte nonce of
//! each message. Its key is an option; the default key is public and only for
//! experiments.

use rustc_hash::FxHashMap;
use std::any::Any;

use strata_core::graph::{BuildInfo, OptionDoc, ProtocolConfig, ProtocolSpec};
use strata_core::ilp::{self, Stage};
use strata_core::{
    Addr, Cx, Demux, DropReason, GraphError, Message, Next, Open, PacketMeta, Participants,
    ProtoId, Protocol, SessionId, SessionRef, Target, Up, UpiError, Upper,
};

use crate::bad_option;
use crate::slab::Slab;

/// Bytes of the cipher's header: the message's nonce.
pub const NONCE_LEN: usize = 12;

const MAX_SESSIONS: usize = 4096;

/// The key used when the config gives none: fine for measuring, useless for
/// secrecy.
const EXPERIMENT_KEY: [u8; 32] = *b"strata ilp experiment key 000000";

/// What a layer does to the data it carries.
#[derive(Clone, Copy)]
enum Kind {
    Cipher([u8; 32]),
    Xdr,
    Copy,
}

const CIPHER_OPTIONS: &[OptionDoc] = &[OptionDoc {
    name: "key",
    doc: "the ChaCha20 key, 64 hex digits (default: a public experiment key)",
}];

/// The registry entry of `cipher`.
pub const CIPHER: ProtocolSpec = ProtocolSpec {
    kind: "cipher",
    doc: "ChaCha20 over each message, a nonce per message (ILP experiment layer)",
    options: CIPHER_OPTIONS,
    demux_by_number: false,
    implies_above: &[],
    implies_beside: &[],
    factory: make_cipher,
};

/// The registry entry of `xdr`.
pub const XDR: ProtocolSpec = ProtocolSpec {
    kind: "xdr",
    doc: "XDR 32-bit words in network order to host order (ILP experiment layer)",
    options: &[],
    demux_by_number: false,
    implies_above: &[],
    implies_beside: &[],
    factory: make_xdr,
};

/// The registry entry of `copy`.
pub const COPY: ProtocolSpec = ProtocolSpec {
    kind: "copy",
    doc: "the final copy of each message into the application's buffer (ILP experiment layer)",
    options: &[],
    demux_by_number: false,
    implies_above: &[],
    implies_beside: &[],
    factory: make_copy,
};

fn make(kind: Kind, b: &BuildInfo) -> Result<Box<dyn Protocol>, GraphError> {
    let lower = b
        .lower_proto_except(&[])
        .ok_or_else(|| b.needs_below("a protocol with sessions"))?;
    Ok(Box::new(Transform {
        kind,
        lower,
        sessions: Slab::new(MAX_SESSIONS),
        by_lower: FxHashMap::default(),
        listeners: FxHashMap::default(),
        sent: 0,
    }))
}

fn make_cipher(c: &ProtocolConfig, b: &BuildInfo) -> Result<Box<dyn Protocol>, GraphError> {
    let key = match c.options.text("key")? {
        None => EXPERIMENT_KEY,
        Some(hex) => parse_key(&hex).ok_or_else(|| bad_option(c, "key", "want 64 hex digits"))?,
    };
    make(Kind::Cipher(key), b)
}

fn make_xdr(_: &ProtocolConfig, b: &BuildInfo) -> Result<Box<dyn Protocol>, GraphError> {
    make(Kind::Xdr, b)
}

fn make_copy(_: &ProtocolConfig, b: &BuildInfo) -> Result<Box<dyn Protocol>, GraphError> {
    make(Kind::Copy, b)
}

fn parse_key(hex: &str) -> Option<[u8; 32]> {
    let hex = hex.as_bytes();
    if hex.len() != 64 {
        return None;
    }
    let mut key = [0u8; 32];
    for (byte, pair) in key.iter_mut().zip(hex.chunks_exact(2)) {
        *byte = u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok()?;
    }
    Some(key)
}

struct Session {
    upper: Upper,
    lower: SessionRef,
}

/// One data-manipulation layer.
pub struct Transform {
    kind: Kind,
    lower: ProtoId,
    sessions: Slab<Session>,
    /// Our session sitting on each lower session.
    by_lower: FxHashMap<SessionRef, SessionId>,
    /// Passive opens, by the local part they listen on (a port, for UDP below).
    listeners: FxHashMap<Option<Addr>, Upper>,
    /// Messages sent, for the cipher's nonces.
    sent: u64,
}

fn next_of(upper: Upper) -> Next {
    match upper {
        Upper::App(a) => Next::App(a),
        Upper::Proto(p) => Next::Proto(p),
    }
}

impl Transform {
    fn header_len(&self) -> usize {
        match self.kind {
            Kind::Cipher(_) => NONCE_LEN,
            Kind::Xdr | Kind::Copy => 0,
        }
    }

    fn add(&mut self, upper: Upper, lower: SessionRef) -> Result<SessionId, UpiError> {
        let id = self
            .sessions
            .insert(Session { upper, lower })
            .ok_or(UpiError::Exhausted("transform sessions"))?;
        self.by_lower.insert(lower, id);
        Ok(id)
    }
}

impl Protocol for Transform {
    fn demux(&self, hdr: &[u8], meta: &mut PacketMeta) -> Demux {
        let len = self.header_len();
        if hdr.len() < len && meta.present >= len {
            return Demux::Short(len);
        }
        let session = meta
            .lower
            .and_then(|l| self.by_lower.get(&l))
            .and_then(|&id| self.sessions.get(id).map(|s| (id, s.upper)));
        match session {
            Some((id, upper)) if meta.present >= len => Demux::To {
                target: Target::Session(id),
                hdr_len: len,
                next: next_of(upper),
            },
            Some(_) => Demux::Drop(DropReason::Truncated),
            None => Demux::Drop(DropReason::NoSession),
        }
    }

    fn pop(&mut self, _t: Target, msg: &mut Message, _m: &mut PacketMeta, cx: &mut Cx) -> Up {
        let stage = match self.kind {
            Kind::Cipher(key) => {
                let Some(nonce) = msg.pullup(NONCE_LEN).map(|n| {
                    let mut nonce = [0u8; NONCE_LEN];
                    nonce.copy_from_slice(n);
                    nonce
                }) else {
                    return Up::Drop(DropReason::Truncated);
                };
                msg.strip(NONCE_LEN);
                Stage::cipher(key, nonce)
            }
            Kind::Xdr => Stage::Swap32,
            Kind::Copy => Stage::Copy,
        };
        // These stages never fail: only checksums give a verdict.
        cx.stage(msg, stage);
        Up::Continue
    }

    fn push(&mut self, sess: SessionId, mut msg: Message, cx: &mut Cx) {
        let Some(s) = self.sessions.get(sess) else {
            cx.count_drop(DropReason::NoSession);
            return;
        };
        let lower = s.lower;
        match self.kind {
            Kind::Cipher(key) => {
                // The nonce must never repeat under one key (RFC 8439 §4): a
                // message counter, with the session in the spare bytes.
                let mut nonce = [0u8; NONCE_LEN];
                nonce[..8].copy_from_slice(&self.sent.to_be_bytes());
                nonce[8..].copy_from_slice(&sess.0.to_be_bytes());
                self.sent += 1;
                ilp::run_one(&mut Stage::cipher(key, nonce), &mut msg);
                msg.push_slice(&nonce);
            }
            Kind::Xdr => {
                ilp::run_one(&mut Stage::Swap32, &mut msg);
            }
            Kind::Copy => {}
        }
        cx.push(lower, msg);
    }

    fn open(&mut self, req: Open, cx: &mut Cx) -> Result<SessionId, UpiError> {
        let lower = cx.open(self.lower, req.parts, req.qos)?;
        self.add(req.upper, lower).inspect_err(|_| cx.close(lower))
    }

    fn open_enable(&mut self, req: Open, cx: &mut Cx) -> Result<(), UpiError> {
        let key = req.parts.local.top();
        if self.listeners.contains_key(&key) {
            return Err(UpiError::InUse);
        }
        cx.open_enable(self.lower, req.parts, req.qos)?;
        self.listeners.insert(key, req.upper);
        Ok(())
    }

    /// The layer below made a session through our passive open: make ours on it
    /// and tell whoever listens above.
    fn open_done(&mut self, lower: SessionRef, parts: Participants, cx: &mut Cx) {
        let upper = self
            .listeners
            .get(&parts.local.top())
            .or_else(|| self.listeners.values().next())
            .copied();
        let Some(upper) = upper else {
            cx.count("open-done-without-listener");
            return;
        };
        match self.add(upper, lower) {
            Ok(id) => cx.open_done(upper, id, parts),
            Err(_) => cx.count_drop(DropReason::QueueFull),
        }
    }

    fn close(&mut self, sess: SessionId, cx: &mut Cx) {
        if let Some(s) = self.sessions.remove(sess) {
            self.by_lower.remove(&s.lower);
            cx.close(s.lower);
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_64_hex_digits() {
        assert_eq!(parse_key(&"01".repeat(32)), Some([1; 32]));
        assert_eq!(parse_key("01"), None);
        assert_eq!(parse_key(&"zz".repeat(32)), None);
    }
}

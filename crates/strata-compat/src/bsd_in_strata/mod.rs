//! BSD-in-Strata: protocols written for the BSD subsystem, imported
//! unmodified into Strata graphs (seed 004 §3, with Strata as the host).
//!
//! Each module here is a Strata protocol wrapping one BSD protocol switch
//! entry — the same source file the native BSD subsystem compiles
//! (`bsd/netatalk/*.rs`) — and a [`BsdKernel`](crate::bsd::BsdKernel) of its
//! own that translates: Strata sessions to BSD sockets, Strata messages to
//! mbuf chains and back, Strata's pushes to `if_output`, what the protocol
//! appends to a socket to a delivery up the graph.
//!
//! - [`ddp`]: `ddp@bsd`, BSD's DDP over Strata's `eth`.
//! - [`atp`]: `atp@bsd`, BSD's ATP over any Strata DDP.

pub mod atp;
pub mod ddp;

use strata_core::graph::{BuildInfo, OptionDoc, ProtocolConfig, ProtocolSpec};
use strata_core::{GraphError, Message, Protocol};

use crate::bsd::mbuf::{MHLEN, Mbuf, MbufKind, MbufPool, PktHdr};
use crate::errno::Errno;
use crate::kmem::Block;

use crate::appletalk::ddp::host::Host;

/// The options of `ddp@bsd`.
pub const DDP_OPTIONS: &[OptionDoc] = &[
    OptionDoc {
        name: "net",
        doc: "this node's network number (default 65280)",
    },
    OptionDoc {
        name: "node",
        doc: "this node's number, 1 to 253 (default: from the Ethernet address)",
    },
    OptionDoc {
        name: "amt",
        doc: "address mapping table entries, [\"net.node=mac\", …]",
    },
    OptionDoc {
        name: "max_sessions",
        doc: "most Strata sessions at once (default 1024)",
    },
    OptionDoc {
        name: "mbufs",
        doc: "the module's mbuf pool: small mbufs, and as many clusters (default 4096)",
    },
];

/// The registry entry of `ddp@bsd`.
pub const DDP_SPEC: ProtocolSpec = ProtocolSpec {
    kind: "ddp@bsd",
    doc: "BSD's DDP (bsd/netatalk/ddp.rs, unmodified) imported into Strata by encapsulation",
    options: DDP_OPTIONS,
    demux_by_number: true,
    implies_above: &[],
    implies_beside: &[],
    factory: make_ddp,
};

fn make_ddp(c: &ProtocolConfig, b: &BuildInfo) -> Result<Box<dyn Protocol>, GraphError> {
    let eth = b
        .lower_proto_except(&[])
        .ok_or_else(|| b.needs_below("eth"))?;
    let host = Host::from_config(c, eth)?;
    let mbufs: usize = c.options.get("mbufs")?.unwrap_or(4096);
    Ok(Box::new(ddp::BsdDdp::new(host, mbufs)))
}

/// The options of `atp@bsd`: `atp`'s and the module's mbuf pool.
pub const ATP_OPTIONS: [OptionDoc; crate::appletalk::atp::OPTIONS.len() + 1] =
    crate::appletalk::atp::options_and(OptionDoc {
        name: "mbufs",
        doc: "the module's mbuf pool: small mbufs, and as many clusters (default 4096)",
    });

/// The registry entry of `atp@bsd`.
pub const ATP_SPEC: ProtocolSpec = ProtocolSpec {
    kind: "atp@bsd",
    doc: "BSD's ATP (bsd/netatalk/atp.rs, unmodified) imported into Strata by encapsulation",
    options: &ATP_OPTIONS,
    demux_by_number: false,
    implies_above: &[],
    implies_beside: &[],
    factory: atp::make,
};

/// A Strata message of mbuf chain `m`: a one-mbuf chain over a buffer the
/// host handed over goes back up as that buffer's own bytes (no copy);
/// anything else is copied once.
pub(crate) fn message_of(m: &Mbuf) -> Message {
    match m.next() {
        None => {
            let (block, off, len) = m.storage();
            Message::from_bytes(block.to_bytes(off, len))
        }
        Some(_) => Message::from(m.to_vec()),
    }
}

/// A received Strata message handed over to BSD as an mbuf with a packet
/// header (what `m_devget` makes, without its copy): the message's bytes
/// become the mbuf's read-only storage, counted against `pool` as an mbuf
/// of its size (so the pool still bounds what the protocol holds), and
/// `msg` is left empty. A protocol that keeps the mbuf (ATP's responses
/// waiting for the rest of their transaction) keeps the host's buffer.
pub(crate) fn mbuf_of(
    pool: &MbufPool,
    msg: &mut Message,
    rcvif: Option<usize>,
) -> Result<Mbuf, Errno> {
    let bytes = std::mem::take(msg).into_bytes();
    let len = bytes.len();
    let kind = if len > MHLEN {
        MbufKind::Cluster
    } else {
        MbufKind::Small
    };
    let mut m = Mbuf::wrap(pool, kind, Block::from_bytes(bytes), 0, len)?;
    m.pkthdr = Some(PktHdr { rcvif });
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bsd::mbuf::NativeMbufs;
    use bytes::Bytes;

    #[test]
    fn a_received_message_is_handed_over_and_back_up_without_a_copy() {
        let pool = NativeMbufs::pool(1, 1);
        let frame = Bytes::from(vec![7u8; 40]);
        let mut msg = Message::from_bytes(frame.clone());
        let mut m = mbuf_of(&pool, &mut msg, Some(0)).unwrap();
        assert!(msg.is_empty(), "the message was handed over");
        assert_eq!(m.data().as_ptr(), frame.as_ptr(), "no copy");
        assert_eq!(m.pkthdr, Some(PktHdr { rcvif: Some(0) }));
        assert_eq!(pool.stats().small_in_use, 1, "counted as an mbuf");
        assert_eq!(m.leading_space(), 0, "the host's buffer is not written");
        // A protocol strips its header; the rest goes up as the same bytes.
        m.m_adj(13);
        let up = message_of(&m);
        assert_eq!(up.chunks().next().unwrap().as_ptr(), frame[13..].as_ptr());
        assert_eq!(up.len(), 27);
        // The pool still bounds what is held: a second one is refused.
        let mut more = Message::from_bytes(frame.clone());
        assert_eq!(mbuf_of(&pool, &mut more, None).err(), Some(Errno::Enobufs));
        drop(m);
        assert_eq!(pool.stats().small_in_use, 0);
        // A large one is counted as a cluster.
        let mut big = Message::from_bytes(Bytes::from(vec![1u8; 600]));
        let m = mbuf_of(&pool, &mut big, None).unwrap();
        assert_eq!(m.kind(), MbufKind::Cluster);
        assert_eq!(m.m_length(), 600);
    }
}

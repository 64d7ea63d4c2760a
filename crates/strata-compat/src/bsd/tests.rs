//! The BSD subsystem's unit tests: mbuf operations, socket buffer bounds,
//! the protocol switch's timers, vertical calls and immediate errors.

use std::time::Duration;

use super::kernel::BsdKernel;
use super::mbuf::{
    MCLBYTES, MHLEN, MLEN, MbufKind, MbufType, NativeMbufs, m_get, m_getcl, m_gethdr,
};
use super::protosw::{
    InputArg, OutputArg, PrFlags, Protosw, SockId, SockType, SockaddrAt, Usrreq, UsrreqOk,
};
use super::socket::Sockbuf;
use super::system::Bsd;
use crate::errno::Errno;

fn bytes(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 + 3) as u8).collect()
}

#[test]
fn append_spills_into_a_chain_that_reads_back_the_same_bytes() {
    let pool = NativeMbufs::pool(64, 8);
    let mut m = m_gethdr(&pool, MbufType::Data).unwrap();
    let data = bytes(3000);
    m.m_append(&data).unwrap();
    assert_eq!(m.to_vec(), data);
    assert_eq!(m.m_length(), 3000);
    assert_eq!(m.m_len(), MHLEN, "the header mbuf fills first");
    assert!(m.iter().any(|b| b.kind() == MbufKind::Cluster));
}

#[test]
fn prepend_uses_leading_space_then_a_new_mbuf() {
    let pool = NativeMbufs::pool(64, 8);
    let mut m = m_gethdr(&pool, MbufType::Data).unwrap();
    m.m_append(b"payload").unwrap();
    let m = m.m_prepend(13).unwrap();
    assert_eq!(
        m.count(),
        2,
        "no leading space in a fresh mbuf: a header mbuf goes in front"
    );
    assert!(
        m.pkthdr.is_some(),
        "the packet header moves to the new first mbuf"
    );
    assert_eq!(m.m_len(), 13);
    let mut m = m;
    m.m_adj(13);
    let m = m.m_prepend(8).unwrap();
    assert_eq!(m.count(), 2, "the trimmed header's room is reused in place");
    assert_eq!(m.m_length(), 8 + 7);
}

#[test]
fn prepend_in_place_writes_only_into_unshared_leading_space() {
    let pool = NativeMbufs::pool(64, 8);
    let mut m = m_get(&pool, MbufType::Data).unwrap();
    m.reserve_head(4);
    m.m_append(b"data").unwrap();
    assert!(!m.prepend_in_place(b"12345"), "only 4 bytes in front");
    assert_eq!(m.to_vec(), b"data", "nothing done");
    assert!(m.prepend_in_place(b"hdr:"));
    assert_eq!(m.to_vec(), b"hdr:data");
    assert_eq!(m.leading_space(), 0);
    let mut c = m_getcl(&pool, MbufType::Data, false).unwrap();
    c.reserve_head(8);
    c.m_append(b"x").unwrap();
    let shared = c.m_copym(0, None).unwrap();
    assert!(
        !c.prepend_in_place(b"ab"),
        "a shared cluster is not written"
    );
    assert_eq!(
        (c.to_vec(), shared.to_vec()),
        (b"x".to_vec(), b"x".to_vec())
    );
}

#[test]
fn adj_trims_head_and_tail_across_mbufs() {
    let pool = NativeMbufs::pool(64, 8);
    let mut m = m_gethdr(&pool, MbufType::Data).unwrap();
    let data = bytes(400);
    m.m_append(&data).unwrap();
    m.m_adj(150);
    assert_eq!(m.to_vec(), data[150..]);
    m.m_adj(-100);
    assert_eq!(m.to_vec(), data[150..300]);
    m.m_adj(-1000);
    assert_eq!(m.m_length(), 0);
}

#[test]
fn pullup_makes_the_header_contiguous() {
    let pool = NativeMbufs::pool(64, 8);
    let mut m = m_get(&pool, MbufType::Data).unwrap();
    m.m_append(&[1, 2, 3]).unwrap();
    let mut tail = m_get(&pool, MbufType::Data).unwrap();
    tail.m_append(&bytes(50)).unwrap();
    m.m_cat(tail);
    let all = m.to_vec();
    let m = m.m_pullup(20).unwrap();
    assert!(m.m_len() >= 20);
    assert_eq!(m.to_vec(), all);
    assert_eq!(m.m_pullup(MHLEN + 1).unwrap_err(), Errno::Einval);
}

#[test]
fn copym_shares_clusters_and_copies_small_mbufs() {
    let pool = NativeMbufs::pool(64, 8);
    let mut m = m_getcl(&pool, MbufType::Data, true).unwrap();
    let data = bytes(1500);
    m.m_append(&data).unwrap();
    let c = m.m_copym(100, Some(1000)).unwrap();
    assert_eq!(c.to_vec(), data[100..1100]);
    assert!(
        c.block().same(m.block()),
        "the cluster is shared, not copied"
    );
    let mut s = m_get(&pool, MbufType::Data).unwrap();
    s.m_append(b"small").unwrap();
    let sc = s.m_copym(0, None).unwrap();
    assert!(!sc.block().same(s.block()));
    assert_eq!(sc.to_vec(), b"small");
}

#[test]
fn a_shared_cluster_is_copied_before_it_is_written() {
    let pool = NativeMbufs::pool(64, 8);
    let mut m = m_getcl(&pool, MbufType::Data, true).unwrap();
    m.m_append(b"abcdef").unwrap();
    let c = m.m_copym(0, None).unwrap();
    assert_eq!(m.trailing_space(), 0, "no appending into a shared cluster");
    m.data_mut()[0] = b'X';
    assert_eq!(c.to_vec(), b"abcdef", "the copy keeps its bytes");
    assert_eq!(m.to_vec(), b"Xbcdef");
}

#[test]
fn the_pool_is_bounded_and_counts_every_mbuf_back() {
    let pool = NativeMbufs::pool(4, 1);
    let held: Vec<_> = (0..4)
        .map(|_| m_get(&pool, MbufType::Data).unwrap())
        .collect();
    assert_eq!(m_get(&pool, MbufType::Data).unwrap_err(), Errno::Enobufs);
    let cl = m_getcl(&pool, MbufType::Data, false);
    assert!(cl.is_ok());
    assert_eq!(
        m_getcl(&pool, MbufType::Data, false).unwrap_err(),
        Errno::Enobufs
    );
    let s = pool.stats();
    assert_eq!((s.small_in_use, s.clusters_in_use, s.drops), (4, 1, 2));
    drop(held);
    drop(cl);
    let s = pool.stats();
    assert_eq!((s.small_in_use, s.clusters_in_use), (0, 0));
    assert_eq!((MLEN, MCLBYTES), (108, 2048));
}

#[test]
fn a_socket_buffer_refuses_what_does_not_fit() {
    let pool = NativeMbufs::pool(64, 8);
    let mut sb = Sockbuf::new(100, 64);
    let from = SockaddrAt::new(1, 2, 3);
    for _ in 0..2 {
        let mut m = m_gethdr(&pool, MbufType::Data).unwrap();
        m.m_append(&bytes(40)).unwrap();
        sb.sbappendaddr(from, m, None).unwrap();
    }
    let mut m = m_gethdr(&pool, MbufType::Data).unwrap();
    m.m_append(&bytes(40)).unwrap();
    assert_eq!(sb.sbappendaddr(from, m, None), Err(Errno::Enobufs));
    assert_eq!((sb.sb_cc, sb.records(), sb.sbspace()), (80, 2, 20));
    sb.sbdroprecord().unwrap();
    assert_eq!(sb.sbspace(), 60);
}

/// A protocol that counts its timeouts, echoes input back down through the
/// entry below it (a call back into a busy entry) and refuses sends larger
/// than 10 bytes at once.
struct Probe {
    protocol: u8,
    below: Option<u8>,
    fast: u32,
    slow: u32,
    input: u32,
    output: u32,
}

impl<K: BsdKernel> Protosw<K> for Probe {
    fn pr_type(&self) -> SockType {
        SockType::Dgram
    }
    fn pr_protocol(&self) -> u8 {
        self.protocol
    }
    fn pr_flags(&self) -> PrFlags {
        PrFlags::default()
    }
    fn pr_name(&self) -> &'static str {
        "probe"
    }
    fn pr_input(&mut self, k: &mut K, m: super::Mbuf, arg: InputArg) {
        self.input += 1;
        match (self.below, arg) {
            (None, InputArg::Interface { .. }) => {
                // The bottom hands up to protocol 2, which answers down here.
                k.pr_input(
                    2,
                    m,
                    InputArg::Ddp {
                        src: SockaddrAt::default(),
                        dst: SockaddrAt::default(),
                        so: SockId(0),
                    },
                );
            }
            (Some(b), _) => {
                let arg = OutputArg {
                    so: SockId(0),
                    dst: SockaddrAt::default(),
                    ddp_type: 0,
                };
                assert_eq!(
                    k.pr_output(b, m, arg),
                    Ok(()),
                    "held for the busy entry below"
                );
            }
            _ => {}
        }
    }
    fn pr_output(&mut self, k: &mut K, m: super::Mbuf, _arg: OutputArg) -> Result<(), Errno> {
        self.output += 1;
        k.if_output(0, m, SockaddrAt::default())
    }
    fn pr_usrreq(&mut self, _k: &mut K, _so: SockId, req: Usrreq) -> Result<UsrreqOk, Errno> {
        match req {
            Usrreq::Send { m, .. } if m.m_length() > 10 => Err(Errno::Emsgsize),
            _ => Ok(UsrreqOk::Done),
        }
    }
    fn pr_fasttimo(&mut self, _k: &mut K) {
        self.fast += 1;
    }
    fn pr_slowtimo(&mut self, _k: &mut K) {
        self.slow += 1;
    }
}

fn probes() -> Bsd {
    let mut bsd = Bsd::new(NativeMbufs::pool(64, 8));
    bsd.add_protocol(Box::new(Probe {
        protocol: 1,
        below: None,
        fast: 0,
        slow: 0,
        input: 0,
        output: 0,
    }));
    bsd.add_protocol(Box::new(Probe {
        protocol: 2,
        below: Some(1),
        fast: 0,
        slow: 0,
        input: 0,
        output: 0,
    }));
    bsd.if_attach(SockaddrAt::new(1, 1, 0), 1);
    bsd
}

#[test]
fn fast_and_slow_timeouts_run_every_200_and_500_ms_of_virtual_time() {
    let mut bsd = probes();
    bsd.advance_to(Duration::from_secs(10));
    assert_eq!(bsd.stats.fasttimo, 50);
    assert_eq!(bsd.stats.slowtimo, 20);
    assert_eq!(bsd.ticks(), 1000);
}

#[test]
fn a_call_back_into_a_busy_entry_runs_when_it_returns() {
    let mut bsd = probes();
    bsd.if_input(0, b"frame");
    bsd.netisr();
    assert_eq!(bsd.stats.deferred, 1);
    let (_, frame) = bsd
        .if_dequeue(0)
        .expect("the echo went out once the bottom entry returned");
    assert_eq!(frame, b"frame");
}

#[test]
fn errors_return_immediately_to_the_sender() {
    let mut bsd = probes();
    let so = bsd.socreate(2).unwrap();
    assert_eq!(bsd.sosend(so, b"short", None, None), Ok(()));
    assert_eq!(
        bsd.sosend(so, b"far too long a datagram", None, None),
        Err(Errno::Emsgsize)
    );
    assert_eq!(bsd.socreate(9).unwrap_err(), Errno::Eopnotsupp);
}

#[test]
fn the_input_queue_is_bounded() {
    let mut bsd = probes();
    for _ in 0..60 {
        bsd.if_input(0, b"x");
    }
    assert_eq!(bsd.stats.intrq_drops, 10);
}

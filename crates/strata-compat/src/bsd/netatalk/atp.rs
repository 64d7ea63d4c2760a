//! ATP, the AppleTalk Transaction Protocol, as a BSD protocol over DDP
//! (Inside AppleTalk ch. 9): transactions of a request and up to eight
//! responses, the bitmap/sequence number, retries, and exactly-once (XO)
//! transactions whose responses are kept for retransmission until a
//! release (TRel) or the release timer.
//!
//! The way BSD protocols are: the user's requests come through
//! `pr_usrreq(PRU_SEND)` with an [`AtpService`] record as control data;
//! packets go down by direct calls to DDP's `pr_output` and come up through
//! `pr_input`; completed transactions are appended to the socket with
//! `sbappendaddr` and `sorwakeup`; retries and the release timer count
//! `pr_slowtimo` rounds (500 ms). Every error returns at once.

use std::collections::VecDeque;

use crate::appletalk::wire::atp::{self as wire, Function, Header, Repr, TRelTimeout};
use crate::atp_service::{AtpService, RETRY_FOREVER};
use crate::errno::Errno;

use super::super::kernel::BsdKernel;
use super::super::mbuf::{Mbuf, MbufType};
use super::super::protosw::{
    InputArg, OutputArg, PrFlags, Protosw, SockId, SockType, SockaddrAt, Usrreq, UsrreqOk,
};
use super::super::system::SLOWTIMO;
use super::{ATPROTO_ATP, ATPROTO_DDP};

/// Outstanding requests one socket may have.
pub const ATP_MAXREQ: usize = 64;
/// Transactions one socket may be answering at once.
pub const ATP_MAXTRANS: usize = 128;

/// ATP's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AtpStats {
    /// Requests sent, first transmissions.
    pub requests: u64,
    /// Requests retransmitted by the retry timer.
    pub retries: u64,
    /// Transactions completed (all responses in).
    pub completed: u64,
    /// Transactions that ran out of retries.
    pub failed: u64,
    /// Requests delivered to the user.
    pub requests_in: u64,
    /// Duplicate requests of an XO transaction (answered from the kept
    /// responses, or ignored while the user prepares them).
    pub dup_requests: u64,
    /// Responses sent (each segment, retransmissions included).
    pub responses: u64,
    /// Responses for a sequence number already received.
    pub dup_responses: u64,
    /// Releases received.
    pub releases: u64,
    /// XO transactions dropped by the release timer.
    pub release_timeouts: u64,
    /// Dropped: shorter than an ATP header, or malformed.
    pub malformed: u64,
    /// Dropped: a response or release for no transaction.
    pub no_transaction: u64,
    /// Dropped: the transaction table was full.
    pub table_full: u64,
    /// Dropped: the socket's receive buffer was full.
    pub sb_full: u64,
}

impl AtpStats {
    /// The counters by name.
    pub fn named(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("requests", self.requests),
            ("retries", self.retries),
            ("completed", self.completed),
            ("failed", self.failed),
            ("requests_in", self.requests_in),
            ("dup_requests", self.dup_requests),
            ("responses", self.responses),
            ("dup_responses", self.dup_responses),
            ("releases", self.releases),
            ("release_timeouts", self.release_timeouts),
            ("malformed", self.malformed),
            ("no_transaction", self.no_transaction),
            ("table_full", self.table_full),
            ("sb_full", self.sb_full),
        ]
    }
}

struct OutReq {
    tid: u16,
    dst: SockaddrAt,
    want: u8,
    xo: Option<TRelTimeout>,
    user: [u8; 4],
    retries: u8,
    rounds: u32,
    left: u32,
    data: Mbuf,
    got: [Option<Mbuf>; wire::MAX_RESPONSES],
}

enum TransState {
    Pending,
    Sent(Vec<Mbuf>),
}

struct InTrans {
    src: SockaddrAt,
    tid: u16,
    bitmap: u8,
    xo: Option<TRelTimeout>,
    state: TransState,
    release_left: u32,
}

struct AtpPcb {
    so: SockId,
    /// Outstanding requests, oldest first: a queue, because replies
    /// mostly complete the oldest and a request is large (its responses
    /// held in place), so taking one out must not shift the rest.
    reqs: VecDeque<OutReq>,
    trans: Vec<InTrans>,
    /// Completed transactions waiting for room in the socket buffer
    /// (delivered on `PRU_RCVD` and each slow timeout).
    ready: Vec<(SockaddrAt, AtpService, Mbuf)>,
}

impl AtpPcb {
    fn deliver_ready<K: BsdKernel>(&mut self, k: &mut K) {
        while !self.ready.is_empty() {
            let (from, rec, m) = self.ready.remove(0);
            if let Err(m) = deliver(k, self.so, from, rec, m) {
                self.ready.insert(0, (from, rec, m));
                return;
            }
        }
    }
}

/// ATP's switch entry.
#[derive(Default)]
pub struct Atp {
    pcbs: Vec<AtpPcb>,
    next_tid: u16,
    /// The counters.
    pub stats: AtpStats,
}

fn rounds(d: std::time::Duration) -> u32 {
    (d.as_millis().div_ceil(SLOWTIMO.as_millis()) as u32).max(1)
}

/// An ATP packet: the header, then `data` itself (callers that keep their
/// data pass an `m_copym` of it, clusters shared).
fn packet<K: BsdKernel>(k: &K, hdr: &Repr, data: Option<Mbuf>) -> Result<Mbuf, Errno> {
    let mut m = k.m_gethdr(MbufType::Header)?;
    m.m_append(&hdr.to_bytes())?;
    if let Some(d) = data.filter(|d| d.m_length() > 0) {
        m.m_cat(d);
    }
    Ok(m)
}

fn send<K: BsdKernel>(k: &mut K, so: SockId, dst: SockaddrAt, m: Mbuf) -> Result<(), Errno> {
    k.pr_output(
        ATPROTO_DDP,
        m,
        OutputArg {
            so,
            dst,
            ddp_type: ATPROTO_ATP,
        },
    )
}

/// Append a record for the user and wake it; the data back when the
/// socket buffer has no room for it.
fn deliver<K: BsdKernel>(
    k: &mut K,
    so: SockId,
    from: SockaddrAt,
    rec: AtpService,
    m: Mbuf,
) -> Result<(), Mbuf> {
    if k.sbspace(so) < m.m_length() + crate::atp_service::RECORD_LEN {
        return Err(m);
    }
    let control = k
        .m_get(MbufType::Control)
        .and_then(|mut c| c.m_append(&rec.encode()).map(|_| c));
    match control.and_then(|c| k.sbappendaddr(so, from, m, Some(c))) {
        Ok(()) => {
            k.sorwakeup(so);
            Ok(())
        }
        // Out of mbufs for the record: nothing to give back.
        Err(_) => Ok(()),
    }
}

impl Atp {
    /// ATP with no sockets.
    pub fn new() -> Atp {
        Atp::default()
    }

    fn pcb(&mut self, so: SockId) -> Result<&mut AtpPcb, Errno> {
        self.pcbs
            .iter_mut()
            .find(|p| p.so == so)
            .ok_or(Errno::Einval)
    }

    fn send_request<K: BsdKernel>(
        &mut self,
        k: &mut K,
        so: SockId,
        dst: SockaddrAt,
        rec: AtpService,
        data: Mbuf,
    ) -> Result<(), Errno> {
        let AtpService::SendRequest {
            xo,
            bitmap,
            retries,
            interval,
            user,
        } = rec
        else {
            return Err(Errno::Einval);
        };
        if data.m_length() > wire::MAX_DATA {
            return Err(Errno::Emsgsize);
        }
        if bitmap == 0 {
            return Err(Errno::Einval);
        }
        let pcb = self.pcbs.iter().find(|p| p.so == so).ok_or(Errno::Einval)?;
        if pcb.reqs.len() >= ATP_MAXREQ {
            return Err(Errno::Eagain);
        }
        let mut tid = self.next_tid;
        while pcb.reqs.iter().any(|r| r.tid == tid) {
            tid = tid.wrapping_add(1);
        }
        self.next_tid = tid.wrapping_add(1);
        let hdr = Repr::request(tid, bitmap, xo, user);
        send(k, so, dst, packet(k, &hdr, Some(data.m_copym(0, None)?))?)?;
        self.stats.requests += 1;
        let r = rounds(AtpService::interval(interval));
        let got = Default::default();
        self.pcb(so)?.reqs.push_back(OutReq {
            tid,
            dst,
            want: bitmap,
            xo,
            user,
            retries,
            rounds: r,
            left: r,
            data,
            got,
        });
        Ok(())
    }

    fn send_response<K: BsdKernel>(
        &mut self,
        k: &mut K,
        so: SockId,
        dst: SockaddrAt,
        rec: AtpService,
        data: Mbuf,
    ) -> Result<(), Errno> {
        let AtpService::SendResponse { tid, user } = rec else {
            return Err(Errno::Einval);
        };
        let len = data.m_length();
        if len > wire::MAX_DATA * wire::MAX_RESPONSES {
            return Err(Errno::Emsgsize);
        }
        let pcb = self.pcb(so)?;
        let i = pcb
            .trans
            .iter()
            .position(|t| t.src == dst && t.tid == tid && matches!(t.state, TransState::Pending))
            .ok_or(Errno::Einval)?;
        let (bitmap, xo) = (pcb.trans[i].bitmap, pcb.trans[i].xo);
        let n = len.div_ceil(wire::MAX_DATA).max(1);
        let mut segs = Vec::with_capacity(n);
        for seq in 0..n {
            let off = seq * wire::MAX_DATA;
            let piece = data.m_copym(off, Some(wire::MAX_DATA.min(len - off)))?;
            let hdr = Repr::response(tid, seq as u8, seq == n - 1, user);
            segs.push(packet(k, &hdr, Some(piece))?);
        }
        for (seq, seg) in segs.iter().enumerate() {
            if bitmap & (1 << seq) != 0 {
                send(k, so, dst, seg.m_copym(0, None)?)?;
                self.stats.responses += 1;
            }
        }
        let pcb = self.pcb(so)?;
        match xo {
            Some(t) => {
                pcb.trans[i].state = TransState::Sent(segs);
                pcb.trans[i].release_left = rounds(t.duration());
            }
            None => {
                pcb.trans.remove(i);
            }
        }
        Ok(())
    }

    fn input<K: BsdKernel>(&mut self, k: &mut K, m: Mbuf, src: SockaddrAt, so: SockId) {
        if m.m_length() < wire::HEADER_LEN {
            self.stats.malformed += 1;
            return;
        }
        let Ok(mut m) = m.m_pullup(wire::HEADER_LEN) else {
            self.stats.malformed += 1;
            return;
        };
        let mut hb = [0u8; wire::HEADER_LEN];
        hb.copy_from_slice(&m.data()[..wire::HEADER_LEN]);
        let Ok(hdr) = Header::new_checked(hb).and_then(|h| Repr::parse(&h)) else {
            self.stats.malformed += 1;
            return;
        };
        m.m_adj(wire::HEADER_LEN as isize);
        let Atp { pcbs, stats, .. } = self;
        let Some(pcb) = pcbs.iter_mut().find(|p| p.so == so) else {
            stats.no_transaction += 1;
            return;
        };
        match hdr.function {
            Function::Request => Self::request_in(k, pcb, stats, m, src, &hdr),
            Function::Response => Self::response_in(k, pcb, stats, m, src, &hdr),
            Function::Release => match pcb
                .trans
                .iter()
                .position(|t| t.src == src && t.tid == hdr.tid)
            {
                Some(i) => {
                    pcb.trans.remove(i);
                    stats.releases += 1;
                }
                None => stats.no_transaction += 1,
            },
        }
    }

    fn request_in<K: BsdKernel>(
        k: &mut K,
        pcb: &mut AtpPcb,
        stats: &mut AtpStats,
        m: Mbuf,
        src: SockaddrAt,
        hdr: &Repr,
    ) {
        let xo = hdr.xo.then(|| hdr.trel_timeout());
        if let Some(t) = pcb
            .trans
            .iter_mut()
            .find(|t| t.src == src && t.tid == hdr.tid)
        {
            stats.dup_requests += 1;
            if let TransState::Sent(segs) = &t.state {
                // Exactly once: answer from the kept responses, never the user.
                if let Some(x) = t.xo {
                    t.release_left = rounds(x.duration());
                }
                let asked = segs
                    .iter()
                    .enumerate()
                    .filter(|(seq, _)| hdr.bitmap_seq & (1 << seq) != 0);
                for (_, seg) in asked {
                    let sent = seg.m_copym(0, None).and_then(|c| send(k, pcb.so, src, c));
                    stats.responses += u64::from(sent.is_ok());
                }
            }
            return;
        }
        if pcb.trans.len() >= ATP_MAXTRANS {
            stats.table_full += 1;
            return;
        }
        let rec = AtpService::RequestInd {
            xo,
            bitmap: hdr.bitmap_seq,
            tid: hdr.tid,
            user: hdr.user_bytes,
        };
        if deliver(k, pcb.so, src, rec, m).is_err() {
            // No room: the requester will retry.
            stats.sb_full += 1;
            return;
        }
        stats.requests_in += 1;
        pcb.trans.push(InTrans {
            src,
            tid: hdr.tid,
            bitmap: hdr.bitmap_seq,
            xo,
            state: TransState::Pending,
            release_left: 0,
        });
    }

    fn response_in<K: BsdKernel>(
        k: &mut K,
        pcb: &mut AtpPcb,
        stats: &mut AtpStats,
        m: Mbuf,
        src: SockaddrAt,
        hdr: &Repr,
    ) {
        let Some(i) = pcb
            .reqs
            .iter()
            .position(|r| r.tid == hdr.tid && r.dst == src)
        else {
            stats.no_transaction += 1;
            return;
        };
        let r = &mut pcb.reqs[i];
        let seq = hdr.bitmap_seq;
        if r.want & (1 << seq) == 0 {
            stats.dup_responses += 1;
            return;
        }
        r.got[seq as usize] = Some(m);
        r.want &= !(1 << seq);
        if hdr.eom {
            // Nothing beyond the last response will come.
            r.want &= ((1u16 << (seq + 1)) - 1) as u8;
        }
        if r.want != 0 {
            return;
        }
        let Some(r) = pcb.reqs.remove(i) else {
            return;
        };
        let mut segments = 0;
        let mut all: Option<Mbuf> = None;
        for piece in r.got.into_iter().flatten() {
            segments += 1;
            match all.as_mut() {
                None => all = Some(piece),
                Some(a) => a.m_cat(piece),
            }
        }
        let Some(all) = all.or_else(|| k.m_gethdr(MbufType::Data).ok()) else {
            return;
        };
        stats.completed += 1;
        if r.xo.is_some() {
            // A lost release only means the responder's timer frees it.
            let _ =
                packet(k, &Repr::release(r.tid), None).and_then(|rel| send(k, pcb.so, r.dst, rel));
        }
        let rec = AtpService::ResponseInd {
            tid: r.tid,
            segments,
            user: r.user,
        };
        if let Err(all) = deliver(k, pcb.so, r.dst, rec, all) {
            stats.sb_full += 1;
            pcb.ready.push((r.dst, rec, all));
        }
    }

    fn timers<K: BsdKernel>(&mut self, k: &mut K) {
        let Atp { pcbs, stats, .. } = self;
        for pcb in pcbs.iter_mut() {
            let so = pcb.so;
            let mut i = 0;
            while i < pcb.reqs.len() {
                let r = &mut pcb.reqs[i];
                r.left = r.left.saturating_sub(1);
                if r.left > 0 {
                    i += 1;
                    continue;
                }
                if r.retries == 0 {
                    let Some(r) = pcb.reqs.remove(i) else {
                        break;
                    };
                    stats.failed += 1;
                    if let Ok(m) = k.m_gethdr(MbufType::Data) {
                        let rec = AtpService::RequestFailed {
                            tid: r.tid,
                            user: r.user,
                        };
                        if let Err(m) = deliver(k, so, r.dst, rec, m) {
                            pcb.ready.push((r.dst, rec, m));
                        }
                    }
                    continue;
                }
                if r.retries != RETRY_FOREVER {
                    r.retries -= 1;
                }
                r.left = r.rounds;
                // Ask again for just the responses still missing.
                let hdr = Repr::request(r.tid, r.want, r.xo, r.user);
                if let Ok(m) = r
                    .data
                    .m_copym(0, None)
                    .and_then(|d| packet(k, &hdr, Some(d)))
                {
                    let _ = send(k, so, r.dst, m);
                    stats.retries += 1;
                }
                i += 1;
            }
            pcb.deliver_ready(k);
            pcb.trans.retain_mut(|t| {
                if !matches!(t.state, TransState::Sent(_)) {
                    return true;
                }
                t.release_left = t.release_left.saturating_sub(1);
                if t.release_left == 0 {
                    stats.release_timeouts += 1;
                }
                t.release_left > 0
            });
        }
    }
}

impl<K: BsdKernel> Protosw<K> for Atp {
    fn pr_type(&self) -> SockType {
        SockType::Seqpacket
    }

    fn pr_protocol(&self) -> u8 {
        ATPROTO_ATP
    }

    fn pr_flags(&self) -> PrFlags {
        PrFlags {
            atomic: true,
            addr: true,
            connrequired: false,
        }
    }

    fn pr_name(&self) -> &'static str {
        "atp"
    }

    fn pr_input(&mut self, k: &mut K, m: Mbuf, arg: InputArg) {
        if let InputArg::Ddp { src, so, .. } = arg {
            self.input(k, m, src, so);
        }
    }

    fn pr_counters(&self) -> Vec<(&'static str, u64)> {
        self.stats.named()
    }

    fn pr_usrreq(&mut self, k: &mut K, so: SockId, req: Usrreq) -> Result<UsrreqOk, Errno> {
        match req {
            Usrreq::Attach => {
                if self.pcbs.iter().any(|p| p.so == so) {
                    return Err(Errno::Einval);
                }
                k.pr_usrreq(ATPROTO_DDP, so, Usrreq::Attach)?;
                self.pcbs.push(AtpPcb {
                    so,
                    reqs: VecDeque::new(),
                    trans: Vec::new(),
                    ready: Vec::new(),
                });
                Ok(UsrreqOk::Done)
            }
            Usrreq::Detach | Usrreq::Abort => {
                self.pcbs.retain(|p| p.so != so);
                k.pr_usrreq(ATPROTO_DDP, so, Usrreq::Detach)
            }
            Usrreq::Send { m, nam, control } => {
                let dst = nam.ok_or(Errno::Enotconn)?;
                let rec = control
                    .and_then(|c| AtpService::decode(&c.to_vec()))
                    .ok_or(Errno::Einval)?;
                match rec {
                    AtpService::SendRequest { .. } => self.send_request(k, so, dst, rec, m),
                    AtpService::SendResponse { .. } => self.send_response(k, so, dst, rec, m),
                    _ => Err(Errno::Einval),
                }
                .map(|_| UsrreqOk::Done)
            }
            Usrreq::Rcvd => {
                if let Ok(pcb) = self.pcb(so) {
                    pcb.deliver_ready(k);
                }
                Ok(UsrreqOk::Done)
            }
            Usrreq::Shutdown => Ok(UsrreqOk::Done),
            other => k.pr_usrreq(ATPROTO_DDP, so, other),
        }
    }

    fn pr_slowtimo(&mut self, k: &mut K) {
        self.timers(k);
    }
}

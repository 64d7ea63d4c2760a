//! ATP as a STREAMS module above DDP (Inside AppleTalk ch. 9): the same
//! transactions as every ATP — request and up to eight responses, the
//! bitmap/sequence number, retries, exactly-once with a release timer — in
//! the STREAMS way.
//!
//! The user speaks TPI at the head: `T_UNITDATA_REQ` whose options are an
//! [`AtpService`] record (send a request, send a response), answered by
//! `T_UNITDATA_IND`s whose options are records (a request arrived, a
//! transaction completed or failed); failures to send come back as
//! `T_UDERROR_IND` — errors are messages. ATP talks to DDP below with
//! `T_UNITDATA_REQ/IND` (DDP type 3). Indications wait on the read queue
//! for the read service procedure, which passes them up while the head has
//! room; each retry and release timer is a STREAMS `timeout`.

use std::collections::VecDeque;

use crate::appletalk::wire::atp::{self as wire, Function, Header, Repr, TRelTimeout};
use crate::atp_service::{AtpService, RETRY_FOREVER};
use crate::errno::Errno;

use super::super::kernel::{HZ, ModuleInfo, Side, StreamsKernel, StreamsModule};
use super::super::mblk::{FLUSHR, FLUSHW, Mblk, MsgType};
use super::super::tpi::{T_UNITDATA_IND, T_UNITDATA_REQ, TAddr, Tpi, unitdata, unitdata_msg};
use super::reply;

/// Outstanding requests one stream may have.
pub const ATP_MAXREQ: usize = 64;
/// Transactions one stream may be answering at once.
pub const ATP_MAXTRANS: usize = 128;
/// Timeout ids at and above this are release timers.
const RELEASE_TIMER: u32 = 1 << 16;

/// The ATP module's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AtpStats {
    /// Requests sent, first transmissions.
    pub requests: u64,
    /// Requests retransmitted by the retry timer.
    pub retries: u64,
    /// Transactions completed.
    pub completed: u64,
    /// Transactions that ran out of retries.
    pub failed: u64,
    /// Requests passed up to the user.
    pub requests_in: u64,
    /// Duplicate requests of an XO transaction.
    pub dup_requests: u64,
    /// Responses sent (retransmissions included).
    pub responses: u64,
    /// Responses for a sequence number already received.
    pub dup_responses: u64,
    /// Releases received.
    pub releases: u64,
    /// XO transactions dropped by the release timer.
    pub release_timeouts: u64,
    /// Dropped: malformed ATP packets.
    pub malformed: u64,
    /// Dropped: a response or release for no transaction.
    pub no_transaction: u64,
    /// Dropped: the transaction table was full.
    pub table_full: u64,
    /// Dropped: the read queue was over its high water mark.
    pub flow_drops: u64,
    /// `T_UDERROR_IND`s sent to the user.
    pub uderrors: u64,
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
            ("flow_drops", self.flow_drops),
            ("uderrors", self.uderrors),
        ]
    }
}

struct OutReq {
    tid: u16,
    dst: TAddr,
    want: u8,
    xo: Option<TRelTimeout>,
    user: [u8; 4],
    retries: u8,
    ticks: u64,
    data: Option<Mblk>,
    got: [Option<Mblk>; wire::MAX_RESPONSES],
}

enum TransState {
    Pending,
    Sent(Vec<Mblk>),
}

struct InTrans {
    src: TAddr,
    tid: u16,
    bitmap: u8,
    xo: Option<TRelTimeout>,
    state: TransState,
    timer: u32,
}

/// The ATP module of one stream.
#[derive(Default)]
pub struct Atp {
    /// Outstanding requests, oldest first: a queue, because replies
    /// mostly complete the oldest and a request is large (its responses
    /// held in place), so taking one out must not shift the rest.
    reqs: VecDeque<OutReq>,
    trans: Vec<InTrans>,
    next_tid: u16,
    next_timer: u32,
    /// The counters.
    pub stats: AtpStats,
}

fn trel_ticks(t: TRelTimeout) -> u64 {
    t.duration().as_secs() * HZ
}

/// An ATP packet: a header block, then `data`'s blocks shared (`dupmsg`).
fn packet<K: StreamsKernel>(k: &K, hdr: &Repr, data: Option<&Mblk>) -> Result<Mblk, Errno> {
    let mut h = k.allocb(wire::HEADER_LEN)?;
    h.put_bytes(&hdr.to_bytes());
    if let Some(d) = data.filter(|d| d.msgsize() > 0) {
        h.linkb(d.dupmsg()?);
    }
    Ok(h)
}

/// Send a packet down to DDP as `T_UNITDATA_REQ`.
fn send<K: StreamsKernel>(k: &mut K, dst: TAddr, pkt: Mblk) -> Result<(), Errno> {
    let mut mp = unitdata_msg(k.dblks(), T_UNITDATA_REQ, dst, &[wire::DDP_TYPE])?;
    mp.linkb(pkt);
    k.putnext(Side::Write, mp);
    Ok(())
}

/// Queue an indication for the user on the read side.
fn indicate<K: StreamsKernel>(
    k: &mut K,
    src: TAddr,
    rec: AtpService,
    data: Option<Mblk>,
) -> Result<(), Errno> {
    let mut mp = unitdata_msg(k.dblks(), T_UNITDATA_IND, src, &rec.encode())?;
    if let Some(d) = data {
        mp.linkb(d);
    }
    k.putq(Side::Read, mp);
    Ok(())
}

impl Atp {
    /// ATP with no transactions.
    pub fn new() -> Atp {
        Atp::default()
    }

    fn wput<K: StreamsKernel>(&mut self, k: &mut K, mut mp: Mblk) {
        match mp.mtype {
            MsgType::Flush => {
                if mp.data().first().is_some_and(|f| f & FLUSHW != 0) {
                    k.flushq(Side::Write, false);
                }
                k.putnext(Side::Write, mp);
            }
            MsgType::Proto if unitdata(&mp).is_some_and(|(p, ..)| p == T_UNITDATA_REQ) => {
                let data = mp.unlinkb();
                let Some((_, dest, opt)) = unitdata(&mp) else {
                    return;
                };
                let r = match AtpService::decode(opt) {
                    Some(rec @ AtpService::SendRequest { .. }) => {
                        self.send_request(k, dest, rec, data)
                    }
                    Some(rec @ AtpService::SendResponse { .. }) => {
                        self.send_response(k, dest, rec, data)
                    }
                    _ => Err(Errno::Einval),
                };
                if let Err(e) = r {
                    self.stats.uderrors += 1;
                    let opt = unitdata(&mp)
                        .map(|(_, _, o)| o.to_vec())
                        .unwrap_or_default();
                    reply(
                        k,
                        Side::Write,
                        &Tpi::UderrorInd {
                            dest,
                            opt,
                            error: e.number(),
                        },
                    );
                }
            }
            MsgType::Data => {
                reply(
                    k,
                    Side::Write,
                    &Tpi::error_ack(T_UNITDATA_REQ, Errno::Einval),
                );
            }
            // Binding is DDP's (it answers through our read side); the rest
            // passes on.
            _ => k.putnext(Side::Write, mp),
        }
    }

    fn send_request<K: StreamsKernel>(
        &mut self,
        k: &mut K,
        dst: TAddr,
        rec: AtpService,
        data: Option<Mblk>,
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
        if data.as_ref().map_or(0, Mblk::msgsize) > wire::MAX_DATA {
            return Err(Errno::Emsgsize);
        }
        if bitmap == 0 {
            return Err(Errno::Einval);
        }
        if self.reqs.len() >= ATP_MAXREQ {
            return Err(Errno::Eagain);
        }
        let mut tid = self.next_tid;
        while self.reqs.iter().any(|r| r.tid == tid) {
            tid = tid.wrapping_add(1);
        }
        self.next_tid = tid.wrapping_add(1);
        let pkt = packet(k, &Repr::request(tid, bitmap, xo, user), data.as_ref())?;
        send(k, dst, pkt)?;
        self.stats.requests += 1;
        let ticks = AtpService::interval(interval).as_millis() as u64 * HZ / 1000;
        k.timeout(ticks, u32::from(tid));
        self.reqs.push_back(OutReq {
            tid,
            dst,
            want: bitmap,
            xo,
            user,
            retries,
            ticks,
            data,
            got: Default::default(),
        });
        Ok(())
    }

    fn send_response<K: StreamsKernel>(
        &mut self,
        k: &mut K,
        dst: TAddr,
        rec: AtpService,
        data: Option<Mblk>,
    ) -> Result<(), Errno> {
        let AtpService::SendResponse { tid, user } = rec else {
            return Err(Errno::Einval);
        };
        let len = data.as_ref().map_or(0, Mblk::msgsize);
        if len > wire::MAX_DATA * wire::MAX_RESPONSES {
            return Err(Errno::Emsgsize);
        }
        let i = self
            .trans
            .iter()
            .position(|t| t.src == dst && t.tid == tid && matches!(t.state, TransState::Pending))
            .ok_or(Errno::Einval)?;
        let (bitmap, xo) = (self.trans[i].bitmap, self.trans[i].xo);
        let n = len.div_ceil(wire::MAX_DATA).max(1);
        let mut rest = data;
        let mut segs = Vec::with_capacity(n);
        for seq in 0..n {
            let mut seg = packet(k, &Repr::response(tid, seq as u8, seq == n - 1, user), None)?;
            if let Some(mut d) = rest.take() {
                let take = wire::MAX_DATA.min(d.msgsize());
                // This segment's bytes share the user's blocks; the tail
                // keeps the remainder.
                let mut tail = d.dupmsg()?;
                d.adjmsg(-((d.msgsize() - take) as isize));
                tail.adjmsg(take as isize);
                seg.linkb(d);
                rest = (tail.msgsize() > 0).then_some(tail);
            }
            segs.push(seg);
        }
        for (seq, seg) in segs.iter().enumerate() {
            if bitmap & (1 << seq) != 0 {
                send(k, dst, seg.dupmsg()?)?;
                self.stats.responses += 1;
            }
        }
        match xo {
            Some(t) => {
                let timer = RELEASE_TIMER + (self.next_timer % RELEASE_TIMER);
                self.next_timer = self.next_timer.wrapping_add(1);
                k.timeout(trel_ticks(t), timer);
                self.trans[i].state = TransState::Sent(segs);
                self.trans[i].timer = timer;
            }
            None => {
                self.trans.remove(i);
            }
        }
        Ok(())
    }

    fn rput<K: StreamsKernel>(&mut self, k: &mut K, mut mp: Mblk) {
        match mp.mtype {
            MsgType::Flush => {
                if mp.data().first().is_some_and(|f| f & FLUSHR != 0) {
                    k.flushq(Side::Read, false);
                }
                k.putnext(Side::Read, mp);
            }
            MsgType::Proto => match unitdata(&mp) {
                Some((T_UNITDATA_IND, src, _)) => match mp.unlinkb() {
                    Some(data) => self.input(k, src, data),
                    None => self.stats.malformed += 1,
                },
                _ => k.putnext(Side::Read, mp),
            },
            _ => k.putnext(Side::Read, mp),
        }
    }

    fn input<K: StreamsKernel>(&mut self, k: &mut K, src: TAddr, mut data: Mblk) {
        if data.pullupmsg(Some(wire::HEADER_LEN)).is_err() {
            self.stats.malformed += 1;
            return;
        }
        let Ok(hdr) =
            Header::new_checked(&data.data()[..wire::HEADER_LEN]).and_then(|h| Repr::parse(&h))
        else {
            self.stats.malformed += 1;
            return;
        };
        data.adjmsg(wire::HEADER_LEN as isize);
        match hdr.function {
            Function::Request => self.request_in(k, src, &hdr, data),
            Function::Response => self.response_in(k, src, &hdr, data),
            Function::Release => match self
                .trans
                .iter()
                .position(|t| t.src == src && t.tid == hdr.tid)
            {
                Some(i) => {
                    let t = self.trans.remove(i);
                    k.untimeout(t.timer);
                    self.stats.releases += 1;
                }
                None => self.stats.no_transaction += 1,
            },
        }
    }

    fn request_in<K: StreamsKernel>(&mut self, k: &mut K, src: TAddr, hdr: &Repr, data: Mblk) {
        if let Some(t) = self
            .trans
            .iter_mut()
            .find(|t| t.src == src && t.tid == hdr.tid)
        {
            self.stats.dup_requests += 1;
            if let (TransState::Sent(segs), Some(x)) = (&t.state, t.xo) {
                // Exactly once: answer from the kept responses; restart the
                // release timer.
                k.untimeout(t.timer);
                k.timeout(trel_ticks(x), t.timer);
                let asked = segs
                    .iter()
                    .enumerate()
                    .filter(|(seq, _)| hdr.bitmap_seq & (1 << seq) != 0);
                for (_, seg) in asked {
                    let sent = seg.dupmsg().and_then(|c| send(k, src, c));
                    self.stats.responses += u64::from(sent.is_ok());
                }
            }
            return;
        }
        if self.trans.len() >= ATP_MAXTRANS {
            self.stats.table_full += 1;
            return;
        }
        if k.qcount(Side::Read) >= self.info_hiwat() {
            // No room: the requester will retry.
            self.stats.flow_drops += 1;
            return;
        }
        let xo = hdr.xo.then(|| hdr.trel_timeout());
        let rec = AtpService::RequestInd {
            xo,
            bitmap: hdr.bitmap_seq,
            tid: hdr.tid,
            user: hdr.user_bytes,
        };
        if indicate(k, src, rec, Some(data)).is_ok() {
            self.stats.requests_in += 1;
            self.trans.push(InTrans {
                src,
                tid: hdr.tid,
                bitmap: hdr.bitmap_seq,
                xo,
                state: TransState::Pending,
                timer: 0,
            });
        }
    }

    fn info_hiwat(&self) -> usize {
        ModuleInfo::default().hiwat
    }

    fn response_in<K: StreamsKernel>(&mut self, k: &mut K, src: TAddr, hdr: &Repr, data: Mblk) {
        let Some(i) = self
            .reqs
            .iter()
            .position(|r| r.tid == hdr.tid && r.dst == src)
        else {
            self.stats.no_transaction += 1;
            return;
        };
        let r = &mut self.reqs[i];
        let seq = hdr.bitmap_seq;
        if r.want & (1 << seq) == 0 {
            self.stats.dup_responses += 1;
            return;
        }
        r.got[seq as usize] = Some(data);
        r.want &= !(1 << seq);
        if hdr.eom {
            r.want &= ((1u16 << (seq + 1)) - 1) as u8;
        }
        if r.want != 0 {
            return;
        }
        let Some(r) = self.reqs.remove(i) else {
            return;
        };
        k.untimeout(u32::from(r.tid));
        self.stats.completed += 1;
        if r.xo.is_some() {
            // A lost release only means the responder's timer frees it.
            let _ = packet(k, &Repr::release(r.tid), None).and_then(|p| send(k, r.dst, p));
        }
        let mut segments = 0;
        let mut all: Option<Mblk> = None;
        for piece in r.got.into_iter().flatten() {
            segments += 1;
            match all.as_mut() {
                None => all = Some(piece),
                Some(a) => a.linkb(piece),
            }
        }
        let _ = indicate(
            k,
            r.dst,
            AtpService::ResponseInd {
                tid: r.tid,
                segments,
                user: r.user,
            },
            all,
        );
    }

    fn retry<K: StreamsKernel>(&mut self, k: &mut K, tid: u16) {
        let Some(i) = self.reqs.iter().position(|r| r.tid == tid) else {
            return;
        };
        if self.reqs[i].retries == 0 {
            let Some(r) = self.reqs.remove(i) else {
                return;
            };
            self.stats.failed += 1;
            let _ = indicate(
                k,
                r.dst,
                AtpService::RequestFailed {
                    tid: r.tid,
                    user: r.user,
                },
                None,
            );
            return;
        }
        let r = &mut self.reqs[i];
        if r.retries != RETRY_FOREVER {
            r.retries -= 1;
        }
        // Ask again for just the responses still missing.
        let hdr = Repr::request(r.tid, r.want, r.xo, r.user);
        let (dst, ticks) = (r.dst, r.ticks);
        if packet(k, &hdr, self.reqs[i].data.as_ref())
            .and_then(|p| send(k, dst, p))
            .is_ok()
        {
            self.stats.retries += 1;
        }
        k.timeout(ticks, u32::from(tid));
    }
}

impl<K: StreamsKernel> StreamsModule<K> for Atp {
    fn name(&self) -> &'static str {
        "atp"
    }

    fn has_srv(&self, side: Side) -> bool {
        side == Side::Read
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        self.stats.named()
    }

    fn put(&mut self, k: &mut K, side: Side, mp: Mblk) {
        match side {
            Side::Write => self.wput(k, mp),
            Side::Read => self.rput(k, mp),
        }
    }

    fn srv(&mut self, k: &mut K, side: Side) {
        super::super::kernel::forward(k, side);
    }

    fn timeout(&mut self, k: &mut K, id: u32) {
        if id < RELEASE_TIMER {
            return self.retry(k, id as u16);
        }
        if let Some(i) = self
            .trans
            .iter()
            .position(|t| t.timer == id && matches!(t.state, TransState::Sent(_)))
        {
            self.trans.remove(i);
            self.stats.release_timeouts += 1;
        }
    }
}

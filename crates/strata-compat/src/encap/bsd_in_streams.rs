//! The BSD encapsulation module within STREAMS (seed 004 §4, Figure 2): an
//! unmodified BSD protocol — the very source file the native BSD subsystem
//! compiles, e.g. [`crate::bsd::netatalk::atp`] — runs as a STREAMS module.
//!
//! To the protocol the module is a BSD kernel ([`Emulation`] implements
//! [`BsdKernel`]); to its STREAMS neighbours it is a module ([`BsdModule`]
//! implements [`StreamsModule`]). What it translates (§4.1–4.2):
//!
//! - **write ↔ output, read ↔ input**: `T_UNITDATA_REQ` from above becomes
//!   `pr_usrreq(PRU_SEND)`; the protocol's calls to the layer below
//!   (`pr_output`, `if_output`) become `T_UNITDATA_REQ` or `M_DATA` sent
//!   down; `T_UNITDATA_IND`/`M_DATA` from below become `pr_input`.
//! - **TPI ↔ `pr_usrreq`**: `T_BIND_REQ` → `PRU_BIND` (answered with
//!   `T_BIND_ACK`/`T_ERROR_ACK`, or by the STREAMS module below when the
//!   protocol binds through it), `T_UNBIND_REQ` → `PRU_DISCONNECT`; a send's
//!   immediate error comes back as `T_UDERROR_IND`.
//! - **the socket layer's lower half** (§4.2.2): `sbappendaddr` fills a
//!   bounded socket buffer; `sorwakeup` empties it upstream as
//!   `T_UNITDATA_IND` (address and control data as TPI options) while the
//!   module above has room — the rest waits for the read service procedure,
//!   which back-enabling runs.
//! - **timeouts**: `pr_fasttimo` every 200 ms and `pr_slowtimo` every 500 ms
//!   from the host's own `timeout` facility, not service procedures, whose
//!   scheduling would make retransmission timing non-deterministic (§4.1.1).
//! - **initialization**: `pr_init` and `PRU_ATTACH` run at the module's open,
//!   once the stream is built (§4.1.1: deferred until the graph exists).
//! - **mbufs** are encapsulated in mblks without copying ([`super::mbuf_mblk`]).
//! - **subsystem control** with no BSD equivalent (§4.1.2's three options):
//!   `M_FLUSH` is answered — the socket buffer and queues are flushed and
//!   the message passed on; `M_START`/`M_STOP` pass through to the device,
//!   which honours them (the protocol's own sends then wait in the queues);
//!   `M_HANGUP` is passed up and told to the protocol as
//!   `pr_ctlinput(PRC_IFDOWN)`; `M_ERROR` passes up.
//! - **errors** the protocol causes downstream are not seen by it: a send
//!   the module could translate returns success (§4.1.3); one it could not
//!   (no blocks, the next queue full) returns `ENOBUFS` at once.

use std::ops::Range;
use std::sync::Arc;

use crate::bsd::kernel::BsdKernel;
use crate::bsd::mbuf::{Mbuf, MbufKind, MbufPool, MbufType, m_get, m_gethdr};
use crate::bsd::protosw::{
    InputArg, OutputArg, PrcCmd, Protosw, SockId, SockaddrAt, Usrreq, UsrreqOk,
};
use crate::bsd::socket::{SB_HIWAT, SB_MBMAX, Sockbuf};
use crate::errno::Errno;
use crate::streams::kernel::{HZ, Side, StreamsKernel, StreamsModule};
use crate::streams::mblk::{FLUSHR, FLUSHW, Mblk, MsgType, mkmsg};
use crate::streams::tpi::{
    T_BIND_REQ, T_UNBIND_REQ, T_UNITDATA_IND, T_UNITDATA_REQ, TAddr, Tpi, UNITDATA_HDR, unitdata,
    unitdata_header, unitdata_msg,
};

use super::mbuf_mblk::{MblkMbufs, into_mblk, into_mblk_split, into_mbuf};

/// Headroom a network protocol asks of the stream head (`SO_WROFF`), as
/// BSD's `max_linkhdr`: room for DDP's 13-byte header.
const MAX_HDR: u16 = 16;

/// A `T_UNITDATA_REQ` to DDP: the fixed part and one option byte (the DDP
/// type).
const REQ_LEN: usize = UNITDATA_HDR + 1;

/// The one socket a stream stands for.
pub const SO: SockId = SockId(0);
const FASTTIMO_ID: u32 = 1;
const SLOWTIMO_ID: u32 = 2;
/// `pr_fasttimo`'s period in STREAMS clock ticks (200 ms).
pub const FAST_TICKS: u64 = HZ / 5;
/// `pr_slowtimo`'s period in STREAMS clock ticks (500 ms).
pub const SLOW_TICKS: u64 = HZ / 2;

/// The module's own counters (the translations it made).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EncapStats {
    /// `T_UNITDATA_REQ` turned into `PRU_SEND`.
    pub usrreq_sends: u64,
    /// Upstream messages turned into `pr_input`.
    pub inputs: u64,
    /// Protocol calls below (`pr_output`, `if_output`) sent down.
    pub outputs: u64,
    /// Socket records sent up as `T_UNITDATA_IND`.
    pub indications: u64,
    /// Sends refused at once (`T_UDERROR_IND`).
    pub uderrors: u64,
    /// Downward calls refused: the next queue was full or no blocks.
    pub output_refused: u64,
    /// `M_FLUSH` answered.
    pub flushes: u64,
    /// Messages of no use to the protocol, dropped.
    pub dropped: u64,
}

impl EncapStats {
    /// The counters by name.
    pub fn named(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("usrreq_sends", self.usrreq_sends),
            ("inputs", self.inputs),
            ("outputs", self.outputs),
            ("indications", self.indications),
            ("uderrors", self.uderrors),
            ("output_refused", self.output_refused),
            ("flushes", self.flushes),
            ("dropped", self.dropped),
        ]
    }
}

/// A BSD protocol `P` encapsulated as a STREAMS module.
pub struct BsdModule<P> {
    pr: P,
    name: &'static str,
    ifaddr: Option<SockaddrAt>,
    sb: Sockbuf,
    mbufs: Option<MbufPool>,
    /// The module's translation counters.
    pub stats: EncapStats,
}

/// The BSD kernel the module emulates to the protocol during one call.
pub struct Emulation<'a, K: ?Sized> {
    k: &'a mut K,
    sb: &'a mut Sockbuf,
    mbufs: &'a MbufPool,
    ifaddr: Option<SockaddrAt>,
    proto: u8,
    stats: &'a mut EncapStats,
}

fn taddr(a: SockaddrAt) -> TAddr {
    TAddr::new(a.net, a.node, a.port)
}

fn sat(a: TAddr) -> SockaddrAt {
    SockaddrAt::new(a.net, a.node, a.socket)
}

/// A `T_UNITDATA_REQ`'s address and where its options lie in its block,
/// read once; `None` for any other message.
fn unitdata_req(mp: &Mblk) -> Option<(TAddr, Range<usize>)> {
    let (prim, dest, opt) = unitdata(mp)?;
    if prim != T_UNITDATA_REQ {
        return None;
    }
    let start = opt.as_ptr() as usize - mp.data().as_ptr() as usize;
    Some((dest, start..start + opt.len()))
}

impl<P> BsdModule<P> {
    /// `pr` as a STREAMS module named `name` (e.g. `"atp@bsd"`).
    pub fn new(pr: P, name: &'static str) -> BsdModule<P> {
        BsdModule {
            pr,
            name,
            ifaddr: None,
            sb: Sockbuf::new(SB_HIWAT, SB_MBMAX),
            mbufs: None,
            stats: EncapStats::default(),
        }
    }

    /// Give the protocol a network interface with address `addr` (for a
    /// network protocol like DDP, whose `if_output` goes to the device).
    pub fn with_interface(mut self, addr: SockaddrAt) -> BsdModule<P> {
        self.ifaddr = Some(addr);
        self
    }

    /// The encapsulated protocol.
    pub fn protocol(&self) -> &P {
        &self.pr
    }
}

impl<K: StreamsKernel + ?Sized> Emulation<'_, K> {
    /// `sorwakeup`'s other half: send socket records up while there is room.
    fn drain(&mut self) {
        while self.sb.records() > 0 && self.k.canputnext(Side::Read) {
            let Some(r) = self.sb.sbdroprecord() else {
                return;
            };
            self.indicate(r.from, r.m, r.control);
        }
        if self.sb.records() > 0 {
            // The read service procedure finishes when back-enabled.
            self.k.canputnext(Side::Read);
        }
    }

    /// A socket record sent up as `T_UNITDATA_IND` + data. The control
    /// mbuf (the record's options) becomes the primitive's block in place
    /// when it has room in front for the primitive (control mbufs are made
    /// with that room, [`Emulation::m_get`]); data blocks are wrapped.
    fn indicate(&mut self, from: SockaddrAt, m: Mbuf, mut control: Option<Mbuf>) {
        // The record's parts are taken one by one (not as a `Record`): each
        // move of an mbuf is a copy of its struct.
        let from = taddr(from);
        let dblks = self.k.dblks();
        let in_place = control.as_mut().is_some_and(|c| {
            let hdr = unitdata_header(T_UNITDATA_IND, from, c.m_len());
            c.next().is_none() && c.prepend_in_place(&hdr)
        });
        let ind = match control {
            Some(c) if in_place => into_mblk(self.mbufs, dblks, c, MsgType::Proto),
            c => {
                let opt = c.as_ref().map_or(&[][..], Mbuf::data);
                unitdata_msg(dblks, T_UNITDATA_IND, from, opt)
            }
        }
        .and_then(|mut ind| {
            ind.linkb(into_mblk(self.mbufs, dblks, m, MsgType::Data)?);
            Ok(ind)
        });
        match ind {
            Ok(ind) => {
                self.stats.indications += 1;
                self.k.putnext(Side::Read, ind);
            }
            Err(_) => self.stats.dropped += 1,
        }
    }

    fn send_down(&mut self, mp: Result<Mblk, Errno>) -> Result<(), Errno> {
        if !self.k.canputnext(Side::Write) {
            self.stats.output_refused += 1;
            return Err(Errno::Enobufs);
        }
        let mp = mp.inspect_err(|_| self.stats.output_refused += 1)?;
        self.stats.outputs += 1;
        self.k.putnext(Side::Write, mp);
        Ok(())
    }
}

impl<K: StreamsKernel + ?Sized> BsdKernel for Emulation<'_, K> {
    fn mbufs(&self) -> &MbufPool {
        self.mbufs
    }

    fn ticks(&self) -> u64 {
        // STREAMS and BSD both tick at 100 Hz here.
        self.k.lbolt()
    }

    fn pr_input(&mut self, _proto: u8, m: Mbuf, arg: InputArg) {
        // The protocol hands a packet to the one above, a STREAMS module.
        let src = match arg {
            InputArg::Ddp { src, .. } => src,
            InputArg::Interface { .. } => SockaddrAt::default(),
        };
        let mp =
            unitdata_msg(self.k.dblks(), T_UNITDATA_IND, taddr(src), &[]).and_then(|mut ind| {
                ind.linkb(into_mblk(self.mbufs, self.k.dblks(), m, MsgType::Data)?);
                Ok(ind)
            });
        match mp {
            Ok(ind) => self.k.putnext(Side::Read, ind),
            Err(_) => self.stats.dropped += 1,
        }
    }

    fn m_get(&self, ty: MbufType) -> Result<Mbuf, Errno> {
        let mut m = m_get(self.mbufs, ty)?;
        if ty == MbufType::Control {
            // Room for the T_UNITDATA_IND the record's control becomes.
            m.reserve_head(UNITDATA_HDR);
        }
        Ok(m)
    }

    fn m_gethdr(&self, ty: MbufType) -> Result<Mbuf, Errno> {
        // Room for the T_UNITDATA_REQ (with its one option byte, the DDP
        // type) that `pr_output` puts in front of the packet.
        let mut m = m_gethdr(self.mbufs, ty)?;
        m.reserve_head(REQ_LEN);
        Ok(m)
    }

    fn pr_output(&mut self, _proto: u8, mut m: Mbuf, arg: OutputArg) -> Result<(), Errno> {
        let dblks = self.k.dblks();
        let dst = taddr(arg.dst);
        let mut req = [0u8; REQ_LEN];
        req[..UNITDATA_HDR].copy_from_slice(&unitdata_header(T_UNITDATA_REQ, dst, 1));
        req[UNITDATA_HDR] = arg.ddp_type;
        let mp = if m.prepend_in_place(&req) {
            // The primitive in the packet's own leading space: one data
            // block read by two message blocks.
            into_mblk_split(self.mbufs, dblks, m, REQ_LEN, MsgType::Proto)
        } else {
            unitdata_msg(dblks, T_UNITDATA_REQ, dst, &[arg.ddp_type]).and_then(|mut req| {
                req.linkb(into_mblk(self.mbufs, dblks, m, MsgType::Data)?);
                Ok(req)
            })
        };
        self.send_down(mp)
    }

    fn pr_usrreq(&mut self, _proto: u8, _so: SockId, req: Usrreq) -> Result<UsrreqOk, Errno> {
        match req {
            // The stream's open is the attach below; nothing to do.
            Usrreq::Attach | Usrreq::Detach | Usrreq::Rcvd | Usrreq::Shutdown => Ok(UsrreqOk::Done),
            Usrreq::Bind(a) => {
                // The module below binds and answers with T_BIND_ACK, which
                // passes up through this module to the user.
                let mp = Tpi::BindReq { addr: taddr(a) }.to_msg(self.k.dblks());
                self.send_down(mp).map(|_| UsrreqOk::Done)
            }
            _ => Err(Errno::Eopnotsupp),
        }
    }

    fn pr_ctlinput(&mut self, _proto: u8, _cmd: PrcCmd, _addr: Option<SockaddrAt>) {}

    fn if_output(&mut self, _ifp: usize, m: Mbuf, _dst: SockaddrAt) -> Result<(), Errno> {
        let mp = into_mblk(self.mbufs, self.k.dblks(), m, MsgType::Data);
        self.send_down(mp)
    }

    fn if_address(&self, ifp: usize) -> Option<SockaddrAt> {
        self.ifaddr.filter(|_| ifp == 0)
    }

    fn if_route(&self, _dst: SockaddrAt) -> Option<usize> {
        self.ifaddr.map(|_| 0)
    }

    fn so_proto(&self, so: SockId) -> Option<u8> {
        (so == SO).then_some(self.proto)
    }

    fn sbappendaddr(
        &mut self,
        so: SockId,
        from: SockaddrAt,
        m: Mbuf,
        control: Option<Mbuf>,
    ) -> Result<(), Errno> {
        if so != SO {
            return Err(Errno::Enotconn);
        }
        if self.sb.records() == 0
            && self.sb.fits(&m, control.as_ref())
            && self.k.canputnext(Side::Read)
        {
            // Nothing queued and room above: the record goes up at once, as
            // the drain would take it (sorwakeup then finds the buffer
            // empty).
            self.indicate(from, m, control);
            return Ok(());
        }
        self.sb.sbappendaddr(from, m, control)
    }

    fn sbspace(&self, so: SockId) -> usize {
        if so == SO { self.sb.sbspace() } else { 0 }
    }

    fn sorwakeup(&mut self, _so: SockId) {
        self.drain();
    }

    fn sowwakeup(&mut self, _so: SockId) {}

    fn soerror(&mut self, _so: SockId, e: Errno) {
        if let Ok(mp) = (Tpi::UderrorInd {
            dest: TAddr::default(),
            opt: Vec::new(),
            error: e.number(),
        })
        .to_msg(self.k.dblks())
        {
            self.k.putnext(Side::Read, mp);
        }
    }
}

impl<P> BsdModule<P> {
    /// Run `f` with the protocol and the kernel emulated around the host's `k`.
    fn with<K, R>(&mut self, k: &mut K, f: impl FnOnce(&mut P, &mut Emulation<'_, K>) -> R) -> R
    where
        K: StreamsKernel + ?Sized,
        P: for<'a> Protosw<Emulation<'a, K>>,
    {
        let BsdModule {
            pr,
            sb,
            mbufs,
            ifaddr,
            stats,
            ..
        } = self;
        let mbufs = mbufs.get_or_insert_with(|| MblkMbufs::pool(k.dblks()));
        let proto = <P as Protosw<Emulation<'_, K>>>::pr_protocol(pr);
        let mut e = Emulation {
            k,
            sb,
            mbufs,
            ifaddr: *ifaddr,
            proto,
            stats,
        };
        f(pr, &mut e)
    }

    fn wput<K>(&mut self, k: &mut K, mp: Mblk)
    where
        K: StreamsKernel + ?Sized,
        P: for<'a> Protosw<Emulation<'a, K>>,
    {
        if let Some((dest, opt_at)) = unitdata_req(&mp) {
            return self.send(k, mp, dest, opt_at);
        }
        match mp.mtype {
            MsgType::Proto | MsgType::Pcproto => match Tpi::of(&mp) {
                Some(Tpi::BindReq { addr }) => {
                    match self.with(k, |pr, e| pr.pr_usrreq(e, SO, Usrreq::Bind(sat(addr)))) {
                        Ok(UsrreqOk::Addr(a)) => {
                            super::super::streams::atalk::reply(
                                k,
                                Side::Write,
                                &Tpi::BindAck { addr: taddr(a) },
                            );
                        }
                        // Bound through the module below, which answers.
                        Ok(UsrreqOk::Done) => {}
                        Err(e) => {
                            super::super::streams::atalk::reply(
                                k,
                                Side::Write,
                                &Tpi::error_ack(T_BIND_REQ, e),
                            );
                        }
                    }
                }
                Some(Tpi::UnbindReq) => {
                    let r = self.with(k, |pr, e| pr.pr_usrreq(e, SO, Usrreq::Disconnect));
                    let answer = match r {
                        Ok(_) | Err(Errno::Enotconn) => Tpi::OkAck {
                            correct_prim: T_UNBIND_REQ,
                        },
                        Err(e) => Tpi::error_ack(T_UNBIND_REQ, e),
                    };
                    super::super::streams::atalk::reply(k, Side::Write, &answer);
                }
                Some(other) => {
                    super::super::streams::atalk::reply(
                        k,
                        Side::Write,
                        &Tpi::error_ack(other.prim(), Errno::Eopnotsupp),
                    );
                }
                None => self.stats.dropped += 1,
            },
            MsgType::Flush => {
                // §4.1.2: answered, not ignored.
                self.stats.flushes += 1;
                let flag = mp.data().first().copied().unwrap_or(0);
                if flag & FLUSHW != 0 {
                    k.flushq(Side::Write, false);
                }
                if flag & FLUSHR != 0 {
                    self.sb.sbflush();
                    k.flushq(Side::Read, false);
                }
                k.putnext(Side::Write, mp);
            }
            MsgType::Data => self.stats.dropped += 1,
            // M_START/M_STOP and the rest: the device honours them.
            _ => k.putnext(Side::Write, mp),
        }
    }

    /// TPI to `pr_usrreq`: a `T_UNITDATA_REQ` becomes `PRU_SEND`, its data
    /// and options as mbufs over the same storage. The primitive is freed
    /// when the send returns, so its count moves to the control mbuf.
    fn send<K>(&mut self, k: &mut K, mut mp: Mblk, dest: TAddr, opt_at: Range<usize>)
    where
        K: StreamsKernel + ?Sized,
        P: for<'a> Protosw<Emulation<'a, K>>,
    {
        let data = mp.unlinkb();
        let r = self.with(k, |pr, e| {
            let m = match data {
                Some(d) => into_mbuf(e.mbufs, e.k.dblks(), d)?,
                None => e.m_gethdr(MbufType::Data)?,
            };
            // The options as the control mbuf, over the primitive's own
            // block (no copy).
            let (block, rptr, _) = mp.storage();
            let (block, off) = (block.clone(), rptr + opt_at.start);
            let mut c = if Arc::ptr_eq(mp.pool(), e.k.dblks()) {
                Mbuf::adopt(e.mbufs, MbufKind::Small, block, off, opt_at.len())?
            } else {
                Mbuf::wrap(e.mbufs, MbufKind::Small, block, off, opt_at.len())?
            };
            c.ty = MbufType::Control;
            e.stats.usrreq_sends += 1;
            pr.pr_usrreq(
                e,
                SO,
                Usrreq::Send {
                    m,
                    nam: Some(sat(dest)),
                    control: Some(c),
                },
            )
        });
        if let Err(e) = r {
            self.stats.uderrors += 1;
            let opt = mp.data().get(opt_at).unwrap_or_default().to_vec();
            super::super::streams::atalk::reply(
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

    fn rput<K>(&mut self, k: &mut K, mut mp: Mblk)
    where
        K: StreamsKernel + ?Sized,
        P: for<'a> Protosw<Emulation<'a, K>>,
    {
        match mp.mtype {
            // A datagram from the device: interface input.
            MsgType::Data if self.ifaddr.is_some() => {
                self.input(k, mp, InputArg::Interface { ifp: 0 })
            }
            MsgType::Proto => match unitdata(&mp) {
                Some((T_UNITDATA_IND, src, _)) => match mp.unlinkb() {
                    Some(d) => self.input(
                        k,
                        d,
                        InputArg::Ddp {
                            src: sat(src),
                            dst: SockaddrAt::default(),
                            so: SO,
                        },
                    ),
                    None => self.stats.dropped += 1,
                },
                // Acknowledgements of the bind made below, errors: the user's.
                _ => k.putnext(Side::Read, mp),
            },
            MsgType::Flush => {
                self.stats.flushes += 1;
                if mp.data().first().is_some_and(|f| f & FLUSHR != 0) {
                    self.sb.sbflush();
                    k.flushq(Side::Read, false);
                }
                k.putnext(Side::Read, mp);
            }
            MsgType::Hangup => {
                self.with(k, |pr, e| pr.pr_ctlinput(e, PrcCmd::IfDown, None));
                k.putnext(Side::Read, mp);
            }
            MsgType::Data => self.stats.dropped += 1,
            _ => k.putnext(Side::Read, mp),
        }
    }

    fn input<K>(&mut self, k: &mut K, data: Mblk, arg: InputArg)
    where
        K: StreamsKernel + ?Sized,
        P: for<'a> Protosw<Emulation<'a, K>>,
    {
        // The received buffer is handed over to the protocol as its mbuf.
        self.with(k, |pr, e| match into_mbuf(e.mbufs, e.k.dblks(), data) {
            Ok(m) => {
                e.stats.inputs += 1;
                pr.pr_input(e, m, arg);
            }
            Err(_) => e.stats.dropped += 1,
        });
    }
}

impl<K, P> StreamsModule<K> for BsdModule<P>
where
    K: StreamsKernel,
    P: for<'a> Protosw<Emulation<'a, K>> + Send,
{
    fn name(&self) -> &'static str {
        self.name
    }

    fn has_srv(&self, side: Side) -> bool {
        // The read side finishes what sorwakeup could not send up.
        side == Side::Read
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let mut c = self.stats.named();
        c.extend(self.pr.pr_counters());
        c
    }

    fn open(&mut self, k: &mut K) -> Result<(), Errno> {
        // §4.1.1: the stream exists now, so the protocol may initialise.
        self.with(k, |pr, e| {
            pr.pr_init(e);
            pr.pr_usrreq(e, SO, Usrreq::Attach)
        })?;
        k.timeout(FAST_TICKS, FASTTIMO_ID);
        k.timeout(SLOW_TICKS, SLOWTIMO_ID);
        if self.ifaddr.is_some() {
            // A network protocol prepends its header to the user's data
            // (BSD reserves `max_linkhdr` for it): ask the stream head for
            // that much write offset, so the header goes in front in place.
            if let Ok(mp) = mkmsg(k.dblks(), MsgType::Setopts, &MAX_HDR.to_be_bytes()) {
                k.putnext(Side::Read, mp);
            }
        }
        Ok(())
    }

    fn close(&mut self, k: &mut K) {
        let _ = self.with(k, |pr, e| pr.pr_usrreq(e, SO, Usrreq::Detach));
        k.untimeout(FASTTIMO_ID);
        k.untimeout(SLOWTIMO_ID);
    }

    fn put(&mut self, k: &mut K, side: Side, mp: Mblk) {
        match side {
            Side::Write => self.wput(k, mp),
            Side::Read => self.rput(k, mp),
        }
    }

    fn srv(&mut self, k: &mut K, side: Side) {
        if side == Side::Read {
            self.with(k, |_, e| e.drain());
        }
    }

    fn timeout(&mut self, k: &mut K, id: u32) {
        match id {
            FASTTIMO_ID => {
                self.with(k, |pr, e| pr.pr_fasttimo(e));
                k.timeout(FAST_TICKS, FASTTIMO_ID);
            }
            SLOWTIMO_ID => {
                self.with(k, |pr, e| pr.pr_slowtimo(e));
                k.timeout(SLOW_TICKS, SLOWTIMO_ID);
            }
            _ => {}
        }
    }
}

//! The native BSD subsystem: one domain's protocol switch, the socket
//! layer, network interfaces, the network software interrupt and the
//! fast/slow timeouts, driven by a virtual clock.
//!
//! Processing is vertical (seed 004 §4.1.3): a received frame is queued by
//! the interface (`if_input`), and the software interrupt (`netisr`) escorts
//! it up through the graph by direct calls, `pr_input` to `pr_input`; a send
//! goes down by direct calls, `pr_usrreq` to `pr_output` to `if_output`, and
//! errors return immediately to the caller.
//!
//! Rust lends a protocol to one call at a time: while a protocol runs (its
//! entry is taken out of the switch), a call back into it — DDP's input
//! handing a packet to ATP, which answers through DDP's output — is held on
//! the entry's deferred list and run the moment the entry returns, as BSD's
//! `splnet` holds a software interrupt until `splx`. A deferred output is
//! reported as accepted, the paper's "return success" for feedback that can
//! only come later (§4.1.3).

use std::collections::VecDeque;
use std::time::Duration;

use crate::errno::Errno;

use super::kernel::{BsdKernel, HZ};
use super::mbuf::{Mbuf, MbufPool, MbufType, m_devget, m_gethdr};
use super::protosw::{
    InputArg, OutputArg, PrcCmd, PrcoOp, Protosw, SockId, SockaddrAt, Usrreq, UsrreqOk,
};
use super::socket::Socket;

/// `pr_fasttimo`'s period.
pub const FASTTIMO: Duration = Duration::from_millis(200);
/// `pr_slowtimo`'s period.
pub const SLOWTIMO: Duration = Duration::from_millis(500);
/// `IFQ_MAXLEN`: frames an interface or the input queue holds.
pub const IFQ_MAXLEN: usize = 50;
/// The most calls deferred on one busy switch entry.
pub const DEFERRED_MAX: usize = 256;
/// The most sockets open at once (`maxsockets`).
pub const MAXSOCKETS: usize = 1024;

/// A protocol entry as the native subsystem holds it.
pub type NativeProtosw = Box<dyn Protosw<Bsd>>;

enum Deferred {
    Input(Mbuf, InputArg),
    Output(Mbuf, OutputArg),
    Ctlinput(PrcCmd, Option<SockaddrAt>),
}

struct Slot {
    protocol: u8,
    name: &'static str,
    pr: Option<NativeProtosw>,
    deferred: VecDeque<Deferred>,
}

/// A network interface (`struct ifnet`) with its send queue (`if_snd`).
#[derive(Debug)]
pub struct Ifnet {
    /// Its AppleTalk address (`ifaddr`); port 0.
    pub addr: SockaddrAt,
    input_proto: u8,
    if_snd: VecDeque<(SockaddrAt, Vec<u8>)>,
    /// Frames sent (`if_opackets`).
    pub opackets: u64,
    /// Frames received (`if_ipackets`).
    pub ipackets: u64,
    /// Frames dropped because `if_snd` was full (`ifq_drops`).
    pub snd_drops: u64,
}

/// The subsystem's own counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BsdStats {
    /// Received frames dropped: the input queue was full.
    pub intrq_drops: u64,
    /// Received frames dropped: no mbufs to copy them into.
    pub nombuf_drops: u64,
    /// Calls held on a busy entry and run when it returned.
    pub deferred: u64,
    /// Calls dropped: the entry's deferred list was full.
    pub deferred_drops: u64,
    /// Calls to a protocol number the switch does not have.
    pub noproto: u64,
    /// `pr_fasttimo` rounds run.
    pub fasttimo: u64,
    /// `pr_slowtimo` rounds run.
    pub slowtimo: u64,
}

/// A received record, as the upper half hands it to a user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    /// The sender.
    pub from: SockaddrAt,
    /// Control data, if any.
    pub control: Vec<u8>,
    /// The data.
    pub data: Vec<u8>,
}

/// The native BSD subsystem.
pub struct Bsd {
    slots: Vec<Slot>,
    sockets: Vec<Option<Socket>>,
    ifnet: Vec<Ifnet>,
    mbufs: MbufPool,
    now: Duration,
    next_fast: Duration,
    next_slow: Duration,
    intrq: VecDeque<(usize, Mbuf)>,
    /// The subsystem's counters.
    pub stats: BsdStats,
}

impl Bsd {
    /// A subsystem allocating from `mbufs`, its clock at zero.
    pub fn new(mbufs: MbufPool) -> Bsd {
        Bsd {
            slots: Vec::new(),
            sockets: Vec::new(),
            ifnet: Vec::new(),
            mbufs,
            now: Duration::ZERO,
            next_fast: FASTTIMO,
            next_slow: SLOWTIMO,
            intrq: VecDeque::new(),
            stats: BsdStats::default(),
        }
    }

    /// Add a protocol to the domain's switch and run its `pr_init`.
    pub fn add_protocol(&mut self, pr: NativeProtosw) {
        let slot = Slot {
            protocol: pr.pr_protocol(),
            name: pr.pr_name(),
            pr: Some(pr),
            deferred: VecDeque::new(),
        };
        self.slots.push(slot);
        let i = self.slots.len() - 1;
        self.call(i, |pr, k| pr.pr_init(k));
    }

    /// `pffindproto`: the switch entry with protocol number `proto`.
    fn find(&self, proto: u8) -> Option<usize> {
        self.slots.iter().position(|s| s.protocol == proto)
    }

    /// The counters of switch entry `proto` (empty while it runs).
    pub fn counters(&self, proto: u8) -> Vec<(&'static str, u64)> {
        self.find(proto)
            .and_then(|i| self.slots[i].pr.as_ref())
            .map(|p| p.pr_counters())
            .unwrap_or_default()
    }

    /// The protocols in the switch, by name.
    pub fn protocols(&self) -> Vec<&'static str> {
        self.slots.iter().map(|s| s.name).collect()
    }

    /// Run `f` on entry `i` (lent out for the call), then whatever was
    /// deferred on it meanwhile. `None`: the entry is busy.
    fn call<R>(
        &mut self,
        i: usize,
        f: impl FnOnce(&mut dyn Protosw<Bsd>, &mut Bsd) -> R,
    ) -> Option<R> {
        let mut pr = self.slots[i].pr.take()?;
        let r = f(pr.as_mut(), self);
        self.slots[i].pr = Some(pr);
        self.run_deferred(i);
        Some(r)
    }

    fn run_deferred(&mut self, i: usize) {
        while let Some(d) = self.slots[i].deferred.pop_front() {
            let Some(mut pr) = self.slots[i].pr.take() else {
                return;
            };
            match d {
                Deferred::Input(m, arg) => pr.pr_input(self, m, arg),
                Deferred::Output(m, arg) => {
                    // Its caller was told "accepted"; a later failure is the
                    // protocol's to count.
                    let _ = pr.pr_output(self, m, arg);
                }
                Deferred::Ctlinput(cmd, addr) => pr.pr_ctlinput(self, cmd, addr),
            }
            self.slots[i].pr = Some(pr);
        }
    }

    fn defer(&mut self, i: usize, d: Deferred) {
        if self.slots[i].deferred.len() >= DEFERRED_MAX {
            self.stats.deferred_drops += 1;
            return;
        }
        self.stats.deferred += 1;
        self.slots[i].deferred.push_back(d);
    }

    /// Attach an interface with address `addr`; frames it receives go to
    /// the switch entry `input_proto` (DDP).
    pub fn if_attach(&mut self, addr: SockaddrAt, input_proto: u8) -> usize {
        self.ifnet.push(Ifnet {
            addr,
            input_proto,
            if_snd: VecDeque::new(),
            opackets: 0,
            ipackets: 0,
            snd_drops: 0,
        });
        self.ifnet.len() - 1
    }

    /// The interfaces.
    pub fn interfaces(&self) -> &[Ifnet] {
        &self.ifnet
    }

    /// The device received a frame on `ifp`: copy it into mbufs and queue it
    /// for the software interrupt (dropped and counted when full).
    pub fn if_input(&mut self, ifp: usize, frame: &[u8]) {
        if ifp >= self.ifnet.len() {
            return;
        }
        if self.intrq.len() >= IFQ_MAXLEN {
            self.stats.intrq_drops += 1;
            return;
        }
        match m_devget(&self.mbufs, frame, Some(ifp)) {
            Ok(m) => {
                self.ifnet[ifp].ipackets += 1;
                self.intrq.push_back((ifp, m));
            }
            Err(_) => self.stats.nombuf_drops += 1,
        }
    }

    /// The device takes the next frame to send from `ifp`: the destination
    /// address and the datagram's bytes.
    pub fn if_dequeue(&mut self, ifp: usize) -> Option<(SockaddrAt, Vec<u8>)> {
        self.ifnet.get_mut(ifp)?.if_snd.pop_front()
    }

    /// The software interrupt: escort every queued frame up the graph.
    pub fn netisr(&mut self) {
        while let Some((ifp, m)) = self.intrq.pop_front() {
            let proto = self.ifnet[ifp].input_proto;
            BsdKernel::pr_input(self, proto, m, InputArg::Interface { ifp });
        }
    }

    /// The virtual clock.
    pub fn now(&self) -> Duration {
        self.now
    }

    /// Advance the clock to `now`, running the software interrupt and every
    /// `pr_fasttimo` (200 ms) and `pr_slowtimo` (500 ms) round that falls due,
    /// in time order.
    pub fn advance_to(&mut self, now: Duration) {
        self.netisr();
        while self.next_fast.min(self.next_slow) <= now {
            if self.next_fast <= self.next_slow {
                self.now = self.next_fast;
                self.next_fast += FASTTIMO;
                self.stats.fasttimo += 1;
                for i in 0..self.slots.len() {
                    self.call(i, |pr, k| pr.pr_fasttimo(k));
                }
            } else {
                self.now = self.next_slow;
                self.next_slow += SLOWTIMO;
                self.stats.slowtimo += 1;
                for i in 0..self.slots.len() {
                    self.call(i, |pr, k| pr.pr_slowtimo(k));
                }
            }
            self.netisr();
        }
        self.now = self.now.max(now);
    }

    /// `socreate`: a socket of protocol `proto` (`PRU_ATTACH`).
    pub fn socreate(&mut self, proto: u8) -> Result<SockId, Errno> {
        self.find(proto).ok_or(Errno::Eopnotsupp)?;
        let so = match self.sockets.iter().position(Option::is_none) {
            Some(i) => SockId(i),
            None if self.sockets.len() < MAXSOCKETS => {
                self.sockets.push(None);
                SockId(self.sockets.len() - 1)
            }
            None => return Err(Errno::Enobufs),
        };
        self.sockets[so.0] = Some(Socket::new(proto));
        if let Err(e) = self.usrreq(so, Usrreq::Attach) {
            self.sockets[so.0] = None;
            return Err(e);
        }
        Ok(so)
    }

    fn usrreq(&mut self, so: SockId, req: Usrreq) -> Result<UsrreqOk, Errno> {
        let proto = self.socket(so).ok_or(Errno::Einval)?.proto;
        BsdKernel::pr_usrreq(self, proto, so, req)
    }

    /// `sobind`: bind a local address (port 0: the protocol picks one).
    pub fn sobind(&mut self, so: SockId, addr: SockaddrAt) -> Result<UsrreqOk, Errno> {
        self.usrreq(so, Usrreq::Bind(addr))
    }

    /// `sosend`: copy `data` (and `control`) into mbufs and pass them to the
    /// protocol; its error returns at once.
    pub fn sosend(
        &mut self,
        so: SockId,
        data: &[u8],
        nam: Option<SockaddrAt>,
        control: Option<&[u8]>,
    ) -> Result<(), Errno> {
        let mut m = m_gethdr(&self.mbufs, MbufType::Data)?;
        m.m_append(data)?;
        let control = match control {
            Some(c) => {
                let mut cm = m_gethdr(&self.mbufs, MbufType::Control)?;
                cm.m_append(c)?;
                Some(cm)
            }
            None => None,
        };
        self.usrreq(so, Usrreq::Send { m, nam, control })
            .map(|_| ())
    }

    /// `soreceive`: the next record, or the latched error; tells the
    /// protocol (`PRU_RCVD`) that buffer space was freed.
    pub fn soreceive(&mut self, so: SockId) -> Result<Option<Received>, Errno> {
        let sock = self
            .sockets
            .get_mut(so.0)
            .and_then(Option::as_mut)
            .ok_or(Errno::Einval)?;
        if let Some(r) = sock.so_rcv.sbdroprecord() {
            let got = Received {
                from: r.from,
                control: r.control.map(|c| c.to_vec()).unwrap_or_default(),
                data: r.m.to_vec(),
            };
            let _ = self.usrreq(so, Usrreq::Rcvd);
            return Ok(Some(got));
        }
        match sock.so_error.take() {
            Some(e) => Err(e),
            None => Ok(None),
        }
    }

    /// `soclose`: detach the socket from its protocol and free it.
    pub fn soclose(&mut self, so: SockId) -> Result<(), Errno> {
        let r = self.usrreq(so, Usrreq::Detach);
        if let Some(s) = self.sockets.get_mut(so.0) {
            *s = None;
        }
        r.map(|_| ())
    }

    /// `getsockopt`/`setsockopt` through `pr_ctloutput`.
    pub fn sockopt(&mut self, so: SockId, op: PrcoOp, name: u32) -> Result<i64, Errno> {
        let proto = self.socket(so).ok_or(Errno::Einval)?.proto;
        let i = self.find(proto).ok_or(Errno::Eopnotsupp)?;
        self.call(i, |pr, k| pr.pr_ctloutput(k, so, op, name))
            .unwrap_or(Err(Errno::Ewouldblock))
    }

    /// The socket `so`, if open.
    pub fn socket(&self, so: SockId) -> Option<&Socket> {
        self.sockets.get(so.0).and_then(Option::as_ref)
    }
}

impl BsdKernel for Bsd {
    fn mbufs(&self) -> &MbufPool {
        &self.mbufs
    }

    fn ticks(&self) -> u64 {
        (self.now.as_millis() as u64) * HZ / 1000
    }

    fn pr_input(&mut self, proto: u8, m: Mbuf, arg: InputArg) {
        let Some(i) = self.find(proto) else {
            self.stats.noproto += 1;
            return;
        };
        if self.slots[i].pr.is_none() {
            return self.defer(i, Deferred::Input(m, arg));
        }
        self.call(i, |pr, k| pr.pr_input(k, m, arg));
    }

    fn pr_output(&mut self, proto: u8, m: Mbuf, arg: OutputArg) -> Result<(), Errno> {
        let Some(i) = self.find(proto) else {
            self.stats.noproto += 1;
            return Err(Errno::Eopnotsupp);
        };
        if self.slots[i].pr.is_none() {
            self.defer(i, Deferred::Output(m, arg));
            return Ok(());
        }
        self.call(i, |pr, k| pr.pr_output(k, m, arg))
            .unwrap_or(Err(Errno::Ewouldblock))
    }

    fn pr_usrreq(&mut self, proto: u8, so: SockId, req: Usrreq) -> Result<UsrreqOk, Errno> {
        let Some(i) = self.find(proto) else {
            self.stats.noproto += 1;
            return Err(Errno::Eopnotsupp);
        };
        // A request needs its answer now: a busy entry cannot take it.
        self.call(i, |pr, k| pr.pr_usrreq(k, so, req))
            .unwrap_or(Err(Errno::Ewouldblock))
    }

    fn pr_ctlinput(&mut self, proto: u8, cmd: PrcCmd, addr: Option<SockaddrAt>) {
        let Some(i) = self.find(proto) else {
            self.stats.noproto += 1;
            return;
        };
        if self.slots[i].pr.is_none() {
            return self.defer(i, Deferred::Ctlinput(cmd, addr));
        }
        self.call(i, |pr, k| pr.pr_ctlinput(k, cmd, addr));
    }

    fn if_output(&mut self, ifp: usize, m: Mbuf, dst: SockaddrAt) -> Result<(), Errno> {
        let ifnet = self.ifnet.get_mut(ifp).ok_or(Errno::Ehostunreach)?;
        if ifnet.if_snd.len() >= IFQ_MAXLEN {
            ifnet.snd_drops += 1;
            return Err(Errno::Enobufs);
        }
        // The device copies the chain out (its DMA); the mbufs are freed.
        ifnet.if_snd.push_back((dst, m.to_vec()));
        ifnet.opackets += 1;
        Ok(())
    }

    fn if_address(&self, ifp: usize) -> Option<SockaddrAt> {
        self.ifnet.get(ifp).map(|i| i.addr)
    }

    fn if_route(&self, dst: SockaddrAt) -> Option<usize> {
        self.ifnet
            .iter()
            .position(|i| i.addr.net == dst.net)
            .or(if self.ifnet.is_empty() { None } else { Some(0) })
    }

    fn so_proto(&self, so: SockId) -> Option<u8> {
        self.socket(so).map(|s| s.proto)
    }

    fn sbappendaddr(
        &mut self,
        so: SockId,
        from: SockaddrAt,
        m: Mbuf,
        control: Option<Mbuf>,
    ) -> Result<(), Errno> {
        let sock = self
            .sockets
            .get_mut(so.0)
            .and_then(Option::as_mut)
            .ok_or(Errno::Enotconn)?;
        sock.so_rcv.sbappendaddr(from, m, control)
    }

    fn sbspace(&self, so: SockId) -> usize {
        self.socket(so).map_or(0, |s| s.so_rcv.sbspace())
    }

    fn sorwakeup(&mut self, so: SockId) {
        if let Some(s) = self.sockets.get_mut(so.0).and_then(Option::as_mut) {
            s.rwakeups += 1;
        }
    }

    fn sowwakeup(&mut self, so: SockId) {
        if let Some(s) = self.sockets.get_mut(so.0).and_then(Option::as_mut) {
            s.wwakeups += 1;
        }
    }

    fn soerror(&mut self, so: SockId, e: Errno) {
        if let Some(s) = self.sockets.get_mut(so.0).and_then(Option::as_mut) {
            s.so_error = Some(e);
            s.rwakeups += 1;
        }
    }
}

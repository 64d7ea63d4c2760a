//! The protocol switch (4.4BSD `sys/protosw.h`) and the AppleTalk domain's
//! addresses.
//!
//! A BSD protocol is an entry in its domain's switch table: the subsystem
//! and the other protocols reach it only through these entry points. Here
//! an entry is a value implementing [`Protosw`] for the kernel interface `K`
//! it calls; the same protocol source compiles for every `K` that provides
//! that interface (the native subsystem, or an encapsulation module).

use crate::errno::Errno;

use super::mbuf::Mbuf;

/// An AppleTalk socket address (`struct sockaddr_at`): network, node, socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SockaddrAt {
    /// `sat_addr.s_net`.
    pub net: u16,
    /// `sat_addr.s_node` (255 is broadcast).
    pub node: u8,
    /// `sat_port`: the DDP socket number.
    pub port: u8,
}

impl SockaddrAt {
    /// An address.
    pub fn new(net: u16, node: u8, port: u8) -> SockaddrAt {
        SockaddrAt { net, node, port }
    }
}

/// A socket's index in the socket layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SockId(pub usize);

/// `pr_type`: the socket type a protocol serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SockType {
    /// `SOCK_DGRAM`.
    Dgram,
    /// `SOCK_RAW`.
    Raw,
    /// `SOCK_SEQPACKET` (ATP's transactions: records, reliable).
    Seqpacket,
}

/// `pr_flags`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PrFlags {
    /// `PR_ATOMIC`: each send is one record.
    pub atomic: bool,
    /// `PR_ADDR`: addresses are given with sends and delivered with data.
    pub addr: bool,
    /// `PR_CONNREQUIRED`.
    pub connrequired: bool,
}

/// `pr_usrreq` requests (`PRU_*`), with their arguments.
#[derive(Debug)]
pub enum Usrreq {
    /// `PRU_ATTACH`: a socket was created for this protocol.
    Attach,
    /// `PRU_DETACH`: the socket is being closed.
    Detach,
    /// `PRU_BIND`: bind a local address (port 0: choose one).
    Bind(SockaddrAt),
    /// `PRU_CONNECT`: fix the peer address.
    Connect(SockaddrAt),
    /// `PRU_DISCONNECT`.
    Disconnect,
    /// `PRU_SEND`: data, an optional destination, optional control.
    Send {
        /// The data.
        m: Mbuf,
        /// The destination (`nam`), when not connected.
        nam: Option<SockaddrAt>,
        /// Control (ancillary) data, an `MT_CONTROL` mbuf.
        control: Option<Mbuf>,
    },
    /// `PRU_RCVD`: the user took data from the receive buffer.
    Rcvd,
    /// `PRU_SHUTDOWN`: no more sends.
    Shutdown,
    /// `PRU_ABORT`.
    Abort,
    /// `PRU_SOCKADDR`: the local address.
    Sockaddr,
    /// `PRU_PEERADDR`: the peer address.
    Peeraddr,
}

impl Usrreq {
    /// The request's `PRU_*` name.
    pub fn name(&self) -> &'static str {
        match self {
            Usrreq::Attach => "PRU_ATTACH",
            Usrreq::Detach => "PRU_DETACH",
            Usrreq::Bind(_) => "PRU_BIND",
            Usrreq::Connect(_) => "PRU_CONNECT",
            Usrreq::Disconnect => "PRU_DISCONNECT",
            Usrreq::Send { .. } => "PRU_SEND",
            Usrreq::Rcvd => "PRU_RCVD",
            Usrreq::Shutdown => "PRU_SHUTDOWN",
            Usrreq::Abort => "PRU_ABORT",
            Usrreq::Sockaddr => "PRU_SOCKADDR",
            Usrreq::Peeraddr => "PRU_PEERADDR",
        }
    }
}

/// What a successful `pr_usrreq` returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsrreqOk {
    /// Done.
    Done,
    /// An address (`PRU_SOCKADDR`, `PRU_PEERADDR`, and `PRU_BIND` of port 0).
    Addr(SockaddrAt),
}

/// `pr_ctlinput` commands (`PRC_*`) that AppleTalk uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrcCmd {
    /// `PRC_IFDOWN`: an interface went down.
    IfDown,
    /// `PRC_HOSTDEAD`: a peer is unreachable.
    HostDead,
    /// `PRC_MSGSIZE`: a message was too large for the path.
    MsgSize,
}

/// `pr_ctloutput` operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrcoOp {
    /// `PRCO_GETOPT`.
    Getopt,
    /// `PRCO_SETOPT` with the value.
    Setopt(i64),
}

/// The argument `pr_input` receives with the packet: BSD protocols pass
/// different things down this call; these are AppleTalk's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputArg {
    /// From a network interface (DDP's input from the link).
    Interface {
        /// The receiving interface.
        ifp: usize,
    },
    /// From DDP to the protocol above, for socket `so`.
    Ddp {
        /// The datagram's source.
        src: SockaddrAt,
        /// Its destination.
        dst: SockaddrAt,
        /// The socket the destination port is bound to.
        so: SockId,
    },
}

/// The argument `pr_output` receives: from a protocol above to DDP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputArg {
    /// The sending socket (DDP takes the source port from its pcb).
    pub so: SockId,
    /// The destination.
    pub dst: SockaddrAt,
    /// The DDP type of the protocol above (ATP: 3).
    pub ddp_type: u8,
}

/// A protocol switch entry: the entry points through which the subsystem
/// and other protocols call a BSD protocol, for kernel interface `K`.
pub trait Protosw<K: ?Sized>: Send {
    /// `pr_type`.
    fn pr_type(&self) -> SockType;
    /// `pr_protocol`: the number the domain finds it by.
    fn pr_protocol(&self) -> u8;
    /// `pr_flags`.
    fn pr_flags(&self) -> PrFlags;
    /// The protocol's name, for counters and errors.
    fn pr_name(&self) -> &'static str;
    /// `pr_init`: once, when the domain is initialised.
    fn pr_init(&mut self, _k: &mut K) {}
    /// `pr_input`: a packet from below.
    fn pr_input(&mut self, k: &mut K, m: Mbuf, arg: InputArg);
    /// `pr_output`: a packet from above.
    fn pr_output(&mut self, _k: &mut K, _m: Mbuf, _arg: OutputArg) -> Result<(), Errno> {
        Err(Errno::Eopnotsupp)
    }
    /// `pr_usrreq`: a request from the socket layer.
    fn pr_usrreq(&mut self, k: &mut K, so: SockId, req: Usrreq) -> Result<UsrreqOk, Errno>;
    /// `pr_ctlinput`: control from below.
    fn pr_ctlinput(&mut self, _k: &mut K, _cmd: PrcCmd, _addr: Option<SockaddrAt>) {}
    /// `pr_ctloutput`: socket options.
    fn pr_ctloutput(
        &mut self,
        _k: &mut K,
        _so: SockId,
        _op: PrcoOp,
        _name: u32,
    ) -> Result<i64, Errno> {
        Err(Errno::Eopnotsupp)
    }
    /// `pr_fasttimo`: every 200 ms.
    fn pr_fasttimo(&mut self, _k: &mut K) {}
    /// `pr_slowtimo`: every 500 ms.
    fn pr_slowtimo(&mut self, _k: &mut K) {}
    /// The protocol's counters, by name (what `netstat -s` prints).
    fn pr_counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
    /// `pr_drain`: give back buffers, the pool is short.
    fn pr_drain(&mut self, _k: &mut K) {}
}

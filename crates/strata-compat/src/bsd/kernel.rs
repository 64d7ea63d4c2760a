//! The BSD kernel interface: everything a BSD protocol calls.
//!
//! A protocol written for BSD is generic over [`BsdKernel`]: mbuf
//! allocation, the clock, direct calls into other protocols through the
//! protocol switch, the network interfaces, and the socket layer's lower
//! half. The native subsystem ([`super::Bsd`]) implements it; so does each
//! encapsulation module that imports BSD protocols into another subsystem.
//! That is what makes "unmodified" structural: the protocol's source file is
//! compiled against this trait only, and every host supplies an
//! implementation (seed 004 §3: the module emulates the target subsystem).

use crate::errno::Errno;

use super::mbuf::{Mbuf, MbufPool, MbufType, m_get, m_getcl, m_gethdr};
use super::protosw::{InputArg, OutputArg, PrcCmd, SockId, SockaddrAt, Usrreq, UsrreqOk};

/// The clock rate of `ticks` (BSD's `hz`).
pub const HZ: u64 = 100;

/// The services a BSD protocol calls.
pub trait BsdKernel {
    /// The mbuf pool the protocol allocates from.
    fn mbufs(&self) -> &MbufPool;

    /// `ticks`: clock ticks (at [`HZ`]) since boot.
    fn ticks(&self) -> u64;

    /// `m_get`.
    fn m_get(&self, ty: MbufType) -> Result<Mbuf, Errno> {
        m_get(self.mbufs(), ty)
    }

    /// `m_gethdr`.
    fn m_gethdr(&self, ty: MbufType) -> Result<Mbuf, Errno> {
        m_gethdr(self.mbufs(), ty)
    }

    /// `m_getcl`.
    fn m_getcl(&self, ty: MbufType, pkthdr: bool) -> Result<Mbuf, Errno> {
        m_getcl(self.mbufs(), ty, pkthdr)
    }

    /// The switch entry `proto`'s `pr_input` (a protocol calling the one above).
    fn pr_input(&mut self, proto: u8, m: Mbuf, arg: InputArg);

    /// The switch entry `proto`'s `pr_output` (a protocol calling the one below).
    fn pr_output(&mut self, proto: u8, m: Mbuf, arg: OutputArg) -> Result<(), Errno>;

    /// The switch entry `proto`'s `pr_usrreq` (a protocol asking the one
    /// below on behalf of a socket, e.g. ATP binding its DDP socket).
    fn pr_usrreq(&mut self, proto: u8, so: SockId, req: Usrreq) -> Result<UsrreqOk, Errno>;

    /// The switch entry `proto`'s `pr_ctlinput`.
    fn pr_ctlinput(&mut self, proto: u8, cmd: PrcCmd, addr: Option<SockaddrAt>);

    /// `(*ifp->if_output)`: send a datagram on interface `ifp` to `dst`.
    fn if_output(&mut self, ifp: usize, m: Mbuf, dst: SockaddrAt) -> Result<(), Errno>;

    /// The interface's AppleTalk address (`ifaddr`), port 0.
    fn if_address(&self, ifp: usize) -> Option<SockaddrAt>;

    /// The interface to reach `dst` on (BSD's route lookup; AppleTalk
    /// without routers: the interface on `dst`'s network, else the first).
    fn if_route(&self, dst: SockaddrAt) -> Option<usize>;

    /// `so->so_proto->pr_protocol`: the protocol a socket was created for
    /// (DDP hands a datagram to that protocol's `pr_input`).
    fn so_proto(&self, so: SockId) -> Option<u8>;

    /// `sbappendaddr`: append a record (address, control, data) to the
    /// socket's receive buffer; fails when the buffer has no space.
    fn sbappendaddr(
        &mut self,
        so: SockId,
        from: SockaddrAt,
        m: Mbuf,
        control: Option<Mbuf>,
    ) -> Result<(), Errno>;

    /// `sbspace`: room left in the socket's receive buffer.
    fn sbspace(&self, so: SockId) -> usize;

    /// `sorwakeup`: data is ready for the socket's reader.
    fn sorwakeup(&mut self, so: SockId);

    /// `sowwakeup`: the socket's writer may send again.
    fn sowwakeup(&mut self, so: SockId);

    /// Latch an error on the socket (`so->so_error`) and wake its reader.
    fn soerror(&mut self, so: SockId, e: Errno);
}

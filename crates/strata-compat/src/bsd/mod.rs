//! The BSD protocol subsystem (4.3/4.4BSD networking), written the way BSD
//! is, as one of seed 004's two foreign subsystems (§4, Figures 2–3).
//!
//! - [`protosw`]: the protocol switch — a protocol is reached only through
//!   `pr_input`, `pr_output`, `pr_usrreq`, `pr_ctlinput`, `pr_ctloutput`,
//!   `pr_init`, `pr_fasttimo` (200 ms) and `pr_slowtimo` (500 ms).
//! - [`mbuf`]: mbuf chains of small mbufs and shared clusters from a
//!   bounded, counted pool.
//! - [`socket`]: the socket layer's lower half (`sbappendaddr`, bounded
//!   socket buffers).
//! - [`kernel`]: [`BsdKernel`], everything a BSD protocol calls. A protocol
//!   is generic over it, so its one source file runs wherever an
//!   implementation exists.
//! - [`system`]: the native subsystem — vertical processing by direct calls,
//!   immediate errors, a virtual clock driving the timeouts.

pub mod kernel;
pub mod mbuf;
pub mod netatalk;
pub mod protosw;
pub mod socket;
pub mod system;

pub use kernel::BsdKernel;
pub use mbuf::{Mbuf, MbufPool, MbufType, NativeMbufs};
pub use protosw::{InputArg, OutputArg, Protosw, SockId, SockaddrAt, Usrreq, UsrreqOk};
pub use system::{Bsd, Received};

#[cfg(test)]
mod tests;

//! The STREAMS protocol subsystem (SVR4 / Solaris 2), written the way
//! STREAMS is, as the second of seed 004's foreign subsystems (§4).
//!
//! - [`mblk`]: messages — `mblk_t` blocks over shared, reference-counted
//!   data blocks from a bounded pool; the message types that matter.
//! - [`queue`]: queues with high and low water marks.
//! - [`kernel`]: [`StreamsKernel`], what a module's put and service
//!   procedures call (`putnext`, `putq`, `getq`, `canputnext`, `qreply`,
//!   `timeout` …), and [`StreamsModule`], the module itself. A module is
//!   generic over the kernel, so its one source file runs wherever an
//!   implementation exists.
//! - [`tpi`]: the Transport Provider Interface primitives, laid out as
//!   their C structures.
//! - [`stream`]: the native subsystem — head, pushed modules (`I_PUSH`,
//!   `I_POP`), device end, service scheduler with back-enabling, timeouts
//!   on a virtual clock; errors travel as messages.

pub mod atalk;
pub mod kernel;
pub mod mblk;
pub mod queue;
pub mod stream;
pub mod tpi;

pub use kernel::{ModuleInfo, Side, StreamsKernel, StreamsModule};
pub use mblk::{DblkPool, Dblks, Mblk, MsgType, allocb, esballoc, mkmsg};
pub use stream::Stream;
pub use tpi::{TAddr, Tpi};

#[cfg(test)]
mod tests;

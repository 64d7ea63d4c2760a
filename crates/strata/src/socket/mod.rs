//! Socket-like handles for ordinary blocking Rust code. Each is an in-engine
//! application on the engine's thread plus a bounded channel to the caller's
//! thread; calls cross through an [`EngineHandle`](strata_link::EngineHandle).

mod udp;

pub use udp::UdpSocket;

//! Socket-like handles for ordinary blocking Rust code. Each is an in-engine
//! application on the engine's thread plus bounded channels to the caller's
//! thread; calls cross through an [`EngineHandle`](strata_link::EngineHandle).

mod tcp;
mod udp;

use std::io;

use strata_core::UpiError;

pub use tcp::{DEFAULT_BACKLOG, TcpListener, TcpStream};
pub use udp::UdpSocket;

/// A UPI error as the `std::io` error a socket user expects.
fn io_error(e: UpiError) -> io::Error {
    let kind = match e {
        UpiError::InUse => io::ErrorKind::AddrInUse,
        UpiError::Unreachable => io::ErrorKind::HostUnreachable,
        UpiError::Refused => io::ErrorKind::ConnectionRefused,
        UpiError::TimedOut => io::ErrorKind::TimedOut,
        UpiError::BadParticipant(_) => io::ErrorKind::InvalidInput,
        _ => io::ErrorKind::Other,
    };
    io::Error::new(kind, e)
}

/// The engine behind a handle has stopped.
fn stopped() -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, "the host has stopped")
}

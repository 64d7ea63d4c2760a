//! [`TcpListener`] and [`TcpStream`]: `std::net`'s TCP shapes over a Strata
//! host, for blocking code.
//!
//! Each listener, and each stream it did not accept, is an application in
//! the engine (`app`) that speaks TCP's application interface — `tcp::Write`
//! and `Writable` for sending, manual receive flow control with
//! `tcp::Consumed` for receiving — and the handle (`listener`, `stream`) talks
//! to it through bounded channels and `EngineHandle` jobs.

mod app;
mod listener;
mod stream;

pub use listener::{DEFAULT_BACKLOG, TcpListener};
pub use stream::TcpStream;

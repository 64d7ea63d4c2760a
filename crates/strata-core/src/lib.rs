//! # strata-core
//!
//! The x-kernel protocol model in Rust: messages, the uniform protocol interface
//! (UPI), the protocol graph, and the engine that runs a graph under one of seed
//! 000's three dispatch architectures — LLM, DAA or ILLM — without changing any
//! protocol's code. This crate does no I/O: drivers and the simulator feed an
//! [`Engine`] frames and time, and take frames back.
//!
//! Where to start reading:
//! - [`upi`] — the [`Protocol`] trait and the demux/pop split everything rests on;
//! - [`message`] — the [`Message`] every layer pushes headers onto and pops them off;
//! - [`engine`] — how queued work, timers and the architectures run;
//! - [`graph`] — configs, the registry of protocol factories, the number table.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod app;
pub mod arch;
pub mod checksum;
pub mod control;
pub mod counters;
pub mod cx;
pub mod engine;
pub mod error;
pub mod graph;
pub mod ids;
pub mod ilp;
pub mod message;
pub mod meta;
pub mod participant;
pub mod time;
pub mod units;
pub mod upi;

pub use app::{App, AppEvent};
pub use arch::Arch;
pub use control::{Control, Reply};
pub use counters::{CONSUMED, Counters, DELIVERED, DropReason};
pub use cx::{AppCx, Cx};
pub use engine::{Engine, EngineConfig, LinkStats};
pub use error::UpiError;
pub use graph::{GraphConfig, GraphError, Registry};
pub use ids::{AppId, LinkId, PathId, ProtoId, SessionId, SessionRef, TimerId, Upper};
pub use message::Message;
pub use meta::{HwAddr, PacketMeta, Priority, Record, RecordKind, RecordsFull};
pub use participant::{Addr, Participant, Participants};
pub use time::Instant;
pub use upi::{Demux, Next, Open, Protocol, Qos, Target, Up};

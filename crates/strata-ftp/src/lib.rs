//! # strata-ftp
//!
//! FTP for seed 001's application example (§5 of the paper): the paper changed
//! the data connection of an ftp client and server to use its transport and
//! kept the control connection on TCP. This crate is that pair:
//!
//! - [`server`] — an FTP server (RFC 959 control connection, passive data
//!   connections by `PASV` and RFC 2428's `EPSV`) serving one folder to
//!   anonymous users, with every path confined to the folder ([`vpath`]);
//! - [`client`] — a client that gets and puts files against any FTP server;
//! - [`transport`] — the data connection over seed 001's transport
//!   (`XPSV`), the paper's change to ftp and ftpd.
//!
//! Both run on the kernel's sockets (std::net), as the paper's ftp and ftpd
//! ran on the host's, or wholly on a Strata host's own stack ([`net::Via`]).
//! Start with [`server::Server`] and [`client::Client`]; `strata ftpd` and
//! `strata ftp` are thin commands over them.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod client;
pub mod command;
mod copy;
pub mod listing;
pub mod net;
pub mod server;
pub mod transport;
pub mod vpath;

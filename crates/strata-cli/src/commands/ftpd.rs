//! `strata ftpd`: an FTP server for one folder (seed 001 §5's ftpd).

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use std::sync::atomic::AtomicBool;

use anyhow::{Context, Result};
use strata::HostBuilder;
use strata::link::RuntimeThread;
use strata::xport_stack::KIND;
use strata_ftp::net::Via;
use strata_ftp::server::{Config, Server};
use strata_ftp::transport::Transport;

use super::tcp_send::{duration, interrupt_flag};
use super::xport_stack::StackArgs;

/// Serve a folder over FTP to anonymous users.
///
/// Paths are confined to DIR: `/` is DIR, `..` above it and symlinks leading
/// out of it are refused. Data connections are passive: TCP (PASV, EPSV) for
/// every client, and seed 001's transport (XPSV) for `strata ftp`. Prints
/// "ready" once listening; SIGINT or SIGTERM prints the counters and exits.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The folder to serve.
    dir: PathBuf,
    /// The control connection's address.
    #[arg(long, default_value = "127.0.0.1:2121")]
    listen: SocketAddr,
    /// Sessions served at once; more are told 421 and closed.
    #[arg(long, default_value_t = 64)]
    max_sessions: usize,
    /// A control connection idle this long is closed.
    #[arg(long, default_value = "300s", value_parser = duration)]
    idle_timeout: Duration,
    /// How long to wait for a data connection, or on a stalled one.
    #[arg(long, default_value = "30s", value_parser = duration)]
    data_timeout: Duration,
    /// Refuse uploads, deletions and new folders.
    #[arg(long)]
    read_only: bool,
    /// Offer TCP data connections only (no XPSV, the transport of seed 001).
    #[arg(long)]
    no_xport: bool,
    #[command(flatten)]
    xport: XportArgs,
    /// With --link, the server runs on a Strata host with its own
    /// `xport/udp+tcp/ip/eth` on the link instead of the kernel's sockets:
    /// the control connection and passive TCP data on its TCP, XPSV data on
    /// its `xport` node; it listens on its own address at --listen's port.
    #[command(flatten)]
    stack: StackArgs,
}

/// How FTP data moves over the transport (`XPSV`).
#[derive(clap::Args, Debug)]
pub struct XportArgs {
    /// Application buffers in flight per transfer (§3.5.2).
    #[arg(long, default_value_t = 4)]
    xport_buffers: usize,
    /// Bytes per application buffer.
    #[arg(long, default_value = "1MiB", value_parser = size)]
    xport_buffer_size: u64,
    /// UDP data sockets per connection (§3.4).
    #[arg(long, default_value_t = 1)]
    xport_sockets: usize,
}

impl XportArgs {
    /// The transport's settings for FTP data.
    pub fn transport(&self) -> Transport {
        let mut t = Transport {
            buffers: self.xport_buffers.max(1),
            buffer_size: self.xport_buffer_size.clamp(1, u64::from(u32::MAX)) as usize,
            ..Transport::default()
        };
        t.options.config.app_buffer = t.buffer_size as u32;
        t.options.udp.data_sockets = self.xport_sockets.max(1);
        t
    }
}

/// `b` with the `xport` node's options for FTP data over `t` on a Strata
/// host: the application buffer size and the data sockets.
pub fn stack_options(t: &Transport, b: HostBuilder) -> HostBuilder {
    let sockets = i64::try_from(t.options.udp.data_sockets.clamp(1, 16)).unwrap_or(1);
    b.option(KIND, "app_buffer", format!("{}B", t.buffer_size))
        .option(KIND, "data_sockets", sockets)
}

fn size(s: &str) -> Result<u64, String> {
    strata::core::units::parse_size(s).map_err(|e| e.to_string())
}

/// Runs `strata ftpd`.
pub fn run(args: Args) -> Result<()> {
    let stop = interrupt_flag()?;
    let mut config = Config::new(&args.dir);
    config.max_sessions = args.max_sessions;
    config.idle_timeout = args.idle_timeout;
    config.data_timeout = args.data_timeout;
    config.read_only = args.read_only;
    if !args.no_xport {
        config.transport = Some(args.xport.transport());
    }
    let t = args.xport.transport();
    let host = args
        .stack
        .start_stack("xport/udp+tcp/ip/eth", false, |b| stack_options(&t, b))?;
    over(host, |via| serve(&args, config, via, &stop))
}

/// Runs `work` on the started host, or on the kernel's sockets when there
/// is none, then stops the host; `work`'s own error is the one reported.
/// `strata ftp` and `strata ftpd` both run this way.
pub fn over(host: Option<RuntimeThread>, work: impl FnOnce(Via) -> Result<()>) -> Result<()> {
    let via = host
        .as_ref()
        .map_or(Via::Kernel, |h| Via::Host(h.handle().clone()));
    let outcome = work(via);
    match host {
        Some(host) => {
            let stopped = host.stop();
            outcome?;
            stopped.context("stopping the host")?;
            Ok(())
        }
        None => outcome,
    }
}

fn serve(args: &Args, config: Config, via: Via, stop: &AtomicBool) -> Result<()> {
    let server = Server::bind_via(args.listen, config, via)
        .with_context(|| format!("serving {} on {}", args.dir.display(), args.listen))?;
    println!(
        "ftpd serving {} on {}",
        args.dir.display(),
        server.local_addr()?
    );
    println!("ready");
    std::io::stdout().flush()?;
    server.run(stop).context("accepting control connections")?;
    println!("ftpd {}", server.stats());
    Ok(())
}

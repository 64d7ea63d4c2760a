//! `strata ftpd`: an FTP server for one folder (seed 001 §5's ftpd).

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use strata_ftp::server::{Config, Server};

use super::tcp_send::{duration, interrupt_flag};

/// Serve a folder over FTP to anonymous users.
///
/// Paths are confined to DIR: `/` is DIR, `..` above it and symlinks leading
/// out of it are refused. Data connections are passive (PASV, EPSV). Prints
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
}

/// Runs `strata ftpd`.
pub fn run(args: Args) -> Result<()> {
    let stop = interrupt_flag()?;
    let mut config = Config::new(&args.dir);
    config.max_sessions = args.max_sessions;
    config.idle_timeout = args.idle_timeout;
    config.data_timeout = args.data_timeout;
    config.read_only = args.read_only;
    let server = Server::bind(args.listen, config)
        .with_context(|| format!("serving {} on {}", args.dir.display(), args.listen))?;
    println!(
        "ftpd serving {} on {}",
        args.dir.display(),
        server.local_addr()?
    );
    println!("ready");
    std::io::stdout().flush()?;
    server.run(&stop).context("accepting control connections")?;
    println!("ftpd {}", server.stats());
    Ok(())
}

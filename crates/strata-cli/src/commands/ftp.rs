//! `strata ftp`: get, put and list against an FTP server (seed 001 §5's
//! ftp), each transfer checked by SHA-256 at both ends when the server
//! offers `HASH`.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};
use strata_ftp::client::{Client, Via};

use super::ftpd::XportArgs;
use super::tcp_send::{duration, hex, progress};
use super::xport_stack::StackArgs;

/// Get, put or list files on an FTP server.
///
/// Logs in (anonymous unless told otherwise), moves the file over seed 001's
/// transport when the server offers it (XPSV, as `strata ftpd` does) or a
/// passive TCP data connection, and prints "got|put bytes=N sha256=HEX
/// seconds=S rate=R Mbit/s verified=yes|no data=xport|tcp" — verified when
/// the server's HASH of the file matched ours (a mismatch is an error).
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The server's control address, HOST:PORT.
    server: String,
    #[command(subcommand)]
    action: Action,
    /// The user to log in as.
    #[arg(long, default_value = "anonymous")]
    user: String,
    /// The password, if the server asks.
    #[arg(long, default_value = "strata@")]
    pass: String,
    /// The longest wait on the server.
    #[arg(long, default_value = "30s", value_parser = duration)]
    timeout: Duration,
    /// What carries file data: seed 001's transport when the server offers
    /// it (auto), always (xport: an error if it does not), or TCP.
    #[arg(long, value_enum, default_value_t = DataPath::Auto)]
    data: DataPath,
    #[command(flatten)]
    xport: XportArgs,
    /// Skip the file's SHA-256 and the server's HASH of it (both read the
    /// whole file again; curl and lftp do neither): prints sha256=- and
    /// verified=no.
    #[arg(long)]
    no_verify: bool,
    /// With --link, every connection (control, passive TCP data and the
    /// transport's) leaves from a Strata host with its own
    /// `xport/udp+tcp/ip/eth` on the link instead of the kernel's sockets.
    #[command(flatten)]
    stack: StackArgs,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum DataPath {
    Auto,
    Xport,
    Tcp,
}

#[derive(clap::Subcommand, Debug)]
enum Action {
    /// Fetch REMOTE into LOCAL (by default its name in this folder).
    ///
    /// The file arrives as LOCAL.part and is renamed when complete; with
    /// --resume, a LOCAL.part left by an interrupted get is carried on.
    Get {
        remote: String,
        local: Option<PathBuf>,
        #[arg(long)]
        resume: bool,
    },
    /// Send LOCAL as REMOTE (by default its name).
    ///
    /// With --resume, carries on from the size the server already holds.
    Put {
        local: PathBuf,
        remote: Option<String>,
        #[arg(long)]
        resume: bool,
    },
    /// List a folder (the top by default).
    Ls { path: Option<String> },
}

/// Runs `strata ftp`.
pub fn run(args: Args) -> Result<()> {
    let t = args.xport.transport();
    let host = args.stack.start_stack("xport/udp+tcp/ip/eth", false, |b| {
        super::ftpd::stack_options(&t, b)
    })?;
    super::ftpd::over(host, |via| session(&args, via))
}

/// The session: log in, the action, quit.
fn session(args: &Args, via: Via) -> Result<()> {
    let addr = resolve(&args.server)?;
    let mut client = Client::connect_via(addr, args.timeout, via)
        .with_context(|| format!("connecting to {addr}"))?;
    client.login(&args.user, &args.pass).context("logging in")?;
    if args.data != DataPath::Tcp
        && !client.use_transport(args.xport.transport())
        && args.data == DataPath::Xport
    {
        bail!("{addr} does not offer the transport (no XPSV in its FEAT)");
    }
    match &args.action {
        Action::Get {
            remote,
            local,
            resume,
        } => {
            let local = local
                .clone()
                .unwrap_or_else(|| PathBuf::from(base_name(remote)));
            get(&mut client, remote, &local, *resume, !args.no_verify)?;
        }
        Action::Put {
            local,
            remote,
            resume,
        } => {
            let remote = remote.clone().unwrap_or_else(|| {
                local
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default()
            });
            put(&mut client, local, &remote, *resume, !args.no_verify)?;
        }
        Action::Ls { path } => print!("{}", client.list(path.as_deref().unwrap_or(""))?),
    }
    client.quit()?;
    Ok(())
}

fn resolve(server: &str) -> Result<SocketAddr> {
    server
        .to_socket_addrs()
        .with_context(|| format!("resolving {server}"))?
        .next()
        .with_context(|| format!("{server} has no address"))
}

fn base_name(remote: &str) -> &str {
    remote.rsplit('/').next().unwrap_or(remote)
}

fn get(client: &mut Client, remote: &str, local: &Path, resume: bool, check: bool) -> Result<()> {
    if base_name(remote).is_empty() {
        bail!("'{remote}' names no file");
    }
    let mut part = local.as_os_str().to_owned();
    part.push(".part");
    let part = PathBuf::from(part);
    let file = OpenOptions::new()
        .create(true)
        .append(resume)
        .write(true)
        .truncate(!resume)
        .open(&part)
        .with_context(|| format!("opening {}", part.display()))?;
    let offset = file.metadata()?.len();
    let mut out = BufWriter::with_capacity(1 << 20, file);
    // The size comes with the data connection's reply (one round trip).
    let bar = std::cell::RefCell::new(None);
    let start = Instant::now();
    let got = client
        .get_sized(
            remote,
            offset,
            &mut out,
            &mut |size| {
                let b = progress(size);
                b.set_position(offset);
                *bar.borrow_mut() = Some(b);
            },
            &mut |n| {
                if let Some(b) = bar.borrow().as_ref() {
                    b.set_position(offset + n)
                }
            },
        )
        .with_context(|| format!("getting {remote}"))?;
    out.flush()?;
    if let Some(b) = bar.borrow().as_ref() {
        b.finish_and_clear();
    }
    let seconds = start.elapsed().as_secs_f64();
    let (ours, verified) = verify(client, remote, &part, check)?;
    std::fs::rename(&part, local)
        .with_context(|| format!("renaming {} to {}", part.display(), local.display()))?;
    report(
        "got",
        got,
        offset,
        &ours,
        seconds,
        verified,
        client.data_path(),
    );
    Ok(())
}

fn put(client: &mut Client, local: &Path, remote: &str, resume: bool, check: bool) -> Result<()> {
    let mut file = File::open(local).with_context(|| format!("opening {}", local.display()))?;
    let len = file.metadata()?.len();
    let offset = if resume {
        client.size(remote).unwrap_or(0).min(len)
    } else {
        0
    };
    file.seek(SeekFrom::Start(offset))?;
    let bar = progress(Some(len));
    bar.set_position(offset);
    let start = Instant::now();
    let sent = client
        .put(&mut file, remote, offset, &mut |n| {
            bar.set_position(offset + n)
        })
        .with_context(|| format!("putting {remote}"))?;
    bar.finish_and_clear();
    let seconds = start.elapsed().as_secs_f64();
    let (ours, verified) = verify(client, remote, local, check)?;
    report(
        "put",
        sent,
        offset,
        &ours,
        seconds,
        verified,
        client.data_path(),
    );
    Ok(())
}

/// The SHA-256 of `path` and whether the server's of `remote` matched it;
/// `("-", false)` when not asked to `check`.
fn verify(client: &mut Client, remote: &str, path: &Path, check: bool) -> Result<(String, bool)> {
    if !check {
        return Ok(("-".into(), false));
    }
    let ours = sha256_of(path)?;
    let verified = check_hash(client, remote, &ours)?;
    Ok((ours, verified))
}

/// Whether the server's SHA-256 of `remote` matched ours (false when the
/// server cannot say); an error when it differs.
fn check_hash(client: &mut Client, remote: &str, ours: &str) -> Result<bool> {
    match client.sha256(remote).context("asking the server's hash")? {
        None => Ok(false),
        Some(theirs) if theirs == ours => Ok(true),
        Some(theirs) => bail!("hash mismatch: ours {ours}, the server's {theirs}"),
    }
}

fn report(
    what: &str,
    moved: u64,
    offset: u64,
    sha: &str,
    seconds: f64,
    verified: bool,
    data: &str,
) {
    let rate = moved as f64 * 8.0 / seconds.max(1e-9) / 1e6;
    println!(
        "{what} bytes={moved} from={offset} sha256={sha} seconds={seconds:.3} rate={rate:.1} Mbit/s verified={} data={data}",
        if verified { "yes" } else { "no" }
    );
}

fn sha256_of(path: &Path) -> Result<String> {
    let mut f = File::open(path).with_context(|| format!("reading {}", path.display()))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            return Ok(hex(&h.finalize()));
        }
        h.update(&buf[..n]);
    }
}

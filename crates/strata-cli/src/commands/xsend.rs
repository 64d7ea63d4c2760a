//! `strata xsend FILE HOST:PORT` and `strata xrecv PORT DIR`: a file over
//! seed 001's transport (§5's tplftp), SHA-256 checked at both ends,
//! written under a temporary name and renamed when complete, resumable.
//!
//! The exchange on the transport's stream:
//!
//! 1. offer, sender → receiver, 512 bytes: `"XSND"`, version 1, flags (1:
//!    resume), u16 name length, u64 size, the file's SHA-256, the name;
//! 2. answer, receiver → sender, 16 bytes: `"XRCV"`, status (0 go), 3
//!    reserved, u64 offset to start from (what the receiver already holds);
//! 3. the file's bytes from that offset;
//! 4. verdict, receiver → sender, 40 bytes: `"XEND"`, 1 if the SHA-256 of
//!    the whole file matched, 3 reserved, the SHA-256 the receiver computed.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use bytes::Bytes;
use sha2::{Digest, Sha256};
use strata::link::RuntimeThread;
use strata::xport::{XportListener, XportStream};
use strata::xport_stack::{StackListener, StackStream};

use super::tcp_send::{hex, progress};
use super::xport_args::{Ticker, XportArgs, say_buffers};
use super::xport_stack::{StackArgs, XStream};

const OFFER_LEN: usize = 512;
const ANSWER_LEN: usize = 16;
const VERDICT_LEN: usize = 40;

/// Send a file over the transport (seed 001).
///
/// Prints "sent bytes=N sha256=HEX seconds=S rate=R Mbit/s" once the
/// receiver confirmed the hash.
#[derive(clap::Args, Debug)]
pub struct SendArgs {
    /// The file to send.
    file: PathBuf,
    /// The receiver's control address.
    to: String,
    /// Continue from what the receiver already holds of this file.
    #[arg(long)]
    resume: bool,
    #[command(flatten)]
    xport: XportArgs,
    #[command(flatten)]
    stack: StackArgs,
}

/// Receive one file over the transport (seed 001) into DIR.
///
/// Prints "ready" once listening, then "received NAME bytes=N sha256=HEX
/// seconds=S rate=R Mbit/s" when the file is complete and renamed.
#[derive(clap::Args, Debug)]
pub struct RecvArgs {
    /// The UDP port of the control socket.
    port: u16,
    /// Where the file goes (DIR/NAME).
    dir: PathBuf,
    /// Keep a partial file and continue it.
    #[arg(long)]
    resume: bool,
    /// The address to listen on.
    #[arg(long, default_value = "0.0.0.0")]
    bind: String,
    #[command(flatten)]
    xport: XportArgs,
    #[command(flatten)]
    stack: StackArgs,
}

fn sha256_of(path: &Path, limit: Option<u64>) -> Result<Sha256> {
    let mut f = File::open(path).with_context(|| format!("reading {}", path.display()))?;
    let mut h = Sha256::new();
    let mut left = limit.unwrap_or(u64::MAX);
    let mut buf = vec![0u8; 1 << 20];
    while left > 0 {
        let want = buf.len().min(left.min(usize::MAX as u64) as usize);
        let n = f.read(&mut buf[..want])?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        left -= n as u64;
    }
    Ok(h)
}

/// "drops total=N reason=count …": every datagram refused, by reason.
fn drops_line(s: &mut impl XStream) -> String {
    let d = s.drops();
    let mut line = format!("drops total={}", d.total());
    for (r, n) in d.iter().filter(|&(_, n)| n > 0) {
        line.push_str(&format!(" {}={n}", r.name()));
    }
    line
}

/// Reads one buffer of exactly `len` bytes from the stream.
fn recv_exact(s: &mut impl XStream, len: usize) -> Result<Vec<u8>> {
    let (buf, n) = s.recv(vec![0u8; len])?;
    if n != len {
        bail!("the peer ended the stream early ({n} of {len} bytes)");
    }
    Ok(buf)
}

/// Runs `strata xsend`.
pub fn send(args: SendArgs) -> Result<()> {
    let name = args
        .file
        .file_name()
        .and_then(|n| n.to_str())
        .context("the file has no usable name")?
        .to_string();
    if name.len() > OFFER_LEN - 48 {
        bail!("file name longer than {} bytes", OFFER_LEN - 48);
    }
    let size = fs::metadata(&args.file)
        .with_context(|| format!("reading {}", args.file.display()))?
        .len();
    let hash: [u8; 32] = sha256_of(&args.file, None)?.finalize().into();
    let Some(host) = args.stack.start(&args.xport)? else {
        let s = XportStream::connect(args.to.as_str(), &args.xport.options())
            .with_context(|| format!("connecting to {}", args.to))?;
        if let Some(m) = say_buffers(&s) {
            eprintln!("strata: {m}");
        }
        return send_over(s, &args, &name, size, hash);
    };
    let sent = args
        .to
        .parse()
        .context("with --link the receiver is ADDR:PORT")
        .and_then(|to| {
            StackStream::connect(host.handle(), to)
                .with_context(|| format!("connecting to {to} over xport/udp/ip/eth"))
        })
        .and_then(|s| send_over(s, &args, &name, size, hash));
    stop(host, sent)
}

/// Stops a host the command ran; the command's own error comes first.
fn stop(host: RuntimeThread, outcome: Result<()>) -> Result<()> {
    let stopped = host.stop();
    outcome?;
    stopped.context("stopping the host")?;
    Ok(())
}

/// The exchange, once connected (over either UDP).
fn send_over(
    mut s: impl XStream,
    args: &SendArgs,
    name: &str,
    size: u64,
    hash: [u8; 32],
) -> Result<()> {
    let mut offer = vec![0u8; OFFER_LEN];
    offer[..4].copy_from_slice(b"XSND");
    offer[4] = 1;
    offer[5] = u8::from(args.resume);
    offer[6..8].copy_from_slice(&(name.len() as u16).to_be_bytes());
    offer[8..16].copy_from_slice(&size.to_be_bytes());
    offer[16..48].copy_from_slice(&hash);
    offer[48..48 + name.len()].copy_from_slice(name.as_bytes());
    s.send(vec![Bytes::from(offer)])?;
    let answer = recv_exact(&mut s, ANSWER_LEN)?;
    if &answer[..4] != b"XRCV" || answer[4] != 0 {
        bail!("the receiver refused the file");
    }
    let offset = u64::from_be_bytes(answer[8..16].try_into().expect("8 bytes"));
    if offset > size {
        bail!("the receiver holds more ({offset} bytes) than the file has");
    }
    let started = Instant::now();
    let mut f = File::open(&args.file)?;
    f.seek(SeekFrom::Start(offset))?;
    let bar = progress(Some(size));
    bar.set_position(offset);
    let mut ticker = Ticker::new();
    let mut sent = offset;
    let mut acked = offset;
    let mut in_flight = 0usize;
    loop {
        let mut bufs = Vec::new();
        while in_flight + bufs.len() < args.xport.buffers.max(1) && sent < size {
            let len = (args.xport.buffer as u64).min(size - sent) as usize;
            let mut b = vec![0u8; len];
            f.read_exact(&mut b)
                .with_context(|| format!("reading {}", args.file.display()))?;
            sent += len as u64;
            bufs.push(Bytes::from(b));
        }
        if bufs.is_empty() && in_flight == 0 {
            break;
        }
        in_flight += bufs.len();
        let back = s.send(bufs)?;
        in_flight -= back.len();
        acked += back.iter().map(|b| b.len() as u64).sum::<u64>();
        bar.set_position(acked);
        if let Some(line) = ticker.tick(&mut s, acked - offset, Duration::from_secs(1)) {
            bar.println(line);
        }
    }
    s.finish()?;
    let verdict = recv_exact(&mut s, VERDICT_LEN)?;
    bar.finish_and_clear();
    if &verdict[..4] != b"XEND" {
        bail!("the receiver's verdict is garbled");
    }
    if verdict[4] != 1 || verdict[8..40] != hash {
        bail!(
            "SHA-256 mismatch: sent {} received {}",
            hex(&hash),
            hex(&verdict[8..40])
        );
    }
    let drops = drops_line(&mut s);
    s.close()?;
    println!("{drops}");
    let secs = started.elapsed().as_secs_f64();
    println!(
        "sent bytes={size} from={offset} sha256={} seconds={secs:.3} rate={:.1} Mbit/s",
        hex(&hash),
        (size - offset) as f64 * 8.0 / secs / 1e6
    );
    Ok(())
}

/// Runs `strata xrecv`.
pub fn recv(args: RecvArgs) -> Result<()> {
    fs::create_dir_all(&args.dir).with_context(|| format!("creating {}", args.dir.display()))?;
    let Some(host) = args.stack.start(&args.xport)? else {
        let addr = format!("{}:{}", args.bind, args.port);
        let mut l = XportListener::bind(addr.as_str(), &args.xport.options())
            .with_context(|| format!("listening on {addr}"))?;
        let ports: Vec<String> = l.data_ports().iter().map(u16::to_string).collect();
        println!("ready data-ports={}", ports.join(","));
        std::io::stdout().flush()?;
        let s = l.accept()?;
        if let Some(m) = say_buffers(&s) {
            eprintln!("strata: {m}");
        }
        return recv_over(s, &args);
    };
    let got = StackListener::bind(host.handle(), args.port)
        .with_context(|| format!("listening on port {} over xport/udp/ip/eth", args.port))
        .and_then(|mut l| {
            println!("ready stack=xport/udp/ip/eth port={}", args.port);
            std::io::stdout().flush()?;
            // The listener's ports carry the connection: it lives as long.
            recv_over(l.accept()?, &args)
        });
    stop(host, got)
}

/// The exchange, once a sender connected (over either UDP).
fn recv_over(mut s: impl XStream, args: &RecvArgs) -> Result<()> {
    let offer = recv_exact(&mut s, OFFER_LEN)?;
    if &offer[..4] != b"XSND" || offer[4] != 1 {
        bail!("not an xsend offer");
    }
    let resume = offer[5] == 1 && args.resume;
    let name_len = usize::from(u16::from_be_bytes([offer[6], offer[7]]));
    let size = u64::from_be_bytes(offer[8..16].try_into().expect("8 bytes"));
    let hash: [u8; 32] = offer[16..48].try_into().expect("32 bytes");
    let name = std::str::from_utf8(offer.get(48..48 + name_len).context("bad name length")?)
        .context("the file name is not UTF-8")?;
    // Only a plain name lands in DIR: no separators, no "..", nothing hidden.
    if name.is_empty() || name.contains(['/', '\\', '\0']) || name == "." || name == ".." {
        bail!("refusing file name {name:?}");
    }
    let part = args
        .dir
        .join(format!(".{name}.{}.xpart", &hex(&hash)[..16]));
    let held = if resume {
        fs::metadata(&part).map(|m| m.len().min(size)).unwrap_or(0)
    } else {
        0
    };
    let mut out = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(!resume)
        .open(&part)
        .with_context(|| format!("creating {}", part.display()))?;
    out.set_len(held)?;
    out.seek(SeekFrom::Start(held))?;
    let mut h = if held > 0 {
        sha256_of(&part, Some(held))?
    } else {
        Sha256::new()
    };
    let mut answer = vec![0u8; ANSWER_LEN];
    answer[..4].copy_from_slice(b"XRCV");
    answer[8..16].copy_from_slice(&held.to_be_bytes());
    s.send(vec![Bytes::from(answer)])?;

    let started = Instant::now();
    let bar = progress(Some(size));
    bar.set_position(held);
    let mut ticker = Ticker::new();
    let mut posted = held;
    let mut got = held;
    for _ in 1..args.xport.buffers.max(1) {
        if posted < size {
            let len = (args.xport.buffer as u64).min(size - posted) as usize;
            posted += len as u64;
            s.post_recv(vec![0u8; len])?;
        }
    }
    while got < size {
        let len = (args.xport.buffer as u64).min(size - posted) as usize;
        posted += len as u64;
        let (buf, n) = s.recv(vec![0u8; len])?;
        if n == 0 {
            bail!("the sender ended after {got} of {size} bytes");
        }
        out.write_all(&buf[..n])
            .with_context(|| format!("writing {}", part.display()))?;
        h.update(&buf[..n]);
        got += n as u64;
        bar.set_position(got);
        if let Some(line) = ticker.tick(&mut s, got - held, Duration::from_secs(1)) {
            bar.println(line);
        }
    }
    bar.finish_and_clear();
    out.sync_all()?;
    drop(out);
    let ours: [u8; 32] = h.finalize().into();
    let ok = ours == hash;
    let mut verdict = vec![0u8; VERDICT_LEN];
    verdict[..4].copy_from_slice(b"XEND");
    verdict[4] = u8::from(ok);
    verdict[8..40].copy_from_slice(&ours);
    s.send(vec![Bytes::from(verdict)])?;
    let target = args.dir.join(name);
    if ok {
        fs::rename(&part, &target).with_context(|| format!("renaming to {}", target.display()))?;
    } else {
        let _ = fs::remove_file(&part);
    }
    let drops = drops_line(&mut s);
    s.close()?;
    if !ok {
        bail!(
            "SHA-256 mismatch: offered {} received {}",
            hex(&hash),
            hex(&ours)
        );
    }
    println!("{drops}");
    let secs = started.elapsed().as_secs_f64();
    println!(
        "received {name} bytes={size} from={held} sha256={} seconds={secs:.3} rate={:.1} Mbit/s",
        hex(&ours),
        (size - held) as f64 * 8.0 / secs / 1e6
    );
    Ok(())
}

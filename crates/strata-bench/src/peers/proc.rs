//! A peer program running in a network namespace (`ip netns exec`), its
//! output read line by line on a thread, killed when dropped — so a peer
//! that hangs never outlives its benchmark.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// A running peer program.
pub struct NsProc {
    what: String,
    child: Child,
    lines: Receiver<String>,
    seen: Vec<String>,
}

impl NsProc {
    /// Starts `program args` in namespace `ns` (or here).
    pub fn spawn(ns: Option<&str>, program: &str, args: &[&str]) -> Result<NsProc> {
        let mut cmd = match ns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns, program]);
                c
            }
            None => Command::new(program),
        };
        let mut child = cmd
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {program}"))?;
        let (tx, lines) = mpsc::channel();
        for out in [
            child
                .stdout
                .take()
                .map(|o| Box::new(o) as Box<dyn std::io::Read + Send>),
            child
                .stderr
                .take()
                .map(|e| Box::new(e) as Box<dyn std::io::Read + Send>),
        ]
        .into_iter()
        .flatten()
        {
            let tx = tx.clone();
            std::thread::spawn(move || {
                for l in BufReader::new(out).lines().map_while(Result::ok) {
                    if tx.send(l).is_err() {
                        break;
                    }
                }
            });
        }
        Ok(NsProc {
            what: program.rsplit('/').next().unwrap_or(program).to_string(),
            child,
            lines,
            seen: Vec::new(),
        })
    }

    /// Waits up to `limit` for a line `pred` accepts; returns it.
    pub fn wait_for(&mut self, limit: Duration, pred: impl Fn(&str) -> bool) -> Result<String> {
        let end = Instant::now() + limit;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) => {
                    self.seen.push(l.clone());
                    if pred(&l) {
                        return Ok(l);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    bail!("{}: timed out; said: {}", self.what, self.seen.join(" | "))
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let status = self.child.wait()?;
                    bail!(
                        "{} ended ({status}); said: {}",
                        self.what,
                        self.seen.join(" | ")
                    )
                }
            }
        }
    }

    /// Waits up to `limit` for the program to end; its status and every
    /// line it printed.
    pub fn finish(mut self, limit: Duration) -> Result<(ExitStatus, Vec<String>)> {
        let end = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait()? {
                // The reader threads end with the pipes.
                while let Ok(l) = self.lines.recv_timeout(Duration::from_millis(200)) {
                    self.seen.push(l);
                }
                return Ok((status, std::mem::take(&mut self.seen)));
            }
            if Instant::now() >= end {
                bail!(
                    "{}: did not end in {limit:?}; said: {}",
                    self.what,
                    self.seen.join(" | ")
                );
            }
            while let Ok(l) = self.lines.try_recv() {
                self.seen.push(l);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Its process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for NsProc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The value of `key=` in a line of `key=value` words.
pub fn field(line: &str, key: &str) -> Option<f64> {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
        .and_then(|v| v.parse().ok())
}

//! Reading an HTTP/1.x request head (RFC 9112 §2–3) and finding the file it
//! names under the served folder.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The longest request head accepted; a longer one is answered 431.
pub const MAX_HEAD: usize = 8 * 1024;

/// What the server does with a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// GET (`head: false`) or HEAD of a path, as percent-decoded segments.
    Get {
        /// Only the headers are wanted.
        head: bool,
        /// The path's segments, `.` and empty ones left out.
        segments: Vec<Vec<u8>>,
    },
    /// A method other than GET and HEAD (405).
    Method,
    /// Not a request this server understands (400).
    Bad(&'static str),
}

/// Where the head ends (the index just past its blank line), if it is all
/// there. Bare LF line ends are accepted, as RFC 9112 §2.2 allows.
pub fn head_end(buf: &[u8]) -> Option<usize> {
    let crlf = buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4);
    let lf = buf.windows(2).position(|w| w == b"\n\n").map(|i| i + 2);
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Parses a complete head (through its blank line).
pub fn parse(head: &[u8]) -> Request {
    let line_end = head.iter().position(|&b| b == b'\n').unwrap_or(head.len());
    let line = head[..line_end]
        .strip_suffix(b"\r")
        .unwrap_or(&head[..line_end]);
    let mut parts = line.split(|&b| b == b' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Request::Bad("the request line is not METHOD TARGET VERSION");
    };
    if !version.starts_with(b"HTTP/1.") || version.len() != 8 {
        return Request::Bad("not HTTP/1.x");
    }
    let head_only = match method {
        b"GET" => false,
        b"HEAD" => true,
        m if !m.is_empty() && m.iter().all(|b| b.is_ascii_uppercase()) => {
            return Request::Method;
        }
        _ => return Request::Bad("not a method"),
    };
    match segments(target) {
        Ok(segments) => Request::Get {
            head: head_only,
            segments,
        },
        Err(why) => Request::Bad(why),
    }
}

/// The decoded segments of a request target in origin form (`/a/b?q`) or
/// absolute form (`http://host/a/b`). A `..` segment is refused: nothing
/// outside the served folder can be named.
fn segments(target: &[u8]) -> Result<Vec<Vec<u8>>, &'static str> {
    let path = match target.strip_prefix(b"http://") {
        Some(rest) => rest
            .iter()
            .position(|&b| b == b'/')
            .map_or(&b"/"[..], |i| &rest[i..]),
        None => target,
    };
    if !path.starts_with(b"/") {
        return Err("the target is not a path");
    }
    let path = path
        .split(|&b| b == b'?' || b == b'#')
        .next()
        .unwrap_or(b"");
    let decoded = percent_decode(path)?;
    let mut out = Vec::new();
    for seg in decoded.split(|&b| b == b'/') {
        match seg {
            b"" | b"." => {}
            b".." => return Err("'..' in the path"),
            s if s.contains(&0) => return Err("NUL in the path"),
            s => out.push(s.to_vec()),
        }
    }
    Ok(out)
}

fn percent_decode(s: &[u8]) -> Result<Vec<u8>, &'static str> {
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i] == b'%' {
            let (Some(h), Some(l)) = (
                s.get(i + 1).copied().and_then(hex),
                s.get(i + 2).copied().and_then(hex),
            ) else {
                return Err("a bad %-escape");
            };
            out.push(h << 4 | l);
            i += 3;
        } else {
            out.push(s[i]);
            i += 1;
        }
    }
    Ok(out)
}

/// The file `segments` names under `root` (which must be canonical): a
/// folder means its `index.html`. A path that resolves outside `root`
/// through a symbolic link is not served.
pub fn resolve(root: &Path, segments: &[Vec<u8>]) -> std::io::Result<PathBuf> {
    let mut path = root.to_path_buf();
    for s in segments {
        path.push(OsStr::from_bytes(s));
    }
    let mut real = path.canonicalize()?;
    if real.is_dir() {
        real = real.join("index.html").canonicalize()?;
    }
    if !real.starts_with(root) || !real.is_file() {
        return Err(std::io::ErrorKind::NotFound.into());
    }
    Ok(real)
}

/// A Content-Type for a file name, by its extension.
pub fn content_type(path: &Path) -> &'static str {
    let ext = path
        .extension()
        .and_then(OsStr::to_str)
        .map(str::to_ascii_lowercase);
    match ext.as_deref() {
        Some("html" | "htm") => "text/html; charset=utf-8",
        Some("txt" | "md") => "text/plain; charset=utf-8",
        Some("css") => "text/css",
        Some("js") => "text/javascript",
        Some("json") => "application/json",
        Some("png") => "image/png",
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("gif") => "image/gif",
        Some("svg") => "image/svg+xml",
        Some("pdf") => "application/pdf",
        Some("pcap") => "application/vnd.tcpdump.pcap",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(target: &str) -> Request {
        parse(format!("GET {target} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
    }

    fn segs(parts: &[&str]) -> Vec<Vec<u8>> {
        parts.iter().map(|p| p.as_bytes().to_vec()).collect()
    }

    #[test]
    fn a_request_line_gives_method_and_decoded_segments() {
        assert_eq!(
            get("/a/./b%20c//d.txt?x=1#f"),
            Request::Get {
                head: false,
                segments: segs(&["a", "b c", "d.txt"])
            }
        );
        assert_eq!(
            parse(b"HEAD http://h:80/x HTTP/1.0\n\n"),
            Request::Get {
                head: true,
                segments: segs(&["x"])
            }
        );
        assert_eq!(
            get("/"),
            Request::Get {
                head: false,
                segments: vec![]
            }
        );
        assert_eq!(parse(b"POST / HTTP/1.1\r\n\r\n"), Request::Method);
    }

    #[test]
    fn nonsense_and_escapes_from_the_folder_are_refused() {
        for bad in [
            "/../etc/passwd",
            "/a/%2e%2e/%2e%2e/x",
            "/a%2F..%2Fb/../c",
            "x",
            "/%zz",
            "/a%00",
        ] {
            assert!(matches!(get(bad), Request::Bad(_)), "{bad}");
        }
        for bad in [
            &b"GET /\r\n\r\n"[..],
            b"GET / HTTP/2.0\r\n\r\n",
            b"GET  / HTTP/1.1\r\n\r\n",
            b"get / HTTP/1.1\r\n\r\n",
            b"\r\n\r\n",
            b"\xff\xfe / HTTP/1.1\r\n\r\n",
        ] {
            assert!(matches!(parse(bad), Request::Bad(_)), "{bad:?}");
        }
    }

    #[test]
    fn the_head_ends_at_the_first_blank_line() {
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nA: b\r\n\r\nbody"), Some(24));
        assert_eq!(head_end(b"GET / HTTP/1.1\nA: b\n\nbody"), Some(21));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nA: b\r\n"), None);
    }

    #[test]
    fn resolving_stays_inside_the_folder() {
        let dir = std::env::temp_dir().join(format!("strata-http-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("f.txt"), b"x").unwrap();
        std::fs::write(dir.join("sub/index.html"), b"<p>").unwrap();
        std::os::unix::fs::symlink("/etc", dir.join("out")).unwrap();
        let root = dir.canonicalize().unwrap();
        assert_eq!(
            resolve(&root, &segs(&["f.txt"])).unwrap(),
            root.join("f.txt")
        );
        assert_eq!(
            resolve(&root, &segs(&["sub"])).unwrap(),
            root.join("sub/index.html")
        );
        assert!(resolve(&root, &segs(&["out", "hostname"])).is_err());
        assert!(resolve(&root, &segs(&["nothing"])).is_err());
        assert!(resolve(&root, &[]).is_err(), "no index.html at the top");
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(
            content_type(Path::new("a/B.HTML")),
            "text/html; charset=utf-8"
        );
        assert_eq!(content_type(Path::new("x.bin")), "application/octet-stream");
    }
}

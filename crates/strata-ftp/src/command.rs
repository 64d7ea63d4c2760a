//! The control connection's lines: bounded reading, Telnet's escapes removed,
//! and a command split into its verb and argument (RFC 959 §4.1, §5.3).

use std::io::{self, BufRead};

/// One line read from a control connection.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// A complete line, its CR LF (or bare LF) removed.
    Text(Vec<u8>),
    /// A line longer than the limit; its bytes were read and thrown away up
    /// to and including its end, so the next line starts clean.
    TooLong,
    /// The peer closed the connection (a partial last line is dropped).
    Eof,
}

/// Reads one line of at most `max` bytes into `buf` (cleared first). Never
/// holds more than `max` bytes, however long the peer's line is.
pub fn read_line(r: &mut impl BufRead, max: usize, buf: &mut Vec<u8>) -> io::Result<Line> {
    buf.clear();
    let mut too_long = false;
    loop {
        let avail = match r.fill_buf() {
            Ok(a) => a,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if avail.is_empty() {
            return Ok(Line::Eof);
        }
        let (chunk, done) = match avail.iter().position(|&b| b == b'\n') {
            Some(i) => (&avail[..i], i + 1),
            None => (avail, avail.len()),
        };
        if !too_long && buf.len() + chunk.len() <= max {
            buf.extend_from_slice(chunk);
        } else {
            too_long = true;
            buf.clear();
        }
        let found = done > chunk.len();
        r.consume(done);
        if found {
            if too_long {
                return Ok(Line::TooLong);
            }
            if buf.last() == Some(&b'\r') {
                buf.pop();
            }
            strip_telnet(buf);
            return Ok(Line::Text(std::mem::take(buf)));
        }
    }
}

const IAC: u8 = 255;

/// Removes Telnet's commands (IAC and what follows it) from a line: clients
/// send `IAC IP IAC DM` before `ABOR` (RFC 959 §4.1.3); `IAC IAC` is a data
/// byte 255.
fn strip_telnet(line: &mut Vec<u8>) {
    if !line.contains(&IAC) {
        return;
    }
    let mut out = Vec::with_capacity(line.len());
    let mut i = 0;
    while i < line.len() {
        if line[i] != IAC {
            out.push(line[i]);
            i += 1;
            continue;
        }
        match line.get(i + 1) {
            Some(&IAC) => {
                out.push(IAC);
                i += 2;
            }
            // WILL, WONT, DO, DONT carry an option byte.
            Some(251..=254) => i += 3,
            _ => i += 2,
        }
    }
    *line = out;
}

/// A command: its verb in upper case and its argument (possibly empty).
#[derive(Debug, PartialEq, Eq)]
pub struct Request {
    /// The command's name, three or four letters, upper case.
    pub verb: String,
    /// Everything after the first space, as sent (paths may hold spaces).
    pub arg: String,
}

/// Splits a line into a request; `None` for a line that is no command (a
/// verb not of 3–4 ASCII letters, or an argument that is not UTF-8 text or
/// holds a NUL, which no path may contain).
pub fn parse(line: &[u8]) -> Option<Request> {
    let text = std::str::from_utf8(line).ok()?;
    let (verb, arg) = match text.split_once(' ') {
        Some((v, a)) => (v, a),
        None => (text, ""),
    };
    if !(3..=4).contains(&verb.len()) || !verb.bytes().all(|b| b.is_ascii_alphabetic()) {
        return None;
    }
    if arg.contains('\0') {
        return None;
    }
    Some(Request {
        verb: verb.to_ascii_uppercase(),
        arg: arg.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(input: &[u8], max: usize) -> Vec<Line> {
        let mut r = io::BufReader::with_capacity(4, input);
        let mut buf = Vec::new();
        let mut out = Vec::new();
        loop {
            let l = read_line(&mut r, max, &mut buf).unwrap();
            let end = l == Line::Eof;
            out.push(l);
            if end {
                return out;
            }
        }
    }

    #[test]
    fn lines_end_at_crlf_or_lf_and_a_long_line_is_skipped_whole() {
        let got = lines(
            b"USER a\r\nPASS bb\nXXXXXXXXXXXXXXXXXX\r\nNOOP\r\npartial",
            10,
        );
        assert_eq!(
            got,
            vec![
                Line::Text(b"USER a".to_vec()),
                Line::Text(b"PASS bb".to_vec()),
                Line::TooLong,
                Line::Text(b"NOOP".to_vec()),
                Line::Eof
            ]
        );
    }

    #[test]
    fn telnet_interrupt_before_abor_is_removed() {
        let got = lines(b"\xff\xf4\xff\xf2ABOR\r\n\xff\xfb\x01NOOP \xff\xff\r\n", 64);
        assert_eq!(got[0], Line::Text(b"ABOR".to_vec()));
        assert_eq!(got[1], Line::Text(b"NOOP \xff".to_vec()));
    }

    #[test]
    fn verbs_are_case_insensitive_and_arguments_keep_spaces() {
        let r = parse(b"retr my file.txt").unwrap();
        assert_eq!((r.verb.as_str(), r.arg.as_str()), ("RETR", "my file.txt"));
        assert_eq!(parse(b"PWD").unwrap().arg, "");
        assert!(parse(b"").is_none());
        assert!(parse(b"TOOLONG x").is_none());
        assert!(parse(b"R3TR x").is_none());
        assert!(parse(b"RETR a\0b").is_none());
        assert!(parse(b"RETR \xff\xfe").is_none());
    }
}

//! The one copy loop of both ends' data connections.

use std::io::{self, Read, Write};

/// Copies `from` to `to` through a 256 KiB buffer (std's `io::copy` uses
/// 8 KiB between sockets and files: many more system calls for a fast
/// sender), telling `progress` the bytes copied so far after each write.
pub(crate) fn copy(
    from: &mut impl Read,
    to: &mut impl Write,
    progress: &mut dyn FnMut(u64),
) -> io::Result<u64> {
    let mut buf = vec![0u8; 256 * 1024];
    let mut total = 0;
    loop {
        match from.read(&mut buf) {
            Ok(0) => return Ok(total),
            Ok(n) => {
                to.write_all(&buf[..n])?;
                total += n as u64;
                progress(total);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

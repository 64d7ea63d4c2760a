//! Directory listings: `LIST` in the `ls -l` form every client parses (RFC
//! 959 leaves the form open; lftp, curl and ftplib all read Unix `ls -l`), and
//! `NLST`'s bare names.

use std::fs::Metadata;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::time::{SystemTime, UNIX_EPOCH};

/// One `ls -l` line (no line end) for `name` with `meta`, dates relative to
/// `now` (a date more than six months away shows its year, as ls does).
pub fn long_line(name: &str, meta: &Metadata, now: SystemTime) -> String {
    let kind = if meta.is_dir() {
        'd'
    } else if meta.file_type().is_symlink() {
        'l'
    } else {
        '-'
    };
    let mode = meta.permissions().mode();
    let mut perms = String::with_capacity(9);
    for (bit, c) in [
        (0o400, 'r'),
        (0o200, 'w'),
        (0o100, 'x'),
        (0o040, 'r'),
        (0o020, 'w'),
        (0o010, 'x'),
        (0o004, 'r'),
        (0o002, 'w'),
        (0o001, 'x'),
    ] {
        perms.push(if mode & bit != 0 { c } else { '-' });
    }
    let mtime = meta.mtime();
    format!(
        "{kind}{perms} {:>3} ftp      ftp      {:>12} {} {name}",
        meta.nlink(),
        meta.len(),
        ls_date(mtime, unix_secs(now))
    )
}

fn unix_secs(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// `Nov 28 01:37` within six months of `now`, `Nov 28  2024` otherwise.
fn ls_date(t: i64, now: i64) -> String {
    let (y, m, d) = civil(t.div_euclid(86_400));
    let secs = t.rem_euclid(86_400);
    let month = MONTHS[(m - 1) as usize];
    if (now - t).abs() < 183 * 86_400 {
        format!("{month} {d:>2} {:02}:{:02}", secs / 3600, secs % 3600 / 60)
    } else {
        format!("{month} {d:>2}  {y}")
    }
}

/// `YYYYMMDDHHMMSS` in UTC, the form of `MDTM` (RFC 3659 §2.3).
pub fn mdtm(meta: &Metadata) -> String {
    let t = meta.mtime();
    let (y, m, d) = civil(t.div_euclid(86_400));
    let s = t.rem_euclid(86_400);
    format!(
        "{y:04}{m:02}{d:02}{:02}{:02}{:02}",
        s / 3600,
        s % 3600 / 60,
        s % 60
    )
}

/// The (year, month, day) of a count of days since 1970-01-01, by Howard
/// Hinnant's `civil_from_days`.
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_convert_like_date_does() {
        assert_eq!(civil(0), (1970, 1, 1));
        // 2000-02-29 and 2026-11-28 (date -d @… -u).
        assert_eq!(civil(951_782_400 / 86_400), (2000, 2, 29));
        assert_eq!(civil(1_795_829_860 / 86_400), (2026, 11, 28));
        assert_eq!(ls_date(1_795_829_860, 1_795_829_860), "Nov 28 01:37");
        assert_eq!(ls_date(951_782_400, 1_795_829_860), "Feb 29  2000");
    }
}

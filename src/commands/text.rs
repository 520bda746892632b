//! Text output helpers: every untrusted string goes through [`clean`] (the safe-text module)
//! before it is printed; times are printed in local time with date and zone.

use crate::runtime::types::{RawInvalid, Said, Timestamp};

/// An untrusted string made safe for one line of terminal output: escaped (never stripped),
/// and cut head-and-tail to `max` display columns with a visible marker when longer.
pub fn clean(text: &str, max: usize) -> String {
    clean_bytes(text.as_bytes(), max)
}

/// As [`clean`], for bytes that may not be UTF-8 (shown as `\xNN`).
pub fn clean_bytes(bytes: &[u8], max: usize) -> String {
    crate::safetext::plain_line(bytes, max)
}

/// A file's name made safe as [`clean_bytes`] makes bytes: a name that is not UTF-8 shows its
/// bytes (`\xff`), never U+FFFD, so two names never print alike.
pub fn path(p: &std::path::Path, max: usize) -> String {
    use std::os::unix::ffi::OsStrExt;
    clean_bytes(p.as_os_str().as_bytes(), max)
}

/// A message (an error's `Display`) made safe as [`clean`] makes text, with each of `paths`
/// (the files the command was given) shown by its bytes where the message names it
/// ([`Said::with_paths`]).
pub fn naming(message: &Said, paths: &[&std::path::Path], max: usize) -> String {
    said(&message.naming(paths), max)
}

/// A runtime message that names ids ([`Said`], e.g. an error's [`said`](crate::runtime::store::StoreError::said)),
/// made safe as [`clean`] makes text: its text as text and each id as its stored bytes, so an
/// id that is not UTF-8 shows as `\xNN` (never as U+FFFD, which may be another run's id) and a
/// backslash in an id as the sanitiser shows it. A message whose ids are UTF-8 shows exactly as
/// `clean(&message.to_string(), max)`.
/// A command in it ([`Said::command`]) is shown as it is, so that it pastes as printed.
pub fn said(message: &Said, max: usize) -> String {
    message.render_escaped(|b| clean_bytes(b, max))
}

/// As [`clean`] for a TEXT column of a row: the stored bytes when they were not UTF-8 (so
/// they show as `\xNN`, never as a lossy U+FFFD), else the text.
pub fn col(raw_invalid: &RawInvalid, column: &str, text: &str, max: usize) -> String {
    clean_bytes(super::shell::stored(raw_invalid, column, text), max)
}

/// [`col`], or `-` for an empty field.
pub fn col_dash(raw_invalid: &RawInvalid, column: &str, text: &str, max: usize) -> String {
    if text.is_empty() {
        "-".into()
    } else {
        col(raw_invalid, column, text, max)
    }
}

/// Escaped text followed by its badges (` [mixed scripts]`, ` [invisible]`, ...), so the
/// commands warn about what the console badges: look-alikes, mixed scripts, bidi, controls,
/// invisible or dropped characters, invalid UTF-8, cuts.
pub fn badged(t: &crate::safetext::SafeText) -> String {
    let mut s = t.to_string();
    for b in t.badges().iter() {
        s.push_str(" [");
        s.push_str(b.label());
        s.push(']');
    }
    s
}

/// An identifier (run, approval or step id, tool name, kind): escaped as a security field
/// (variation selectors and emoji machinery too), cut to `max`, and badged.
pub fn ident(bytes: &[u8], max: usize) -> String {
    badged(&crate::safetext::escape_cut(
        bytes,
        crate::safetext::Options::security(),
        max,
    ))
}

/// [`ident`], or `-` for an empty id.
pub fn ident_dash(bytes: &[u8], max: usize) -> String {
    if bytes.is_empty() {
        "-".into()
    } else {
        ident(bytes, max)
    }
}

/// [`ident`] for a TEXT column of a row (stored bytes when not UTF-8).
pub fn ident_col(raw_invalid: &RawInvalid, column: &str, text: &str, max: usize) -> String {
    ident(super::shell::stored(raw_invalid, column, text), max)
}

/// `-` for an empty field, else the cleaned field.
pub fn dash(text: &str, max: usize) -> String {
    if text.is_empty() {
        "-".into()
    } else {
        clean(text, max)
    }
}

/// Whether a RUNNING run's lease has run out by this machine's clock: its holder stopped
/// renewing it (the process died?), and a worker or `resume` takes the run over.
pub fn lease_ran_out(r: &crate::runtime::types::Run) -> bool {
    r.status == crate::runtime::types::RunStatus::Running
        && !r.lease_owner.is_empty()
        && !r.lease_expires_at.is_zero()
        && r.lease_expires_at.sub(&Timestamp::now()) < 0
}

/// Local time as `2006-01-02 15:04:05 -0700` (`-` for the zero time).
pub fn stamp(ts: &Timestamp) -> String {
    stamp_with(ts, false)
}

/// Local time with milliseconds: `2006-01-02 15:04:05.000 -0700`.
pub fn stamp_ms(ts: &Timestamp) -> String {
    stamp_with(ts, true)
}

fn stamp_with(ts: &Timestamp, millis: bool) -> String {
    if ts.is_zero() {
        return "-".into();
    }
    let secs = ts.unix_secs();
    let ms = (ts.unix_nanos().rem_euclid(1_000_000_000) / 1_000_000) as u32;
    let (y, mo, d, h, mi, s, off) = local_parts(secs);
    let sign = if off < 0 { '-' } else { '+' };
    let off = off.unsigned_abs();
    let frac = if millis {
        format!(".{ms:03}")
    } else {
        String::new()
    };
    format!(
        "{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02}{frac} {sign}{:02}{:02}",
        off / 3600,
        (off % 3600) / 60
    )
}

/// (year, month, day, hour, minute, second, offset seconds east of UTC) in local time.
fn local_parts(secs: i64) -> (i64, u32, u32, u32, u32, u32, i64) {
    // SAFETY: localtime_r only writes into the tm we hand it; a zeroed tm is a valid value.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    let t: libc::time_t = secs as libc::time_t;
    let ok = unsafe { !libc::localtime_r(&t, &mut tm).is_null() };
    if !ok {
        return utc_parts(secs);
    }
    (
        tm.tm_year as i64 + 1900,
        (tm.tm_mon + 1) as u32,
        tm.tm_mday as u32,
        tm.tm_hour as u32,
        tm.tm_min as u32,
        tm.tm_sec as u32,
        tm.tm_gmtoff,
    )
}

/// Civil UTC parts from Unix seconds (used only when the C library cannot convert).
fn utc_parts(secs: i64) -> (i64, u32, u32, u32, u32, u32, i64) {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = crate::runtime::types::time::civil_from_days(days);
    (
        y,
        m as u32,
        d as u32,
        (rem / 3600) as u32,
        ((rem % 3600) / 60) as u32,
        (rem % 60) as u32,
        0,
    )
}

/// Left-aligned columns separated by two spaces, widths measured in display columns (the
/// cells are already escaped, so their width is what the terminal will draw).
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    use unicode_width::UnicodeWidthStr;
    let n = header.len();
    let mut widths: Vec<usize> = header.iter().map(|h| h.width()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate().take(n) {
            widths[i] = widths[i].max(c.width());
        }
    }
    let mut out = String::new();
    let mut line = |cells: Vec<&str>| {
        let mut l = String::new();
        for (i, c) in cells.iter().enumerate() {
            l.push_str(c);
            if i + 1 < cells.len() {
                let pad = widths[i].saturating_sub(c.width()) + 2;
                l.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line(header.to_vec());
    for r in rows {
        line(r.iter().map(String::as_str).collect());
    }
    out
}

/// A run's counter as a cell: the number, or `?` when the stored value is not an integer (it
/// is not shown as the 0 it was read as; `show RUN` names the column, `--json` in
/// `decode_error`). A negative one, which no runtime writes (agentrt's totals only grow from
/// 0), is shown with that said.
pub fn count_cell(r: &crate::runtime::types::Run, column: &str, n: i64) -> String {
    if r.unread(column) {
        "?".to_string()
    } else {
        negative_said(n, n.to_string())
    }
}

/// `shown`, followed by ` (negative: a damaged row?)` when `n` is below 0.
pub fn negative_said(n: i64, shown: String) -> String {
    if n < 0 {
        format!("{shown} (negative: a damaged row?)")
    } else {
        shown
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_parts_match_known_dates() {
        assert_eq!(utc_parts(0), (1970, 1, 1, 0, 0, 0, 0));
        // 2026-10-01T09:00:00Z
        assert_eq!(utc_parts(1_790_845_200), (2026, 10, 1, 9, 0, 0, 0));
    }

    #[test]
    fn table_aligns_by_display_width() {
        let t = table(
            &["A", "B"],
            &[
                vec!["日本".into(), "x".into()],
                vec!["a".into(), "y".into()],
            ],
        );
        assert_eq!(t, "A     B\n日本  x\na     y\n");
    }
}

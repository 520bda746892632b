//! Commands printed for a person to copy: every untrusted word (a run id, an approval id, the
//! database path) is quoted so that a POSIX shell reads back exactly the stored bytes, and the
//! printed text is printable ASCII only, so the terminal shows it as it is and it is never
//! passed through the terminal escaper (which would escape the quoting again).
//!
//! - A word of printable ASCII is written bare when it holds only `[A-Za-z0-9_./:@%+=,-]`, else
//!   in single quotes (`'` as `'\''`).
//! - A word with any other byte (controls, non-ASCII, invalid UTF-8 in a path) is written as
//!   `"$(printf '...')"` with those bytes as three-digit octal escapes: POSIX `printf` turns them
//!   back into the same bytes, and nothing else in the word is special (`%` is `%%`, `\` and `'`
//!   are octal too).
//! - A word no shell line can pass exactly is refused with the reason: a NUL byte (argv cannot
//!   hold one), a trailing line feed (command substitution drops it), and for ids an empty id
//!   or one starting with `-` (the commands refuse it as a flag). An id that is not UTF-8 is a
//!   printf word like any other: the commands take their id arguments as bytes.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Why a word cannot be written on a command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Untypable {
    /// A NUL byte: an argv word cannot hold one.
    Nul,
    /// A trailing line feed: command substitution would drop it.
    TrailingLineFeed,
    /// An empty id: the commands refuse it.
    Empty,
    /// An id starting with `-`: the commands would read it as a flag.
    LeadingDash,
}

impl Untypable {
    /// Says why, as the end of a sentence ("its id ...").
    pub fn why(self) -> &'static str {
        match self {
            Untypable::Nul => "holds a NUL byte",
            Untypable::TrailingLineFeed => "ends with a line feed",
            Untypable::Empty => "is empty",
            Untypable::LeadingDash => "starts with '-'",
        }
    }
}

fn bare(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-_./:@%+=,".contains(&b)
}

/// The shell word for `bytes` (see the module notes).
pub fn word(bytes: &[u8]) -> Result<String, Untypable> {
    if bytes.is_empty() {
        return Ok("''".into());
    }
    if bytes.contains(&0) {
        return Err(Untypable::Nul);
    }
    if bytes.iter().all(|&b| bare(b)) {
        // Only these bytes: ASCII, so the conversion cannot fail.
        return Ok(String::from_utf8_lossy(bytes).into_owned());
    }
    if bytes.iter().all(|&b| (0x20..=0x7e).contains(&b)) {
        let text = String::from_utf8_lossy(bytes);
        return Ok(format!("'{}'", text.replace('\'', "'\\''")));
    }
    if bytes.last() == Some(&b'\n') {
        return Err(Untypable::TrailingLineFeed);
    }
    let mut s = String::from("\"$(printf '");
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            // A format starting with `-` would be read by printf as an option.
            b'-' if i == 0 => s.push_str("\\055"),
            b'%' => s.push_str("%%"),
            b'\'' | b'\\' => s.push_str(&format!("\\{b:03o}")),
            0x20..=0x7e => s.push(b as char),
            _ => s.push_str(&format!("\\{b:03o}")),
        }
    }
    s.push_str("')\"");
    Ok(s)
}

/// The shell word for an id the commands take as an argument: also refuses what the commands
/// refuse (empty, a leading `-`). Bytes that are not UTF-8 are written as octal escapes and
/// reach the command as they are stored (its arguments are read as bytes).
pub fn id_word(bytes: &[u8]) -> Result<String, Untypable> {
    if bytes.is_empty() {
        return Err(Untypable::Empty);
    }
    if bytes[0] == b'-' {
        return Err(Untypable::LeadingDash);
    }
    word(bytes)
}

/// `--db WORD` for the database path; a relative path starting with `-` is written `./-...`
/// (the same file) so it cannot read as a flag.
pub fn db_arg(db: &Path) -> Result<String, Untypable> {
    let bytes = OsStr::as_bytes(db.as_os_str());
    let w = if bytes.first() == Some(&b'-') {
        let mut b = b"./".to_vec();
        b.extend_from_slice(bytes);
        word(&b)?
    } else {
        word(bytes)?
    };
    Ok(format!("--db {w}"))
}

/// `countersign --db PATH <rest>`, or why it cannot be typed (`the database path ends with a
/// line feed`), for the caller's sentence. `rest` is built by the caller from
/// [`word`]/[`id_word`] results and our own words.
pub fn command(db: &Path, rest: &str) -> Result<String, String> {
    match db_arg(db) {
        Ok(d) => Ok(format!("countersign {d} {rest}")),
        Err(why) => Err(format!("the database path {}", why.why())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_printable_ascii() {
        for b in [
            &b"t-4711'$(touch X)'"[..],
            b"\x1b]0;x\x07",
            "о\u{202e}".as_bytes(),
            b"a%b\\c'd",
        ] {
            let w = word(b).unwrap();
            assert!(w.bytes().all(|c| (0x20..=0x7e).contains(&c)), "{w}");
        }
        assert_eq!(word(b"abc").unwrap(), "abc");
        assert_eq!(word(b"a b").unwrap(), "'a b'");
        assert_eq!(word(b"a'b").unwrap(), "'a'\\''b'");
        assert_eq!(word(b"\x1b%").unwrap(), "\"$(printf '\\033%%')\"");
        assert_eq!(word(b"a\n"), Err(Untypable::TrailingLineFeed));
        assert_eq!(id_word(b"-rf"), Err(Untypable::LeadingDash));
        assert_eq!(id_word(b"t-\xff").unwrap(), "\"$(printf 't-\\377')\"");
    }

    /// What `sh` reads back from a word is the bytes it was made of, whatever they start with.
    #[test]
    fn sh_reads_back_the_bytes() {
        for b in [
            &b"-a\x1b b"[..],
            b"--\xff",
            b"-",
            b"%s\\'\"$(x)`y`",
            b"-e \nx",
            "\u{202e}x".as_bytes(),
        ] {
            let w = word(b).unwrap();
            let out = std::process::Command::new("sh")
                .arg("-c")
                .arg(format!("printf %s {w}"))
                .output()
                .unwrap();
            assert!(out.status.success(), "{w}: {:?}", out.stderr);
            assert_eq!(out.stdout, b, "{w}");
        }
    }
}

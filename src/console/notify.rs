//! What the terminal is sent when a new approval arrives while the console is open (issue 21;
//! `[queue] notify`, off by default): a bell, or a desktop notification through OSC 9 or
//! OSC 777. The text is fixed wording and a count the console computed; nothing stored is
//! ever put inside an OSC, and the text goes through the sanitiser and is checked to be
//! printable ASCII without `;` (which OSC 777 uses between its fields) before it is sent.

use std::io::Write;

use super::settings::Notify;
use super::text;

/// The title an OSC 777 notification carries.
const TITLE: &str = "countersign";

/// The notification's text: fixed words and the number pending.
pub fn wording(pending: u64) -> String {
    match pending {
        1 => "a new approval is waiting (1 pending)".to_string(),
        n => format!("a new approval is waiting ({n} pending)"),
    }
}

/// `s` through the sanitiser, and then only printable ASCII other than `;` (anything else
/// would be a sanitiser's escape, so it never happens; it becomes `?` if it ever did).
fn osc_text(s: &str) -> String {
    text::escaped(s.as_bytes())
        .chars()
        .map(|c| {
            if c.is_ascii_graphic() && c != ';' || c == ' ' {
                c
            } else {
                '?'
            }
        })
        .collect()
}

/// The bytes for one notification (none when off).
pub fn bytes(how: Notify, pending: u64) -> Vec<u8> {
    let body = osc_text(&wording(pending));
    match how {
        Notify::Off => Vec::new(),
        Notify::Bell => b"\x07".to_vec(),
        Notify::Osc9 => format!("\x1b]9;{TITLE}: {body}\x07").into_bytes(),
        Notify::Osc777 => format!("\x1b]777;notify;{TITLE};{body}\x07").into_bytes(),
    }
}

/// Writes one notification to the terminal.
pub fn send(w: &mut impl Write, how: Notify, pending: u64) -> std::io::Result<()> {
    let b = bytes(how, pending);
    if b.is_empty() {
        return Ok(());
    }
    w.write_all(&b)?;
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_setting_sends_its_own_sequence_and_nothing_else() {
        assert_eq!(bytes(Notify::Off, 3), b"");
        assert_eq!(bytes(Notify::Bell, 3), b"\x07");
        assert_eq!(
            bytes(Notify::Osc9, 3),
            b"\x1b]9;countersign: a new approval is waiting (3 pending)\x07"
        );
        assert_eq!(
            bytes(Notify::Osc777, 1),
            b"\x1b]777;notify;countersign;a new approval is waiting (1 pending)\x07"
        );
    }

    #[test]
    fn text_inside_an_osc_is_printable_ascii_without_separators() {
        assert_eq!(osc_text("a;b\x07c\u{202e}d"), "a?b\\x07c\\u{202e}d");
    }
}

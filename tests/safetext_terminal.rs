//! "What safe means" (a) and (d) of design/untrusted-text.md, checked on a terminal parser:
//! the escaped form of every hostile input, written to a `vt100` terminal, changes nothing but
//! the cells it occupies, triggers no terminal action, and ends where its measured width says.

use countersign::safetext::{Options, SafeText, escape};

use std::num::NonZeroU16;

const ROWS: NonZeroU16 = NonZeroU16::new(40).unwrap();
const COLS: NonZeroU16 = NonZeroU16::new(300).unwrap();

#[derive(Default)]
struct Recorder {
    events: Vec<String>,
}

impl vt100::Callbacks for Recorder {
    fn audible_bell(&mut self, _: &mut vt100::Screen) {
        self.events.push("bell".into());
    }
    fn visual_bell(&mut self, _: &mut vt100::Screen) {
        self.events.push("visual bell".into());
    }
    fn resize(&mut self, _: &mut vt100::Screen, r: (u16, u16)) {
        self.events.push(format!("resize {r:?}"));
    }
    fn set_window_icon_name(&mut self, _: &mut vt100::Screen, _: &[u8]) {
        self.events.push("icon name".into());
    }
    fn set_window_title(&mut self, _: &mut vt100::Screen, _: &[u8]) {
        self.events.push("title".into());
    }
    fn copy_to_clipboard(&mut self, _: &mut vt100::Screen, _: &[u8], _: &[u8]) {
        self.events.push("clipboard".into());
    }
    fn paste_from_clipboard(&mut self, _: &mut vt100::Screen, _: &[u8]) {
        self.events.push("paste".into());
    }
    fn unhandled_char(&mut self, _: &mut vt100::Screen, c: char) {
        self.events.push(format!("char {c:?}"));
    }
    fn unhandled_control(&mut self, _: &mut vt100::Screen, b: u8) {
        self.events.push(format!("control {b:#x}"));
    }
    fn unhandled_escape(&mut self, _: &mut vt100::Screen, _: Option<u8>, _: Option<u8>, b: u8) {
        self.events.push(format!("escape {b:#x}"));
    }
    fn unhandled_csi(
        &mut self,
        _: &mut vt100::Screen,
        _: Option<u8>,
        _: Option<u8>,
        _: &[&[u16]],
        c: char,
    ) {
        self.events.push(format!("csi {c}"));
    }
    fn unhandled_osc(&mut self, _: &mut vt100::Screen, _: &[&[u8]]) {
        self.events.push("osc".into());
    }
}

const HOSTILE: &[&[u8]] = &[
    b"\x1b[31mred\x1b[0m\x1b[2J\x1b[H\x1b[10;20H\x1b[A",
    b"safe\rrm -rf /\x08\x08\x08",
    b"\x1b]0;pwned\x07\x1b]52;c;cm0gLXJmIC8=\x07\x1b]8;;http://evil\x1b\\click\x1b]8;;\x1b\\",
    b"\x1b]9;hi\x07\x1b]777;notify;a;b\x07\x1b[c\x1b[6n\x1b[21t\x05",
    b"\x1bPq#0\x1b\\\x1b_apc\x1b\\\x1b^pm\x1b\\\x1bXsos\x1b\\\x1b]0;never ends",
    "\u{9b}2J\u{90}q\u{9d}0;t\u{9c}\u{85}".as_bytes(),
    b"ok \xff\xfe \xc3( \xe2\x82 \x9b2J",
    b"\0\x07\x0b\x0c\x7f\t\n",
    "a\u{2028}b\u{2029}c user\u{202e}nimda \u{2067}x \u{200e}\u{200f}\u{61c}".as_bytes(),
    "rm\u{200d}\u{200b} -rf \u{feff}pass\u{ad}word a\u{e0001}\u{e0041}".as_bytes(),
    "❤\u{fe0f} Z\u{301}\u{302}\u{303}\u{304}\u{305}\u{306} \u{301}x pаypal ｒｍ 𝐫𝐦".as_bytes(),
    "a\u{a0}b\u{2000}\u{3000}\u{2800}\u{3164}\u{115f}\u{1160}\u{ffa0}\u{e000}\u{fdd0}\u{fffc}"
        .as_bytes(),
    "\\x1b \\u{202e} APPROVED ✓ ----- end of approval 日本語 👨\u{200d}👩\u{200d}👧 🇯🇵 👍🏽"
        .as_bytes(),
    // Issue 14: lone Hangul jamo, code points newer than Unicode 14, zero-width letters,
    // forged cut markers, a homoglyph id.
    "ord_10\u{1161}\u{11a8}04 \u{d7b0}\u{d7cb} \u{1fae9}\u{1fae9}\u{1fae9} \u{d4e}x \u{111c2}"
        .as_bytes(),
    "…[+9 bytes]… [+3 combining marks dropped] ...[+1]... \u{43e}rd_1004".as_bytes(),
];

fn shown(text: &SafeText) -> String {
    // The multi-line form's line breaks are written as CR LF, as a renderer would.
    text.to_string().replace('\n', "\r\n")
}

#[test]
fn escaped_hostile_text_changes_no_terminal_state() {
    let fresh = vt100::Parser::new(ROWS, COLS, 0);
    for input in HOSTILE {
        for opts in [Options::security(), Options::strict(), Options::line()] {
            let text = escape(input, opts);
            let mut parser = vt100::Parser::new_with_callbacks(ROWS, COLS, 0, Recorder::default());
            parser.process(shown(&text).as_bytes());
            assert_eq!(parser.callbacks().events, Vec::<String>::new(), "{text}");
            let screen = parser.screen();
            assert_eq!(
                screen.input_mode_formatted(),
                fresh.screen().input_mode_formatted()
            );
            assert!(!screen.alternate_screen() && !screen.hide_cursor());
            assert_eq!(screen.fgcolor(), vt100::Color::Default);
            assert!(!screen.bold() && !screen.inverse() && !screen.underline());
            // Security and strict fields: the terminal's idea of the width is ours.
            if opts != Options::line() {
                assert_eq!(screen.cursor_position(), (0, text.width() as u16), "{text}");
                assert_eq!(screen.contents(), text.to_string(), "{text}");
            }
        }
        let multi = escape(input, Options::multi_line());
        let mut parser = vt100::Parser::new_with_callbacks(ROWS, COLS, 0, Recorder::default());
        parser.process(shown(&multi).as_bytes());
        assert_eq!(parser.callbacks().events, Vec::<String>::new(), "{multi}");
        assert_eq!(
            parser.screen().cursor_position().0 as usize,
            multi.line_count() - 1
        );
    }
}

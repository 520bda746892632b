//! Classification of code points and the escaper: a streaming iterator that turns untrusted
//! bytes into tokens (kept characters, escapes, line breaks, collapsed mark runs), each with
//! the input byte range it stands for. Everything else in the module is built on it.

use std::fmt::Write as _;

use unicode_general_category::{GeneralCategory as Gc, get_general_category};

use super::{Field, Form, Marks, Mode, Options};

/// Why a code point (or byte) was escaped; drives the badges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reason {
    /// A literal backslash (or quote in JSON strings): escaped so data cannot forge notation.
    Notation,
    /// LF, CR, TAB.
    Whitespace,
    /// C0, DEL, C1.
    Control,
    /// Bidi embeddings, overrides, isolates and implicit marks.
    Bidi,
    /// Zero-width, invisible, default-ignorable, tags, space look-alikes.
    Invisible,
    /// Private use, unassigned, noncharacters, U+FFF9–FFFC.
    Unassigned,
    /// A combining mark with nothing to combine with, or beyond the kept run.
    Mark,
    /// Emoji machinery escaped in security fields.
    Emoji,
    /// Any other non-ASCII code point in strict mode.
    NonAscii,
    /// A byte that is not part of valid UTF-8.
    InvalidUtf8,
}

/// How one escape is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Esc {
    Backslash,
    Quote,
    Newline,
    Tab,
    Cr,
    /// `\xNN`: an ASCII control byte or an invalid byte.
    Byte(u8),
    /// `\u{XXXX}`.
    Char(char),
}

impl Esc {
    pub(crate) fn write_to(self, out: &mut String) {
        match self {
            Esc::Backslash => out.push_str("\\\\"),
            Esc::Quote => out.push_str("\\\""),
            Esc::Newline => out.push_str("\\n"),
            Esc::Tab => out.push_str("\\t"),
            Esc::Cr => out.push_str("\\r"),
            Esc::Byte(b) => {
                let _ = write!(out, "\\x{b:02x}");
            }
            Esc::Char(c) => {
                let _ = write!(out, "\\u{{{:04x}}}", c as u32);
            }
        }
    }

    /// The display width (= byte length, the escape is ASCII).
    pub(crate) fn width(self) -> usize {
        match self {
            Esc::Backslash | Esc::Quote | Esc::Newline | Esc::Tab | Esc::Cr => 2,
            Esc::Byte(_) => 4,
            Esc::Char(c) => {
                let digits = (32 - (c as u32).leading_zeros()).div_ceil(4).max(4) as usize;
                digits + 4
            }
        }
    }
}

/// What the classification says about one code point, before context is considered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Class {
    Keep,
    /// A combining mark that may be kept after a base character.
    Mark,
    /// A Hangul conjoining vowel or final (U+1161–U+11FF, U+D7B0–U+D7FF): kept only where it
    /// joins the syllable before it, else it would be drawn as nothing.
    Jamo(Hangul),
    LineBreak,
    Escape(Esc, Reason),
}

fn in_ranges(c: u32, ranges: &[(u32, u32)]) -> bool {
    ranges.iter().any(|&(lo, hi)| (lo..=hi).contains(&c))
}

const BIDI: &[(u32, u32)] = &[
    (0x061C, 0x061C),
    (0x200E, 0x200F),
    (0x202A, 0x202E),
    (0x2066, 0x2069),
];

/// Default_Ignorable_Code_Point (DerivedCoreProperties.txt, Unicode 16).
const DEFAULT_IGNORABLE: &[(u32, u32)] = &[
    (0x00AD, 0x00AD),
    (0x034F, 0x034F),
    (0x061C, 0x061C),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x206F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
];

/// Blank-looking characters that are letters or symbols by category.
const SPACE_LOOKALIKES: &[(u32, u32)] = &[
    (0x115F, 0x1160),
    (0x2800, 0x2800),
    (0x3164, 0x3164),
    (0xFFA0, 0xFFA0),
];

pub(crate) fn is_variation_selector(c: char) -> bool {
    in_ranges(c as u32, &[(0xFE00, 0xFE0F), (0xE0100, 0xE01EF)])
}

pub(crate) fn is_default_ignorable(c: char) -> bool {
    in_ranges(c as u32, DEFAULT_IGNORABLE)
}

pub(crate) fn is_bidi_control(c: char) -> bool {
    in_ranges(c as u32, BIDI)
}

fn is_noncharacter(c: u32) -> bool {
    (0xFDD0..=0xFDEF).contains(&c) || (c & 0xFFFE) == 0xFFFE
}

/// Emoji machinery whose width terminals disagree on; escaped in security fields.
fn is_emoji_machinery(c: char) -> bool {
    in_ranges(
        c as u32,
        &[
            (0x1F1E6, 0x1F1FF), // regional indicators
            (0x1F3FB, 0x1F3FF), // skin tone modifiers
            (0x20E3, 0x20E3),   // combining enclosing keycap
        ],
    ) || is_variation_selector(c)
}

fn is_mark(gc: Gc) -> bool {
    matches!(gc, Gc::NonspacingMark | Gc::SpacingMark | Gc::EnclosingMark)
}

/// The Hangul syllable type of a character (UAX #29's Hangul_Syllable_Type), for the jamo rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Hangul {
    /// Leading consonant (choseong).
    L,
    /// Vowel (jungseong).
    V,
    /// Trailing consonant (jongseong).
    T,
    /// A precomposed syllable without a final.
    Lv,
    /// A precomposed syllable with a final.
    Lvt,
}

pub(crate) fn hangul_type(c: char) -> Option<Hangul> {
    let cp = c as u32;
    match cp {
        0x1100..=0x115F | 0xA960..=0xA97C => Some(Hangul::L),
        0x1160..=0x11A7 | 0xD7B0..=0xD7C6 => Some(Hangul::V),
        0x11A8..=0x11FF | 0xD7CB..=0xD7FB => Some(Hangul::T),
        0xAC00..=0xD7A3 if (cp - 0xAC00).is_multiple_of(28) => Some(Hangul::Lv),
        0xAC00..=0xD7A3 => Some(Hangul::Lvt),
        _ => None,
    }
}

/// Whether a vowel or final `next` joins the syllable ending in `prev` (UAX #29 GB6–GB8).
fn joins(prev: Option<Hangul>, next: Hangul) -> bool {
    use Hangul::*;
    matches!(
        (prev, next),
        (Some(L | V | Lv), V) | (Some(V | T | Lv | Lvt), T)
    )
}

/// The context-free class of a code point under `opts`.
pub(crate) fn classify(c: char, opts: &Options) -> Class {
    match c {
        '\\' => return Class::Escape(Esc::Backslash, Reason::Notation),
        '"' if opts.escape_quote => return Class::Escape(Esc::Quote, Reason::Notation),
        '\n' if opts.form == Form::MultiLine => return Class::LineBreak,
        '\n' => return Class::Escape(Esc::Newline, Reason::Whitespace),
        '\t' => return Class::Escape(Esc::Tab, Reason::Whitespace),
        '\r' => return Class::Escape(Esc::Cr, Reason::Whitespace),
        '\0'..='\x1f' | '\x7f' => return Class::Escape(Esc::Byte(c as u8), Reason::Control),
        ' '..='~' => return Class::Keep,
        _ => {}
    }
    let cp = c as u32;
    if opts.mode == Mode::Strict {
        let reason = if (0x80..=0x9F).contains(&cp) {
            Reason::Control
        } else if is_bidi_control(c) {
            Reason::Bidi
        } else if is_default_ignorable(c) {
            Reason::Invisible
        } else {
            Reason::NonAscii
        };
        return Class::Escape(Esc::Char(c), reason);
    }
    let esc = |reason| Class::Escape(Esc::Char(c), reason);
    if is_bidi_control(c) {
        return esc(Reason::Bidi);
    }
    let gc = get_general_category(c);
    if is_variation_selector(c) {
        return if opts.field == Field::Security {
            esc(Reason::Emoji)
        } else {
            Class::Mark
        };
    }
    if is_default_ignorable(c) || in_ranges(cp, SPACE_LOOKALIKES) {
        return esc(Reason::Invisible);
    }
    match gc {
        Gc::Control => return esc(Reason::Control),
        Gc::Format | Gc::LineSeparator | Gc::ParagraphSeparator | Gc::SpaceSeparator => {
            return esc(Reason::Invisible);
        }
        Gc::PrivateUse | Gc::Unassigned | Gc::Surrogate => return esc(Reason::Unassigned),
        _ => {}
    }
    if is_noncharacter(cp) || (0xFFF9..=0xFFFC).contains(&cp) {
        return esc(Reason::Unassigned);
    }
    if !super::age::assigned_in_14(c) {
        // Newer than the width tables of the terminals in use: drawn as nothing or misaligned.
        return esc(Reason::Unassigned);
    }
    if opts.field == Field::Security && is_emoji_machinery(c) {
        return esc(Reason::Emoji);
    }
    if let Some(h @ (Hangul::V | Hangul::T)) = hangul_type(c) {
        return Class::Jamo(h);
    }
    if is_mark(gc) {
        return Class::Mark;
    }
    let mut buf = [0u8; 4];
    if unicode_width::UnicodeWidthStr::width(&*c.encode_utf8(&mut buf)) == 0 {
        // Alone it measures zero columns (e.g. the prepended letters U+0D4E, U+111C2): a
        // widget drops such a cluster, so it is escaped.
        return esc(Reason::Invisible);
    }
    Class::Keep
}

/// One code point or invalid byte decoded at `pos`: `Ok((char, len))` or `Err(byte)`.
pub(crate) fn decode_at(bytes: &[u8], pos: usize) -> Result<(char, usize), u8> {
    let b = bytes[pos];
    if b < 0x80 {
        return Ok((b as char, 1));
    }
    let len = match b {
        0xC2..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF4 => 4,
        _ => return Err(b),
    };
    let end = pos + len;
    if end > bytes.len() {
        return Err(b);
    }
    match std::str::from_utf8(&bytes[pos..end]) {
        Ok(s) => match s.chars().next() {
            Some(c) => Ok((c, len)),
            None => Err(b),
        },
        Err(_) => Err(b),
    }
}

/// Whether a variation selector after `base` may select a visible variant: after non-ASCII
/// characters (emoji, CJK ideographs) and the keycap bases `0-9 # *`.
fn selects_variation(base: Option<char>) -> bool {
    base.is_some_and(|b| !b.is_ascii() || b.is_ascii_digit() || b == '#' || b == '*')
}

/// A token of escaped output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Token {
    /// A character kept as it is.
    Text(char),
    /// An escape and why.
    Esc(Esc, Reason),
    /// A real line break (multi-line form).
    LineBreak,
    /// A run of combining marks dropped (count).
    MarksCut(usize),
}

/// A token and the input bytes it stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Item {
    pub(crate) token: Token,
    pub(crate) start: usize,
    pub(crate) end: usize,
}

/// The streaming escaper. It holds no output: it yields tokens one at a time.
#[derive(Clone, Debug)]
pub(crate) struct Escaper<'a> {
    input: &'a [u8],
    pos: usize,
    opts: Options,
    /// The kept character a combining mark may attach to (`None` at the start of a field,
    /// after an escape or a line break).
    base: Option<char>,
    /// Marks kept since that base.
    run: usize,
    /// The Hangul type of the character just kept (`None` after anything else).
    hangul: Option<Hangul>,
    /// Marks dropped since that base (pending marker) and where they started.
    cut: usize,
    cut_start: usize,
    pending: Option<Item>,
}

impl<'a> Escaper<'a> {
    /// An escaper over `input` from its start (the start of a field).
    pub(crate) fn new(input: &'a [u8], opts: Options) -> Self {
        Escaper::starting_at(input, 0, opts)
    }

    /// An escaper from `pos`, in the state of a field start. Callers use only positions
    /// where the state of a full pass would be the same (see `width::is_sync_point`).
    pub(crate) fn starting_at(input: &'a [u8], pos: usize, opts: Options) -> Self {
        Escaper {
            input,
            pos,
            opts,
            base: None,
            run: 0,
            hangul: None,
            cut: 0,
            cut_start: pos,
            pending: None,
        }
    }

    /// Bytes of input examined so far (from the start position).
    pub(crate) fn position(&self) -> usize {
        self.pos
    }

    fn flush_cut(&mut self, next: Option<Item>) -> Option<Item> {
        let marker = Item {
            token: Token::MarksCut(self.cut),
            start: self.cut_start,
            end: self.pos_before_pending(next),
        };
        self.cut = 0;
        self.pending = next;
        Some(marker)
    }

    fn pos_before_pending(&self, next: Option<Item>) -> usize {
        next.map_or(self.pos, |item| item.start)
    }
}

impl Iterator for Escaper<'_> {
    type Item = Item;

    fn next(&mut self) -> Option<Item> {
        if let Some(item) = self.pending.take() {
            return Some(item);
        }
        loop {
            if self.pos >= self.input.len() {
                if self.cut > 0 {
                    return self.flush_cut(None);
                }
                return None;
            }
            let start = self.pos;
            let (token, len) = match decode_at(self.input, start) {
                Err(b) => {
                    self.base = None;
                    self.run = 0;
                    (Some(Token::Esc(Esc::Byte(b), Reason::InvalidUtf8)), 1)
                }
                Ok((c, len)) => {
                    let next = self.input.get(start + len).copied();
                    let following = (start + len < self.input.len())
                        .then(|| decode_at(self.input, start + len).ok())
                        .flatten()
                        .map(|(f, _)| f);
                    (self.token_for(c, next, following), len)
                }
            };
            self.pos = start + len;
            let Some(token) = token else {
                continue; // a mark folded into the pending cut
            };
            let item = Item {
                token,
                start,
                end: self.pos,
            };
            if self.cut > 0 {
                return self.flush_cut(Some(item));
            }
            return Some(item);
        }
    }
}

impl Escaper<'_> {
    /// The token for `c` in the current context, updating the context; `None` when the
    /// mark joins the dropped run.
    fn token_for(&mut self, c: char, next: Option<u8>, following: Option<char>) -> Option<Token> {
        let hangul = self.hangul.take();
        if c == '[' && next == Some(b'+') {
            // `[+` starts every cut marker (`…[+9 bytes]…`, `[+3 combining marks dropped]`):
            // in the data it is escaped, so only a real marker shows `[+`.
            self.base = None;
            self.run = 0;
            return Some(Token::Esc(Esc::Byte(b'['), Reason::Notation));
        }
        match classify(c, &self.opts) {
            Class::Keep
                if hangul_type(c) == Some(Hangul::L)
                    && matches!(
                        following.and_then(hangul_type),
                        Some(Hangul::L | Hangul::Lv | Hangul::Lvt)
                    ) =>
            {
                // A leading consonant before another one or a whole syllable: one cluster by
                // UAX #29 (two columns), but terminals draw each (four), which leaves glyphs
                // behind on the next screen. Escaped; the syllable after it stands alone.
                self.base = None;
                self.run = 0;
                Some(Token::Esc(Esc::Char(c), Reason::Invisible))
            }
            Class::Keep => {
                self.base = Some(c);
                self.run = 0;
                self.hangul = hangul_type(c);
                Some(Token::Text(c))
            }
            Class::Jamo(h) if joins(hangul, h) => {
                self.base = Some(c);
                self.run = 0;
                self.hangul = Some(h);
                Some(Token::Text(c))
            }
            Class::Jamo(_) => {
                // Alone it is a zero-width cluster a widget drops: escaped, never stripped.
                self.base = None;
                self.run = 0;
                Some(Token::Esc(Esc::Char(c), Reason::Invisible))
            }
            Class::LineBreak => {
                self.base = None;
                self.run = 0;
                Some(Token::LineBreak)
            }
            Class::Escape(esc, reason) => {
                self.base = None;
                self.run = 0;
                Some(Token::Esc(esc, reason))
            }
            Class::Mark if self.base.is_none() => Some(Token::Esc(Esc::Char(c), Reason::Mark)),
            Class::Mark if is_variation_selector(c) && !selects_variation(self.base) => {
                // A selector after a plain ASCII letter or sign changes nothing visible.
                self.base = None;
                self.run = 0;
                Some(Token::Esc(Esc::Char(c), Reason::Invisible))
            }
            Class::Mark if self.run < self.opts.max_marks => {
                self.run += 1;
                Some(Token::Text(c))
            }
            Class::Mark => match self.opts.marks {
                Marks::Collapse => {
                    if self.cut == 0 {
                        self.cut_start = self.pos;
                    }
                    self.cut += 1;
                    None
                }
                Marks::EscapeExcess => {
                    self.base = None;
                    Some(Token::Esc(Esc::Char(c), Reason::Mark))
                }
            },
        }
    }
}

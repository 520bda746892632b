//! Badges: what a field held that a reviewer should be warned about, found while escaping.

use unicode_general_category::{GeneralCategory as Gc, get_general_category};
use unicode_normalization::{IsNormalized, UnicodeNormalization, is_nfkc_quick};
use unicode_script::{Script, ScriptExtension, UnicodeScript};

use super::escape::Reason;

/// One warning about a field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Badge {
    /// Bidi embeddings, overrides, isolates or implicit marks (all shown escaped).
    Bidi,
    /// Zero-width, invisible, blank look-alike, tag, private use or unassigned characters.
    Invisible,
    /// C0/C1 controls or DEL (shown escaped).
    Control,
    /// Bytes that are not valid UTF-8 (shown as `\xNN`).
    InvalidUtf8,
    /// A word mixing scripts (e.g. Latin with a Cyrillic `а`), a homoglyph warning.
    MixedScript,
    /// Compatibility look-alike letters or digits (fullwidth, mathematical, circled...).
    Lookalike,
    /// Part of the value is not shown (width cut or dropped combining marks).
    Cut,
    /// A JSON object with the same key more than once.
    DuplicateKey,
}

const ALL: [Badge; 8] = [
    Badge::Bidi,
    Badge::Invisible,
    Badge::Control,
    Badge::InvalidUtf8,
    Badge::MixedScript,
    Badge::Lookalike,
    Badge::Cut,
    Badge::DuplicateKey,
];

impl Badge {
    /// A short label (`bidi`, `invisible`, ...), ASCII.
    pub fn label(self) -> &'static str {
        match self {
            Badge::Bidi => "bidi",
            Badge::Invisible => "invisible",
            Badge::Control => "control",
            Badge::InvalidUtf8 => "invalid utf-8",
            Badge::MixedScript => "mixed scripts",
            Badge::Lookalike => "look-alike",
            Badge::Cut => "cut",
            Badge::DuplicateKey => "duplicate key",
        }
    }

    fn bit(self) -> u16 {
        1 << (self as u16)
    }
}

/// A set of badges.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Badges(u16);

impl Badges {
    /// Whether the set holds `badge`.
    pub fn contains(self, badge: Badge) -> bool {
        self.0 & badge.bit() != 0
    }

    /// Whether the set is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The badges in a fixed order.
    pub fn iter(self) -> impl Iterator<Item = Badge> {
        ALL.into_iter().filter(move |b| self.contains(*b))
    }

    /// Both sets together.
    pub fn union(self, other: Badges) -> Badges {
        Badges(self.0 | other.0)
    }

    pub(crate) fn insert(&mut self, badge: Badge) {
        self.0 |= badge.bit();
    }
}

/// Streams over the tokens of one field and collects its badges.
#[derive(Debug, Default)]
pub(crate) struct Scanner {
    badges: Badges,
    /// The scripts the current word can be in (augmented; `None` = no word yet).
    word: Option<ScriptExtension>,
}

impl Scanner {
    pub(crate) fn kept(&mut self, c: char) {
        if c.is_ascii() {
            self.kept_ascii(c);
            return;
        }
        let gc = get_general_category(c);
        let wordish = matches!(
            gc,
            Gc::UppercaseLetter
                | Gc::LowercaseLetter
                | Gc::TitlecaseLetter
                | Gc::ModifierLetter
                | Gc::OtherLetter
                | Gc::NonspacingMark
                | Gc::SpacingMark
                | Gc::EnclosingMark
                | Gc::DecimalNumber
                | Gc::LetterNumber
                | Gc::OtherNumber
        );
        if !c.is_ascii() && is_lookalike(c, gc) {
            self.badges.insert(Badge::Lookalike);
        }
        if !wordish {
            self.word = None;
            return;
        }
        let ext = augmented(c);
        if ext.is_common() || ext.is_inherited() {
            return;
        }
        let word = self.word.get_or_insert_with(ScriptExtension::default);
        let was_empty = word.is_empty();
        word.intersect_with(ext);
        if word.is_empty() && !was_empty {
            self.badges.insert(Badge::MixedScript);
        }
    }

    /// The ASCII fast path: letters are Latin, digits belong to every script.
    fn kept_ascii(&mut self, c: char) {
        if c.is_ascii_digit() {
            return;
        }
        if !c.is_ascii_alphabetic() {
            self.word = None;
            return;
        }
        let word = self.word.get_or_insert_with(ScriptExtension::default);
        let was_empty = word.is_empty();
        word.intersect_with(Script::Latin.into());
        if word.is_empty() && !was_empty {
            self.badges.insert(Badge::MixedScript);
        }
    }

    pub(crate) fn escaped(&mut self, reason: Reason) {
        match reason {
            Reason::Bidi => self.badges.insert(Badge::Bidi),
            Reason::Invisible | Reason::Unassigned => self.badges.insert(Badge::Invisible),
            Reason::Control => self.badges.insert(Badge::Control),
            Reason::InvalidUtf8 => self.badges.insert(Badge::InvalidUtf8),
            Reason::Whitespace => self.word = None,
            Reason::Notation | Reason::Mark | Reason::Emoji | Reason::NonAscii => {}
        }
    }

    /// A line break, cut marker or other word separator.
    pub(crate) fn separator(&mut self) {
        self.word = None;
    }

    pub(crate) fn cut(&mut self) {
        self.badges.insert(Badge::Cut);
    }

    pub(crate) fn finish(self) -> Badges {
        self.badges
    }
}

/// The script extension of `c`, augmented as UTS #39 does so that Japanese (Han + kana) and
/// Korean (Han + Hangul) words are not reported as mixed.
fn augmented(c: char) -> ScriptExtension {
    let ext = c.script_extension();
    if ext.is_common() || ext.is_inherited() {
        return ext;
    }
    let has = |s: Script| ext.contains_script(s);
    let mut out = ext;
    let cjk = [
        Script::Han,
        Script::Hiragana,
        Script::Katakana,
        Script::Hangul,
        Script::Bopomofo,
    ];
    if cjk.iter().any(|s| has(*s)) {
        for s in cjk {
            out = out.union(s.into());
        }
    }
    out
}

/// A letter or digit whose compatibility form is another character: fullwidth `ｒ`,
/// mathematical `𝐫`, circled `ⓡ`, ...
fn is_lookalike(c: char, gc: Gc) -> bool {
    if matches!(gc, Gc::NonspacingMark | Gc::SpacingMark | Gc::EnclosingMark) {
        return false;
    }
    if is_nfkc_quick(std::iter::once(c)) == IsNormalized::Yes {
        return false;
    }
    let mut nfkc = std::iter::once(c).nfkc();
    match (nfkc.next(), nfkc.next()) {
        (Some(first), None) => first != c && first.is_ascii_alphanumeric(),
        _ => false,
    }
}

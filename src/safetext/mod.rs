//! Safe text: the one module through which every untrusted string passes before it is shown.
//!
//! Untrusted bytes (database TEXT may hold invalid UTF-8) become a [`SafeText`]: a list of
//! [`Segment`]s (plain text, escapes, cut markers, line breaks) that a theme can style and that
//! contains nothing a terminal would act on. Only this module builds a `SafeText`.
//!
//! # The escape notation (reversible)
//!
//! | shown            | stands for                                                       |
//! |------------------|------------------------------------------------------------------|
//! | `\\`             | one backslash (so data can never forge an escape)                |
//! | `\n` `\t` `\r`   | LF, TAB, CR (LF is a real line break in the multi-line form)     |
//! | `\xNN`, NN < 80  | that ASCII control byte (C0 controls other than the three, DEL), or `\x5b`: a `[` followed by `+` in the data, so a cut marker (which starts `[+` or `…[+`) cannot be forged |
//! | `\xNN`, NN >= 80 | one byte of invalid UTF-8, never a lossy U+FFFD                  |
//! | `\u{XXXX}`       | that code point (lowercase hex, at least 4 digits), e.g. C1 controls, bidi controls, invisible characters, spaces other than U+0020, private use, unassigned, combining marks with nothing to combine with |
//! | `\"`             | a double quote, only inside strings of the JSON rendering        |
//!
//! Cut markers (`…[+9812 bytes]…` for a width cut, `[+41 combining marks dropped]` for a
//! collapsed run of combining marks) are [`SegmentKind::Cut`] segments, not part of the
//! reversible text: [`decode`] turns the escaped text of an uncut value back into the original
//! bytes, and [`SafeText::decode`] refuses a value that was cut.
//!
//! # Modes and forms
//!
//! - [`Mode::Readable`] keeps letters of every script; [`Mode::Strict`] escapes every non-ASCII
//!   code point.
//! - [`Form::OneLine`] escapes LF; [`Form::MultiLine`] makes it a [`SegmentKind::LineBreak`].
//! - [`Field::Security`] (tool names, arguments, ids) also escapes variation selectors, emoji
//!   modifiers, regional indicators and the keycap mark, whose widths terminals disagree on.

mod age;
mod badges;
mod decode;
mod escape;
mod json;
mod segments;
pub mod shell;
mod width;
mod wrap;

pub use badges::{Badge, Badges};
pub use decode::{DecodeError, decode};
pub use json::{
    JsonError, JsonField, JsonNode, JsonOptions, MAX_JSON_DEPTH, json_fields, parse_json,
    quoted_text as quoted, render_json,
};
pub use segments::{SafeText, Segment, SegmentKind, text_width};
pub use width::{escape_cut, plain_line, plain_line_strict, plain_line_with};

/// How far the escaping goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Letters of every script are kept; everything the policy names is escaped.
    Readable,
    /// ASCII only: every code point above U+007E is escaped (forensic view).
    Strict,
}

/// Whether line feeds stay escapes or become line breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Form {
    /// LF, CR and TAB are escapes (`\n`, `\r`, `\t`): for cells, lists, command output.
    OneLine,
    /// LF is a real line break (a [`SegmentKind::LineBreak`]); CR and TAB stay escapes.
    MultiLine,
}

/// What a field holds, which decides how much of the emoji machinery is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Field {
    /// Prose (goals, observations, notes): emoji variation and modifier sequences are kept.
    Prose,
    /// Security-relevant (tool names, arguments, ids): variation selectors, emoji modifiers,
    /// regional indicators and U+20E3 are escaped so terminal width disagreements cannot shift
    /// a layout and look-alike sequences are visible.
    Security,
}

/// What happens to combining marks beyond [`Options::max_marks`] in one run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Marks {
    /// The excess marks are dropped and a cut marker says how many
    /// (`[+41 combining marks dropped]`, as agentrt does). The value is then marked cut.
    Collapse,
    /// The excess marks are shown as `\u{XXXX}` escapes: longer, but reversible.
    EscapeExcess,
}

/// How untrusted bytes are escaped. Build with the constructors and the `with_*` methods.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Options {
    /// Readable or strict.
    pub mode: Mode,
    /// One line or multi-line.
    pub form: Form,
    /// Prose or security-relevant.
    pub field: Field,
    /// Combining marks kept raw after one base character (agentrt keeps 4).
    pub max_marks: usize,
    /// What happens to the marks beyond `max_marks`.
    pub marks: Marks,
    /// Escape `"` as `\"` (used for JSON strings and keys so their quotes stay unambiguous).
    pub escape_quote: bool,
}

/// The number of combining marks kept after one base character by default (agentrt's 4).
pub const DEFAULT_MAX_MARKS: usize = 4;

impl Options {
    /// Readable, one line, prose, marks collapsed after 4: the default for cells and lists.
    pub const fn line() -> Self {
        Options {
            mode: Mode::Readable,
            form: Form::OneLine,
            field: Field::Prose,
            max_marks: DEFAULT_MAX_MARKS,
            marks: Marks::Collapse,
            escape_quote: false,
        }
    }

    /// Readable, multi-line, prose: for detail views.
    pub const fn multi_line() -> Self {
        Options::line().with_form(Form::MultiLine)
    }

    /// Readable, one line, security-relevant: for tool names, arguments and ids.
    pub const fn security() -> Self {
        Options::line().with_field(Field::Security)
    }

    /// Strict (ASCII only), one line.
    pub const fn strict() -> Self {
        Options::line().with_mode(Mode::Strict)
    }

    /// The same options with another mode.
    pub const fn with_mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    /// The same options with another form.
    pub const fn with_form(mut self, form: Form) -> Self {
        self.form = form;
        self
    }

    /// The same options with another field kind.
    pub const fn with_field(mut self, field: Field) -> Self {
        self.field = field;
        self
    }

    /// The same options with another treatment of excess combining marks.
    pub const fn with_marks(mut self, marks: Marks) -> Self {
        self.marks = marks;
        self
    }

    /// The same options with another number of marks kept per base character.
    pub const fn with_max_marks(mut self, max_marks: usize) -> Self {
        self.max_marks = max_marks;
        self
    }

    /// The same options with `"` escaped (or not).
    pub const fn with_escape_quote(mut self, escape_quote: bool) -> Self {
        self.escape_quote = escape_quote;
        self
    }

    /// The same options made reversible: excess combining marks escaped instead of dropped.
    pub const fn reversible(self) -> Self {
        self.with_marks(Marks::EscapeExcess)
    }
}

impl Default for Options {
    fn default() -> Self {
        Options::line()
    }
}

/// Whether `--json` output writes `c` as a `\u` escape although JSON allows it raw: DEL, C1
/// controls, bidi controls, format characters, default-ignorable code points and the line and
/// paragraph separators, which a terminal may act on, reorder text by, or draw as nothing.
/// (The C0 controls JSON escapes itself.)
pub fn json_escapes(c: char) -> bool {
    if c.is_ascii() {
        return c == '\u{7f}';
    }
    let cp = c as u32;
    (0x80..=0x9F).contains(&cp)
        || escape::is_bidi_control(c)
        || escape::is_default_ignorable(c)
        || matches!(
            unicode_general_category::get_general_category(c),
            unicode_general_category::GeneralCategory::Format
                | unicode_general_category::GeneralCategory::LineSeparator
                | unicode_general_category::GeneralCategory::ParagraphSeparator
        )
}

/// Escapes untrusted bytes in full (no width cut): the value for a detail view.
pub fn escape(bytes: &[u8], opts: Options) -> SafeText {
    segments::build_full(bytes, opts)
}

/// [`escape`] for a `&str`.
pub fn escape_str(text: &str, opts: Options) -> SafeText {
    escape(text.as_bytes(), opts)
}

/// Whether `text` reaches a line as it is: escaping it for one line would change nothing but
/// double its backslashes (no control, bidi, invisible or blank-looking character in it).
pub fn shows_as_is(text: &str) -> bool {
    escape_reversible(text.as_bytes(), Options::line()) == text.replace('\\', "\\\\")
}

/// `text` for one line, escaped once: as it is when it [`shows_as_is`] (a message that
/// quoted its values escaped already keeps one notation, `\x1b` and not `\\x1b`), else
/// escaped whole. Nothing raw gets through either way.
pub fn escaped_once(text: &str) -> String {
    let whole = escape_reversible(text.as_bytes(), Options::line());
    // A cut marker's `[+` (the escaper writes `\x5b+` for one in data) came from a value
    // already cut and escaped here: it is left as it is too (found from outside: a long name
    // in a refusal showed its marker as `…\x5b+234 bytes]…`).
    if whole == text.replace('\\', "\\\\").replace("[+", "\\x5b+") {
        text.to_string()
    } else {
        whole
    }
}

/// `text` as a message quotes a value it was given, as a `String`: [`quoted`] in the one-line
/// reversible notation (a `"` inside as `\"`, a backslash doubled), cut head-and-tail to
/// `max_width` columns with a marker of the bytes left out. One notation with the rest of a
/// message passed through [`escaped_once`], where Rust's `{:?}` writes `\u{1b}` and a line's
/// escaping shows it again as `\\u{1b}`.
pub fn quoted_line(text: &str, max_width: usize) -> String {
    quoted(text.as_bytes(), Options::line().reversible(), max_width).to_string()
}

/// The reversible escaped text of `bytes` as a `String`: no width cut, excess combining marks
/// escaped rather than dropped. `decode(&escape_reversible(b, o)) == b` for all bytes.
pub fn escape_reversible(bytes: &[u8], opts: Options) -> String {
    escape(bytes, opts.reversible()).to_string()
}

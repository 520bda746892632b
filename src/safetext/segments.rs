//! The [`SafeText`] value: escaped text as styled segments, and the builder that makes it from
//! the escaper's tokens. Nothing outside this module can make a `SafeText` from a bare string.

use std::fmt;

use unicode_segmentation::UnicodeSegmentation;
use unicode_width::UnicodeWidthStr;

use super::Options;
use super::badges::{Badge, Badges, Scanner};
use super::decode::{DecodeError, decode_into};
use super::escape::{Esc, Escaper, Item, Reason, Token};

/// The display width of already escaped text: the sum of its grapheme clusters' widths
/// (what ratatui measures). Only meaningful for text this module escaped.
pub fn text_width(text: &str) -> usize {
    text.graphemes(true).map(UnicodeWidthStr::width).sum()
}

/// What a segment is, so a theme can style it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SegmentKind {
    /// Characters of the value, shown as they are.
    Plain,
    /// One or more escapes (`\x1b`, `\u{202e}`, `\\`, ...) standing for characters of the value.
    Escape,
    /// A cut marker (`…[+9812 bytes]…`, `[+41 combining marks dropped]`): not part of the value.
    Cut,
    /// A badge label (`[bidi]`): not part of the value; made by [`SafeText::badge_segments`].
    Badge,
    /// A real line break of the multi-line form (its text is `"\n"`, width 0).
    LineBreak,
}

/// A run of escaped text of one kind.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Segment {
    kind: SegmentKind,
    text: String,
}

impl Segment {
    /// The kind, for styling.
    pub fn kind(&self) -> SegmentKind {
        self.kind
    }

    /// The escaped text; contains no control, bidi or invisible character.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The display width of the text (0 for a line break).
    pub fn width(&self) -> usize {
        match self.kind {
            SegmentKind::LineBreak => 0,
            _ => text_width(&self.text),
        }
    }
}

/// Escaped untrusted text, made only by this module.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct SafeText {
    segments: Vec<Segment>,
    badges: Badges,
    source_len: usize,
    escapes: usize,
    omitted_bytes: usize,
    marks_dropped: usize,
    examined: usize,
}

impl SafeText {
    /// The segments, in order.
    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// The field's badges (bidi, invisible, mixed scripts, cut, ...). For a width-cut value
    /// they describe the shown head and tail (the middle is counted, not scanned); escape the
    /// value in full for the badges of all of it.
    pub fn badges(&self) -> Badges {
        self.badges
    }

    /// One [`SegmentKind::Badge`] segment per badge (`[bidi]`, `[cut]`, ...), for a widget to
    /// show beside the value.
    pub fn badge_segments(&self) -> Vec<Segment> {
        self.badges
            .iter()
            .map(|b| Segment {
                kind: SegmentKind::Badge,
                text: format!("[{}]", b.label()),
            })
            .collect()
    }

    /// The length in bytes of the untrusted value this was made from.
    pub fn source_len(&self) -> usize {
        self.source_len
    }

    /// How many escapes the text shows.
    pub fn escape_count(&self) -> usize {
        self.escapes
    }

    /// Whether anything of the value is not shown (a width cut or dropped combining marks).
    pub fn is_cut(&self) -> bool {
        self.omitted_bytes > 0 || self.marks_dropped > 0
    }

    /// Bytes of the value left out by a width cut.
    pub fn omitted_bytes(&self) -> usize {
        self.omitted_bytes
    }

    /// Combining marks dropped from over-long runs.
    pub fn marks_dropped(&self) -> usize {
        self.marks_dropped
    }

    /// Bytes of input the escaper examined to build this value. A width cut of a huge value
    /// examines only its head and tail; tests assert it (a counting measure, not a timing).
    pub fn examined_bytes(&self) -> usize {
        self.examined
    }

    /// The display width: the widest line in the multi-line form.
    pub fn width(&self) -> usize {
        self.lines()
            .map(|line| line.iter().map(Segment::width).sum::<usize>())
            .max()
            .unwrap_or(0)
    }

    /// The lines (split at line breaks); one line in the one-line form.
    pub fn lines(&self) -> impl Iterator<Item = &[Segment]> {
        self.segments.split(|s| s.kind == SegmentKind::LineBreak)
    }

    /// The number of lines (1 for an empty value).
    pub fn line_count(&self) -> usize {
        1 + self
            .segments
            .iter()
            .filter(|s| s.kind == SegmentKind::LineBreak)
            .count()
    }

    /// Whether the value is empty.
    pub fn is_empty(&self) -> bool {
        self.segments.is_empty()
    }

    /// The original bytes, decoded back from the escaped text. Refuses a value that was cut.
    pub fn decode(&self) -> Result<Vec<u8>, DecodeError> {
        let mut out = Vec::with_capacity(self.source_len);
        for seg in &self.segments {
            match seg.kind {
                SegmentKind::Plain => out.extend_from_slice(seg.text.as_bytes()),
                SegmentKind::Escape => decode_into(&seg.text, &mut out)?,
                SegmentKind::LineBreak => out.push(b'\n'),
                SegmentKind::Cut | SegmentKind::Badge => return Err(DecodeError::Cut),
            }
        }
        Ok(out)
    }

    /// Appends plain segments of our own making (labels, punctuation of a rendering). Only
    /// this module may call it, with text that is not untrusted.
    pub(crate) fn push_own(&mut self, kind: SegmentKind, text: &str) {
        push_seg(&mut self.segments, kind, text);
    }

    /// Appends another value (used by the JSON rendering to compose a line).
    pub(crate) fn append(&mut self, other: SafeText) {
        for seg in other.segments {
            push_seg(&mut self.segments, seg.kind, &seg.text);
        }
        self.badges = self.badges.union(other.badges);
        self.source_len += other.source_len;
        self.escapes += other.escapes;
        self.omitted_bytes += other.omitted_bytes;
        self.marks_dropped += other.marks_dropped;
        self.examined += other.examined;
    }

    /// Copies the badges and counts of `other` (used by wrapping: the first row speaks for
    /// the whole value).
    pub(crate) fn take_counts_from(&mut self, other: &SafeText) {
        self.badges = other.badges;
        self.source_len = other.source_len;
        self.escapes = other.escapes;
        self.omitted_bytes = other.omitted_bytes;
        self.marks_dropped = other.marks_dropped;
        self.examined = other.examined;
    }

    pub(crate) fn add_badge(&mut self, badge: Badge) {
        self.badges.insert(badge);
    }
}

impl fmt::Display for SafeText {
    /// The escaped text (line breaks as `\n`, cut markers included): safe to print.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for seg in &self.segments {
            f.write_str(&seg.text)?;
        }
        Ok(())
    }
}

fn push_seg(segments: &mut Vec<Segment>, kind: SegmentKind, text: &str) {
    let mergeable = matches!(kind, SegmentKind::Plain | SegmentKind::Escape);
    if let Some(last) = segments.last_mut()
        && mergeable
        && last.kind == kind
    {
        last.text.push_str(text);
        return;
    }
    segments.push(Segment {
        kind,
        text: text.to_string(),
    });
}

/// Builds a `SafeText` from tokens, in order.
pub(crate) struct Builder {
    text: SafeText,
    scanner: Scanner,
    scratch: String,
}

impl Builder {
    pub(crate) fn new(source_len: usize) -> Self {
        Builder {
            text: SafeText {
                source_len,
                ..SafeText::default()
            },
            scanner: Scanner::default(),
            scratch: String::new(),
        }
    }

    pub(crate) fn push_item(&mut self, item: &Item) {
        match item.token {
            Token::Text(c) => {
                self.scanner.kept(c);
                let mut buf = [0u8; 4];
                push_seg(
                    &mut self.text.segments,
                    SegmentKind::Plain,
                    c.encode_utf8(&mut buf),
                );
            }
            Token::Esc(esc, reason) => {
                self.scanner.escaped(reason);
                if let (Esc::Char(c), Reason::NonAscii) = (esc, reason) {
                    // Strict mode escapes letters too; the badges still describe them.
                    self.scanner.kept(c);
                }
                self.text.escapes += 1;
                self.scratch.clear();
                esc.write_to(&mut self.scratch);
                push_seg(&mut self.text.segments, SegmentKind::Escape, &self.scratch);
            }
            Token::LineBreak => {
                self.scanner.separator();
                push_seg(&mut self.text.segments, SegmentKind::LineBreak, "\n");
            }
            Token::MarksCut(n) => {
                self.text.marks_dropped += n;
                self.scanner.cut();
                let marker = format!("[+{n} combining marks dropped]");
                push_seg(&mut self.text.segments, SegmentKind::Cut, &marker);
            }
        }
    }

    /// Adds kept text already grouped into a grapheme (its chars were Text tokens).
    pub(crate) fn push_plain(&mut self, text: &str) {
        for c in text.chars() {
            self.scanner.kept(c);
        }
        push_seg(&mut self.text.segments, SegmentKind::Plain, text);
    }

    /// Adds a width-cut marker standing for `omitted` bytes.
    pub(crate) fn push_cut(&mut self, marker: &str, omitted: usize) {
        self.text.omitted_bytes += omitted;
        self.scanner.cut();
        // The marker separates words for the mixed-script check.
        self.scanner.separator();
        push_seg(&mut self.text.segments, SegmentKind::Cut, marker);
    }

    pub(crate) fn set_examined(&mut self, examined: usize) {
        self.text.examined = examined;
    }

    pub(crate) fn finish(mut self) -> SafeText {
        self.text.badges = self.scanner.finish();
        self.text
    }
}

/// Escapes all of `bytes`.
pub(crate) fn build_full(bytes: &[u8], opts: Options) -> SafeText {
    let mut builder = Builder::new(bytes.len());
    for item in Escaper::new(bytes, opts) {
        builder.push_item(&item);
    }
    builder.set_examined(bytes.len());
    builder.finish()
}

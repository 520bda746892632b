//! Wrapping a [`SafeText`] into rows of a display width for detail views, never splitting a
//! grapheme cluster or an escape (unless one escape is wider than the row).

use unicode_segmentation::UnicodeSegmentation;

use super::segments::text_width;
use super::segments::{SafeText, Segment, SegmentKind};

/// The length in bytes of the escape at the start of `text` (escapes are ASCII).
fn escape_len(text: &str) -> usize {
    let b = text.as_bytes();
    match b.get(1) {
        Some(b'x') => 4.min(b.len()),
        Some(b'u') => b.iter().position(|&c| c == b'}').map_or(b.len(), |i| i + 1),
        Some(_) => 2,
        None => 1,
    }
}

/// The display units of a segment: graphemes of plain text, whole escapes, whole markers.
fn units(seg: &Segment) -> Vec<&str> {
    let text = seg.text();
    match seg.kind() {
        SegmentKind::Plain => text.graphemes(true).collect(),
        SegmentKind::Escape => {
            let mut out = Vec::new();
            let mut rest = text;
            while !rest.is_empty() {
                let n = escape_len(rest);
                out.push(&rest[..n]);
                rest = &rest[n..];
            }
            out
        }
        SegmentKind::Cut | SegmentKind::Badge | SegmentKind::LineBreak => vec![text],
    }
}

impl SafeText {
    /// The text as rows of at most `width` columns (at least 2, the widest grapheme): each
    /// line of the multi-line form starts a row; a row breaks between grapheme clusters and
    /// between escapes, never inside one (an escape or marker wider than a whole row is
    /// split by column). The first row carries the value's badges and counts.
    pub fn wrap(&self, width: usize) -> Vec<SafeText> {
        let width = width.max(2);
        let mut rows = Vec::new();
        for line in self.lines() {
            let mut row = SafeText::default();
            let mut used = 0;
            for seg in line {
                for unit in units(seg) {
                    let w = text_width(unit);
                    if w > width {
                        // Only escapes and markers (ASCII and `…`) get here: split by column,
                        // starting on a fresh row.
                        if used > 0 {
                            rows.push(std::mem::take(&mut row));
                            used = 0;
                        }
                        for g in unit.graphemes(true) {
                            let gw = text_width(g);
                            if used + gw > width {
                                rows.push(std::mem::take(&mut row));
                                used = 0;
                            }
                            row.push_own(seg.kind(), g);
                            used += gw;
                        }
                        continue;
                    }
                    if used + w > width && used > 0 {
                        rows.push(std::mem::take(&mut row));
                        used = 0;
                    }
                    row.push_own(seg.kind(), unit);
                    used += w;
                }
            }
            rows.push(row);
        }
        if let Some(first) = rows.first_mut() {
            first.take_counts_from(self);
        }
        rows
    }
}

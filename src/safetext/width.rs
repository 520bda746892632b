//! Measuring escaped text and cutting it head-and-tail to a display width.
//!
//! The cut streams: the head is escaped from the start until the width is filled, the tail is
//! escaped from a synchronisation point near the end, and the bytes between are counted, never
//! escaped. A 16 MiB value cut to one line examines a few hundred bytes of it.

use std::collections::VecDeque;

use unicode_segmentation::UnicodeSegmentation;
use unicode_width::UnicodeWidthStr;

use super::escape::{Class, Escaper, Item, Token, classify, decode_at};
use super::segments::{Builder, SafeText, text_width};
use super::{Form, Mode, Options};

/// A grapheme longer than this is split (pathological: e.g. 16 MiB of Hangul jamo form one
/// cluster); splitting bounds memory and keeps the cut's width promise.
const MAX_GRAPHEME_BYTES: usize = 1024;
/// A raw run longer than this is segmented before the run ends.
const RUN_FLUSH_BYTES: usize = 256;

/// One unit of display: a grapheme of kept text or one non-text token.
#[derive(Clone, Debug)]
struct Atom {
    start: usize,
    end: usize,
    width: usize,
    body: Body,
}

#[derive(Clone, Debug)]
enum Body {
    Plain(String),
    Item(Item),
}

fn marks_marker_width(n: usize) -> usize {
    format!("[+{n} combining marks dropped]").len()
}

/// Groups the escaper's tokens into atoms.
struct Atoms<'a> {
    esc: Escaper<'a>,
    run: String,
    run_start: usize,
    /// The run length at which it is segmented next.
    flush_at: usize,
    out: VecDeque<Atom>,
    done: bool,
}

impl<'a> Atoms<'a> {
    fn new(esc: Escaper<'a>) -> Self {
        Atoms {
            esc,
            run: String::new(),
            run_start: 0,
            flush_at: RUN_FLUSH_BYTES,
            out: VecDeque::new(),
            done: false,
        }
    }

    fn examined(&self) -> usize {
        self.esc.position()
    }

    /// Moves the complete graphemes of the run to `out`; with `keep_last`, the last one stays
    /// (text appended later may extend it).
    fn split_run(&mut self, keep_last: bool) {
        let graphemes: Vec<(usize, &str)> = self.run.grapheme_indices(true).collect();
        let keep = usize::from(keep_last && !graphemes.is_empty());
        let mut consumed = 0;
        for &(idx, g) in &graphemes[..graphemes.len() - keep] {
            let start = self.run_start + idx;
            self.out.push_back(Atom {
                start,
                end: start + g.len(),
                width: g.width(),
                body: Body::Plain(g.to_string()),
            });
            consumed = idx + g.len();
        }
        self.run.drain(..consumed);
        self.run_start += consumed;
        self.flush_at = self.run.len() + RUN_FLUSH_BYTES;
    }

    fn push_item(&mut self, item: Item) {
        let width = match item.token {
            Token::Esc(esc, _) => esc.width(),
            Token::MarksCut(n) => marks_marker_width(n),
            Token::Text(_) | Token::LineBreak => 0,
        };
        self.out.push_back(Atom {
            start: item.start,
            end: item.end,
            width,
            body: Body::Item(item),
        });
    }
}

impl Iterator for Atoms<'_> {
    type Item = Atom;

    fn next(&mut self) -> Option<Atom> {
        loop {
            if let Some(atom) = self.out.pop_front() {
                return Some(atom);
            }
            if self.done {
                return None;
            }
            match self.esc.next() {
                Some(Item {
                    token: Token::Text(c),
                    start,
                    ..
                }) => {
                    if self.run.is_empty() {
                        self.run_start = start;
                    }
                    self.run.push(c);
                    if self.run.len() > self.flush_at {
                        self.split_run(true);
                        if self.run.len() > MAX_GRAPHEME_BYTES {
                            self.split_run(false);
                        }
                    }
                }
                Some(item) => {
                    if !self.run.is_empty() {
                        self.split_run(false);
                    }
                    self.push_item(item);
                }
                None => {
                    if !self.run.is_empty() {
                        self.split_run(false);
                    }
                    self.done = true;
                }
            }
        }
    }
}

/// Whether escaping may start at `p` in the state of a field start and produce exactly the
/// tokens and grapheme boundaries a pass from the start would produce from `p` on.
fn is_sync_point(bytes: &[u8], p: usize, opts: &Options) -> bool {
    if p == 0 {
        return true;
    }
    if (0x80..0xC0).contains(&bytes[p]) {
        return false; // possibly inside a multi-byte character
    }
    if opts.mode == Mode::Strict {
        return true; // every non-ASCII code point is an escape: no context at all
    }
    let Ok((c, _)) = decode_at(bytes, p) else {
        return true; // an invalid byte is an escape, whatever precedes it
    };
    match classify(c, opts) {
        Class::Escape(..) | Class::LineBreak => true,
        Class::Mark | Class::Jamo(_) => false,
        Class::Keep => {
            let mut q = p - 1;
            while q > 0 && p - q < 4 && (0x80..0xC0).contains(&bytes[q]) {
                q -= 1;
            }
            let prev = match decode_at(bytes, q) {
                Ok((prev, len)) if q + len == p => prev,
                _ => return true, // invalid bytes before: escapes
            };
            match classify(prev, opts) {
                Class::Escape(..) | Class::LineBreak => true,
                Class::Mark | Class::Jamo(_) => false,
                Class::Keep => {
                    let mut buf = [0u8; 8];
                    let a = prev.encode_utf8(&mut buf[..4]).len();
                    let b = c.encode_utf8(&mut buf[a..]).len();
                    match std::str::from_utf8(&buf[..a + b]) {
                        Ok(pair) => pair.graphemes(true).count() == 2,
                        Err(_) => false,
                    }
                }
            }
        }
    }
}

/// The marker texts, longest first.
fn marker_candidates(omitted: usize, mode: Mode) -> [String; 3] {
    match mode {
        Mode::Readable => [
            format!("…[+{omitted} bytes]…"),
            format!("…[+{omitted}]…"),
            "…".to_string(),
        ],
        Mode::Strict => [
            format!("...[+{omitted} bytes]..."),
            format!("...[+{omitted}]..."),
            "..".to_string(),
        ],
    }
}

/// Which marker form fits `max_width`: the longest whose width (for the largest possible
/// count) leaves at least half of the width to text, else the shortest if it fits at all.
fn marker_form(source_len: usize, max_width: usize, mode: Mode) -> Option<usize> {
    let candidates = marker_candidates(source_len, mode);
    if let Some(i) = candidates
        .iter()
        .position(|m| text_width(m) <= max_width / 2)
    {
        return Some(i);
    }
    (text_width(&candidates[2]) <= max_width).then_some(2)
}

/// Escapes `bytes` in the one-line form and cuts it head-and-tail to at most `max_width`
/// columns, never inside a grapheme cluster, with a marker that says how many bytes were left
/// out (`…[+9812 bytes]…`; strict mode `...[+9812 bytes]...`).
///
/// Tiny widths: the marker shortens to `…[+9812]…` and then `…` (strict `..`) when the full
/// form would take more than half of the width; at width 0 a non-empty value becomes an empty
/// text marked cut. The result's [`SafeText::width`] never exceeds `max_width`.
pub fn escape_cut(bytes: &[u8], opts: Options, max_width: usize) -> SafeText {
    let opts = opts.with_form(Form::OneLine);
    // No byte shows wider than 16 columns (`\xNN` is 4 per byte; a dropped-marks marker of
    // ~40 columns stands for at least 3 bytes), so a width this large cannot cut anything.
    if max_width >= bytes.len().saturating_mul(16).saturating_add(64) {
        return super::segments::build_full(bytes, opts);
    }
    // The head, up to the full width: if everything fits, that is the answer.
    let head_cap = max_width
        .saturating_add(64)
        .saturating_mul(16)
        .saturating_add(4096);
    let mut atoms = Atoms::new(Escaper::new(bytes, opts));
    let mut head: Vec<Atom> = Vec::new();
    let mut width = 0;
    let mut complete = true;
    while width <= max_width {
        if atoms.examined() > head_cap && atoms.examined() < bytes.len() {
            complete = false;
            break;
        }
        match atoms.next() {
            Some(atom) => {
                width += atom.width;
                head.push(atom);
            }
            None => break,
        }
    }
    if complete && width <= max_width {
        return build(&head, None, &[], atoms.examined(), bytes.len());
    }
    let head_examined = atoms.examined();
    let Some(form) = marker_form(bytes.len(), max_width, opts.mode) else {
        let mut builder = Builder::new(bytes.len());
        builder.push_cut("", bytes.len());
        builder.set_examined(head_examined);
        return builder.finish();
    };
    let budget = max_width - text_width(&marker_candidates(bytes.len(), opts.mode)[form]);
    let tail_budget = budget / 2;
    let head_budget = budget - tail_budget;
    let mut used = 0;
    let keep = head
        .iter()
        .take_while(|a| {
            used += a.width;
            used <= head_budget
        })
        .count();
    head.truncate(keep);
    let head_end = head.last().map_or(0, |a| a.end);
    let (tail, tail_examined) = tail_atoms(bytes, opts, head_end, tail_budget);
    let tail_start = tail.front().map_or(bytes.len(), |a| a.start);
    let omitted = tail_start - head_end;
    let tail: Vec<Atom> = tail.into_iter().collect();
    let marker =
        (omitted > 0).then(|| (marker_candidates(omitted, opts.mode)[form].clone(), omitted));
    build(
        &head,
        marker,
        &tail,
        head_examined + tail_examined,
        bytes.len(),
    )
}

fn build(
    head: &[Atom],
    marker: Option<(String, usize)>,
    tail: &[Atom],
    examined: usize,
    source_len: usize,
) -> SafeText {
    let mut builder = Builder::new(source_len);
    let push = |builder: &mut Builder, atom: &Atom| match &atom.body {
        Body::Plain(text) => builder.push_plain(text),
        Body::Item(item) => builder.push_item(item),
    };
    for atom in head {
        push(&mut builder, atom);
    }
    if let Some((text, omitted)) = marker {
        builder.push_cut(&text, omitted);
    }
    for atom in tail {
        push(&mut builder, atom);
    }
    builder.set_examined(examined);
    builder.finish()
}

/// The last atoms of the value fitting `budget` columns, all starting at or after `head_end`,
/// and the number of bytes examined to find them.
fn tail_atoms(
    bytes: &[u8],
    opts: Options,
    head_end: usize,
    budget: usize,
) -> (VecDeque<Atom>, usize) {
    if budget == 0 {
        return (VecDeque::new(), 0);
    }
    let max_atoms = budget.saturating_mul(4).saturating_add(64);
    let mut examined = 0;
    let mut window = budget.saturating_mul(16).saturating_add(64);
    loop {
        let lo = bytes.len().saturating_sub(window);
        if lo <= head_end {
            // No usable synchronisation point: one pass from the start, keeping only the end.
            let mut atoms = Atoms::new(Escaper::new(bytes, opts));
            let mut tail = VecDeque::new();
            let mut width = 0;
            for atom in atoms.by_ref() {
                if atom.start < head_end {
                    continue;
                }
                push_bounded(&mut tail, &mut width, atom, budget, max_atoms);
            }
            return (tail, examined + atoms.examined());
        }
        let sync = (lo..bytes.len()).find(|&p| is_sync_point(bytes, p, &opts));
        if let Some(p) = sync {
            let mut atoms = Atoms::new(Escaper::starting_at(bytes, p, opts));
            let mut tail = VecDeque::new();
            let mut width = 0;
            let mut dropped = false;
            for atom in atoms.by_ref() {
                dropped |= push_bounded(&mut tail, &mut width, atom, budget, max_atoms);
            }
            examined += atoms.examined() - p;
            if dropped {
                return (tail, examined);
            }
        } else {
            examined += bytes.len() - lo;
        }
        window = window.saturating_mul(4);
    }
}

/// Appends `atom`, dropping atoms from the front while the width exceeds `budget` or there
/// are more than `max_atoms`; returns whether anything was dropped.
fn push_bounded(
    tail: &mut VecDeque<Atom>,
    width: &mut usize,
    atom: Atom,
    budget: usize,
    max_atoms: usize,
) -> bool {
    *width += atom.width;
    tail.push_back(atom);
    let mut dropped = false;
    while *width > budget || tail.len() > max_atoms {
        match tail.pop_front() {
            Some(front) => {
                *width -= front.width;
                dropped = true;
            }
            None => break,
        }
    }
    dropped
}

/// The escaped text of `bytes` as a `String` for the operator commands' text output:
/// readable, one line, prose, cut head-and-tail to `max_width` columns (`usize::MAX`: no cut).
/// It contains no control, bidi or invisible character.
pub fn plain_line(bytes: &[u8], max_width: usize) -> String {
    plain_line_with(bytes, Options::line(), max_width)
}

/// [`plain_line`] in strict mode: ASCII only.
pub fn plain_line_strict(bytes: &[u8], max_width: usize) -> String {
    plain_line_with(bytes, Options::strict(), max_width)
}

/// [`plain_line`] with chosen options (the form is always one line).
pub fn plain_line_with(bytes: &[u8], opts: Options, max_width: usize) -> String {
    escape_cut(bytes, opts, max_width).to_string()
}

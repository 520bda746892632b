//! Properties over arbitrary bytes: escaping never panics, shows nothing a terminal acts on or
//! hides, decodes back to the input, and a cut fits its width and is an exact head and tail.

use countersign::safetext::{
    Field, Form, Marks, Mode, Options, SafeText, SegmentKind, decode, escape, escape_cut,
    escape_reversible,
};
use proptest::prelude::*;
use unicode_general_category::{GeneralCategory as Gc, get_general_category};

/// Characters that exercise every rule: controls, marks, joiners, selectors, regional
/// indicators, jamo, wide and right-to-left letters, the notation's own characters.
const INTERESTING: &[char] = &[
    'a',
    'Z',
    ' ',
    '\\',
    '"',
    '{',
    '}',
    'u',
    'x',
    '…',
    '\n',
    '\r',
    '\t',
    '\0',
    '\x1b',
    '\x7f',
    '\u{85}',
    '\u{9b}',
    '\u{301}',
    '\u{302}',
    '\u{20e3}',
    '\u{34f}',
    '\u{93f}',
    '\u{94d}',
    '\u{915}',
    '\u{200b}',
    '\u{200c}',
    '\u{200d}',
    '\u{200e}',
    '\u{202e}',
    '\u{2066}',
    '\u{2028}',
    '\u{feff}',
    '\u{fe0f}',
    '\u{fe0e}',
    '\u{e0100}',
    '\u{e0041}',
    '\u{1f1ef}',
    '\u{1f1f5}',
    '\u{1f3fd}',
    '\u{1f44d}',
    '\u{2764}',
    '\u{1100}',
    '\u{1161}',
    '\u{11a8}',
    '\u{ac00}',
    '\u{3164}',
    '\u{a0}',
    '\u{3000}',
    '\u{2800}',
    '日',
    'ア',
    'ש',
    'م',
    'а',
    '\u{e000}',
    '\u{fdd0}',
    '\u{ffff}',
    '\u{378}',
    '\u{fffc}',
    '\u{ff52}',
    '\u{1d42b}',
    '\u{600}',
    '\u{d4e}',
    '\u{e33}',
];

fn unit() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        any::<u8>().prop_map(|b| vec![b]),
        prop::sample::select(INTERESTING).prop_map(|c| c.to_string().into_bytes()),
        prop::sample::select(INTERESTING).prop_map(|c| c.to_string().repeat(7).into_bytes()),
        any::<char>().prop_map(|c| c.to_string().into_bytes()),
    ]
}

fn input() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(unit(), 0..300).prop_map(|units| units.concat())
}

fn options() -> impl Strategy<Value = Options> {
    (
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        0usize..6,
    )
        .prop_map(|(strict, multi, security, escape_excess, max_marks)| {
            Options::line()
                .with_mode(if strict { Mode::Strict } else { Mode::Readable })
                .with_form(if multi {
                    Form::MultiLine
                } else {
                    Form::OneLine
                })
                .with_field(if security {
                    Field::Security
                } else {
                    Field::Prose
                })
                .with_marks(if escape_excess {
                    Marks::EscapeExcess
                } else {
                    Marks::Collapse
                })
                .with_max_marks(max_marks)
        })
}

fn is_default_ignorable(c: char) -> bool {
    let ranges: &[(u32, u32)] = &[
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
    ranges
        .iter()
        .any(|&(lo, hi)| (lo..=hi).contains(&(c as u32)))
}

fn is_variation_selector(c: char) -> bool {
    matches!(c as u32, 0xFE00..=0xFE0F | 0xE0100..=0xE01EF)
}

/// The first character of the shown text that must never reach a terminal, if any.
fn forbidden(text: &SafeText, opts: &Options) -> Option<char> {
    for seg in text.segments() {
        if seg.kind() == SegmentKind::LineBreak {
            assert_eq!(seg.text(), "\n");
            continue;
        }
        for c in seg.text().chars() {
            let gc = get_general_category(c);
            let bad_category = matches!(
                gc,
                Gc::Control
                    | Gc::Format
                    | Gc::PrivateUse
                    | Gc::Unassigned
                    | Gc::Surrogate
                    | Gc::LineSeparator
                    | Gc::ParagraphSeparator
            );
            // Prose keeps a variation selector after a non-ASCII base (emoji presentation).
            let allowed_selector = is_variation_selector(c) && opts.field == Field::Prose;
            let ignorable = is_default_ignorable(c) && !allowed_selector;
            let strict_non_ascii = opts.mode == Mode::Strict && !c.is_ascii();
            let spacey = gc == Gc::SpaceSeparator && c != ' ';
            if bad_category
                || ignorable
                || spacey
                || (strict_non_ascii && seg.kind() != SegmentKind::Cut)
            {
                return Some(c);
            }
        }
    }
    None
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn escaped_text_has_no_control_bidi_invisible_private_or_unassigned(bytes in input(), opts in options()) {
        let text = escape(&bytes, opts);
        prop_assert_eq!(forbidden(&text, &opts), None, "{}", text);
        for w in [0usize, 1, 3, 17, 80] {
            let cut = escape_cut(&bytes, opts, w);
            prop_assert_eq!(forbidden(&cut, &opts), None, "{}", cut);
        }
    }

    #[test]
    fn escaped_text_decodes_back_to_the_input(bytes in input(), opts in options()) {
        let reversible = escape_reversible(&bytes, opts);
        prop_assert_eq!(decode(&reversible).unwrap(), bytes.clone());
        let text = escape(&bytes, opts);
        if !text.is_cut() {
            prop_assert_eq!(text.decode().unwrap(), bytes);
        }
    }

    #[test]
    fn cut_to_width_never_exceeds_the_width(bytes in input(), opts in options(), w in 0usize..120) {
        let cut = escape_cut(&bytes, opts, w);
        prop_assert!(cut.width() <= w, "width {} > {}: {}", cut.width(), w, cut);
        prop_assert_eq!(cut.line_count(), 1);
        prop_assert_eq!(cut.is_cut() || cut.marks_dropped() > 0, cut.badges().contains(countersign::safetext::Badge::Cut));
    }

    #[test]
    fn cut_is_an_exact_head_and_tail_of_the_full_escape(bytes in input(), opts in options(), w in 0usize..120) {
        // Reversible options, so head and tail decode to bytes of the input.
        let opts = opts.reversible();
        let cut = escape_cut(&bytes, opts, w);
        let full = escape(&bytes, opts.with_form(Form::OneLine)).to_string();
        let segs = cut.segments();
        match segs.iter().position(|s| s.kind() == SegmentKind::Cut) {
            None if cut.omitted_bytes() == 0 && !bytes.is_empty() && cut.is_empty() => {}
            None => prop_assert_eq!(cut.to_string(), full),
            Some(i) => {
                let head: String = segs[..i].iter().map(|s| s.text()).collect();
                let tail: String = segs[i + 1..].iter().map(|s| s.text()).collect();
                prop_assert!(full.starts_with(&head), "head {:?} of {:?}", head, full);
                prop_assert!(full.ends_with(&tail), "tail {:?} of {:?}", tail, full);
                let head_bytes = decode(&head).unwrap();
                let tail_bytes = decode(&tail).unwrap();
                prop_assert_eq!(head_bytes.len() + cut.omitted_bytes() + tail_bytes.len(), bytes.len());
                prop_assert!(bytes.starts_with(&head_bytes));
                prop_assert!(bytes.ends_with(&tail_bytes));
            }
        }
    }
}

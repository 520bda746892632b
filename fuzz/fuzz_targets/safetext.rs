//! Fuzzes the safetext escaper: for any bytes and options, escaping never panics, shows no
//! control or invisible character, decodes back to the input, and a cut fits its width; the
//! JSON parser and renderings never panic.
#![no_main]

use countersign::safetext::{
    Field, Form, Marks, Mode, Options, SegmentKind, decode, escape, escape_cut,
    escape_reversible, json_fields, parse_json, render_json, JsonOptions,
};
use libfuzzer_sys::fuzz_target;

fn options(selector: u8) -> Options {
    Options::line()
        .with_mode(if selector & 1 != 0 { Mode::Strict } else { Mode::Readable })
        .with_form(if selector & 2 != 0 { Form::MultiLine } else { Form::OneLine })
        .with_field(if selector & 4 != 0 { Field::Security } else { Field::Prose })
        .with_marks(if selector & 8 != 0 { Marks::EscapeExcess } else { Marks::Collapse })
        .with_escape_quote(selector & 16 != 0)
}

fn shows_nothing_hostile(text: &countersign::safetext::SafeText) -> bool {
    text.segments().iter().all(|seg| {
        seg.kind() == SegmentKind::LineBreak
            || seg.text().chars().all(|c| {
                !c.is_control()
                    && !matches!(c as u32, 0x200B..=0x200F | 0x202A..=0x202E | 0x2060..=0x206F
                        | 0xFEFF | 0xE0000..=0xE007F | 0x2028 | 0x2029 | 0xE000..=0xF8FF)
            })
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let Some((&width, bytes)) = rest.split_first() else {
        return;
    };
    let opts = options(selector);
    let text = escape(bytes, opts);
    assert!(shows_nothing_hostile(&text));
    if !text.is_cut() {
        assert_eq!(text.decode().unwrap(), bytes);
    }
    assert_eq!(decode(&escape_reversible(bytes, opts)).unwrap(), bytes);
    let width = usize::from(width);
    let cut = escape_cut(bytes, opts, width);
    assert!(cut.width() <= width);
    assert!(shows_nothing_hostile(&cut));
    if let Ok(node) = parse_json(bytes) {
        for line in render_json(&node, &JsonOptions { string_width: width, ..JsonOptions::default() }) {
            assert!(shows_nothing_hostile(&line));
        }
        for field in json_fields(&node, opts) {
            assert!(shows_nothing_hostile(&field.value));
            assert!(shows_nothing_hostile(&field.path));
        }
    }
});

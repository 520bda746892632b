//! Themes: semantic roles mapped to styles, read from TOML. The four shipped themes are
//! embedded; a file of the same name in the user's config directory wins. `NO_COLOR` selects
//! mono; hex colours degrade to 256 or 16 colours when the terminal lacks truecolor. A bad
//! file is an error naming the file, the key and the problem.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ratatui::style::{Color, Modifier, Style};

use super::text::TextStyles;
use crate::runtime::types::RunStatus;

macro_rules! roles {
    ($($v:ident => $n:literal),* $(,)?) => {
        /// A semantic role a theme styles.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
        pub enum Role { $($v),* }
        impl Role {
            pub const ALL: &'static [Role] = &[$(Role::$v),*];
            pub fn name(self) -> &'static str { match self { $(Role::$v => $n),* } }
        }
    };
}

roles! {
    Text => "text", Dim => "dim", Border => "border", Title => "title",
    Selection => "selection", Header => "header", StatusRunning => "status_running",
    StatusWaiting => "status_waiting", StatusCompleted => "status_completed",
    StatusFailed => "status_failed", StatusCancelled => "status_cancelled", Damaged => "damaged",
    Escaped => "escaped", Truncated => "truncated", Danger => "danger", Ok => "ok",
    KeyHint => "key_hint", FilterMatch => "filter_match", StatusBar => "status_bar",
    Error => "error", Badge => "badge", AgeFresh => "age_fresh", AgeWarning => "age_warning",
    AgeStale => "age_stale",
}

pub const EMBEDDED: &[(&str, &str)] = &[
    ("default", include_str!("../../themes/default.toml")),
    ("light", include_str!("../../themes/light.toml")),
    (
        "high-contrast",
        include_str!("../../themes/high-contrast.toml"),
    ),
    ("mono", include_str!("../../themes/mono.toml")),
];

/// How many colours the terminal shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Depth {
    TrueColor,
    Ansi256,
    Ansi16,
    Mono,
}

impl Depth {
    /// From the environment: `NO_COLOR` (non-empty) → mono, `COLORTERM` truecolor/24bit,
    /// `TERM` *256color*, else 16.
    pub fn detect(get: impl Fn(&str) -> Option<String>) -> Depth {
        if get("NO_COLOR").is_some_and(|v| !v.is_empty()) {
            return Depth::Mono;
        }
        if get("COLORTERM").is_some_and(|v| v == "truecolor" || v == "24bit") {
            return Depth::TrueColor;
        }
        if get("TERM").is_some_and(|v| v.contains("256color")) {
            return Depth::Ansi256;
        }
        Depth::Ansi16
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ThemeError {
    /// A theme file that does not parse or holds a key or value the console refuses.
    #[error("theme file {file}: key `{key}`: {problem}")]
    File {
        file: String,
        key: String,
        problem: String,
    },
    /// No built-in theme and no file of the user's has that name.
    #[error(
        "no theme named {}: the built-in ones are {builtin}, and there is no {looked}",
        crate::safetext::quoted_line(name, 80)
    )]
    Unknown {
        name: String,
        builtin: String,
        /// The user's theme file that was looked for, or "themes directory" with no config
        /// directory.
        looked: String,
    },
}

#[derive(Debug, Clone)]
pub struct Theme {
    pub name: String,
    styles: Vec<Style>,
}

impl Theme {
    pub fn style(&self, r: Role) -> Style {
        self.styles[r as usize]
    }

    pub fn text_styles(&self) -> TextStyles {
        TextStyles {
            text: self.style(Role::Text),
            escaped: self.style(Role::Escaped),
            truncated: self.style(Role::Truncated),
        }
    }

    /// Style of a run status.
    pub fn status(&self, status: &RunStatus) -> Style {
        self.style(match status {
            RunStatus::Running | RunStatus::Interrupted => Role::StatusRunning,
            RunStatus::WaitingForApproval => Role::StatusWaiting,
            RunStatus::Completed => Role::StatusCompleted,
            RunStatus::Failed => Role::StatusFailed,
            RunStatus::Cancelled => Role::StatusCancelled,
            RunStatus::Unknown(_) => Role::Dim,
        })
    }

    /// The embedded theme `name`, or the user's `<config_dir>/themes/<name>.toml` if present.
    pub fn load(name: &str, config_dir: Option<&Path>, depth: Depth) -> Result<Theme, ThemeError> {
        let name = if depth == Depth::Mono { "mono" } else { name };
        // A name, not a path: `../x` or `/etc/x` would read a file outside `themes/`.
        let plain = !name.is_empty()
            && name.len() <= 64
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !plain {
            return Err(ThemeError::Unknown {
                name: name.to_string(),
                builtin: builtin_names(),
                looked: "file for it: a theme's name is 1 to 64 letters, digits, '-' or '_' \
                         (its file is themes/NAME.toml in the configuration directory)"
                    .into(),
            });
        }
        if let Some(dir) = config_dir {
            let p: PathBuf = dir.join("themes").join(format!("{name}.toml"));
            if super::files::present(&p) {
                let file = super::files::shown(&p);
                let src = super::files::read_small(&p).map_err(|e| ThemeError::File {
                    file: file.clone(),
                    key: "-".into(),
                    problem: format!("cannot read it: {e}"),
                })?;
                return Theme::parse(name, &file, &src, depth);
            }
        }
        let (_, src) =
            EMBEDDED
                .iter()
                .find(|(n, _)| *n == name)
                .ok_or_else(|| ThemeError::Unknown {
                    name: name.to_string(),
                    builtin: builtin_names(),
                    looked: match config_dir {
                        Some(dir) => {
                            super::files::shown(&dir.join("themes").join(format!("{name}.toml")))
                        }
                        None => "configuration directory to look for one in".into(),
                    },
                })?;
        Theme::parse(name, &format!("(built-in) themes/{name}.toml"), src, depth)
    }

    pub fn parse(name: &str, file: &str, src: &str, depth: Depth) -> Result<Theme, ThemeError> {
        let err = |key: &str, problem: String| ThemeError::File {
            file: file.into(),
            key: key.into(),
            problem,
        };
        let doc: toml::Table = src.parse().map_err(|e: toml::de::Error| ThemeError::File {
            file: super::toml_at::at(file, src, &e),
            key: "-".into(),
            problem: e.message().to_string(),
        })?;
        let mut palette = BTreeMap::new();
        for (k, v) in doc.iter() {
            if k != "palette" && k != "roles" && k != "name" {
                return Err(err(k, "unknown section; expected palette or roles".into()));
            }
            // `name` is for the reader of the file (the console names a theme by its file):
            // a short string that shows as it is.
            if k == "name"
                && !v.as_str().is_some_and(|n| {
                    !n.trim().is_empty()
                        && n.chars().count() <= 64
                        && crate::safetext::shows_as_is(n)
                })
            {
                return Err(err(
                    k,
                    "must be a string of 1 to 64 characters with no control, bidi or invisible one"
                        .into(),
                ));
            }
        }
        if let Some(p) = doc.get("palette") {
            let t = p
                .as_table()
                .ok_or_else(|| err("palette", "must be a table".into()))?;
            for (k, v) in t {
                let key = format!("palette.{k}");
                let c = match v {
                    toml::Value::Integer(i) => indexed(*i),
                    toml::Value::String(s) => parse_color(s),
                    _ => Err(NOT_A_COLOUR.into()),
                };
                palette.insert(k.clone(), c.map_err(|p| err(&key, p))?);
            }
        }
        let mut styles = vec![Style::default(); Role::ALL.len()];
        let roles = doc
            .get("roles")
            .and_then(|r| r.as_table())
            .ok_or_else(|| err("roles", "missing [roles] table".into()))?;
        for (k, v) in roles {
            let role = Role::ALL
                .iter()
                .find(|r| r.name() == k)
                .ok_or_else(|| err(&format!("roles.{k}"), "unknown role".into()))?;
            let t = v.as_table().ok_or_else(|| {
                err(
                    &format!("roles.{k}"),
                    "must be a table like { fg = \"...\" }".into(),
                )
            })?;
            let mut st = Style::default();
            for (f, val) in t {
                let key = format!("roles.{k}.{f}");
                match f.as_str() {
                    "fg" | "bg" => {
                        let c = match val {
                            toml::Value::Integer(i) => indexed(*i),
                            toml::Value::String(s) => palette
                                .get(s.as_str())
                                .copied()
                                .map_or_else(|| parse_color(s), Ok),
                            _ => Err(NOT_A_COLOUR.into()),
                        }
                        .map_err(|p| err(&key, p))?;
                        let c = degrade(c, depth);
                        if let Some(c) = c {
                            st = if f == "fg" { st.fg(c) } else { st.bg(c) };
                        }
                    }
                    "modifiers" => {
                        let arr = val
                            .as_array()
                            .ok_or_else(|| err(&key, "must be a list of names".into()))?;
                        for m in arr {
                            let m = m
                                .as_str()
                                .ok_or_else(|| err(&key, "must be a list of names".into()))?;
                            st = st.add_modifier(parse_modifier(m).map_err(|p| err(&key, p))?);
                        }
                    }
                    _ => {
                        return Err(err(
                            &key,
                            "unknown field; expected fg, bg or modifiers".into(),
                        ));
                    }
                }
            }
            styles[*role as usize] = st;
        }
        Ok(Theme {
            name: name.into(),
            styles,
        })
    }
}

fn parse_modifier(m: &str) -> Result<Modifier, String> {
    Ok(match m {
        "bold" => Modifier::BOLD,
        "dim" => Modifier::DIM,
        "italic" => Modifier::ITALIC,
        "underlined" | "underline" => Modifier::UNDERLINED,
        "reversed" | "reverse" => Modifier::REVERSED,
        "crossed_out" => Modifier::CROSSED_OUT,
        _ => {
            return Err(format!(
                "unknown modifier {m:?}; expected bold, dim, italic, underlined, reversed or crossed_out"
            ));
        }
    })
}

/// `#rrggbb`, an ANSI name (`red`, `lightblue`, `gray`, `reset`...) or a 0-255 index as a string.
/// Why a colour value of another TOML type is refused.
const NOT_A_COLOUR: &str =
    "must be a colour: \"#rrggbb\", an ANSI name such as \"red\", or a number 0-255";

/// A colour given as a TOML number: an index of the 256-colour palette.
fn indexed(i: i64) -> Result<Color, String> {
    u8::try_from(i)
        .map(Color::Indexed)
        .map_err(|_| format!("{i} is not a colour number: use 0-255"))
}

pub fn parse_color(s: &str) -> Result<Color, String> {
    if let Some(h) = s.strip_prefix('#') {
        if h.len() == 6 && h.bytes().all(|b| b.is_ascii_hexdigit()) {
            let v = u32::from_str_radix(h, 16).map_err(|e| e.to_string())?;
            return Ok(Color::Rgb((v >> 16) as u8, (v >> 8) as u8, v as u8));
        }
        return Err(format!(
            "{} is not a #rrggbb colour",
            crate::safetext::quoted_line(s, 80)
        ));
    }
    if let Ok(i) = s.parse::<u8>() {
        return Ok(Color::Indexed(i));
    }
    s.parse::<Color>().map_err(|_| {
        format!(
            "{} is not a colour: use #rrggbb, an ANSI name or 0-255",
            crate::safetext::quoted_line(s, 80)
        )
    })
}

const ANSI16: [(u8, u8, u8, Color); 16] = [
    (0, 0, 0, Color::Black),
    (128, 0, 0, Color::Red),
    (0, 128, 0, Color::Green),
    (128, 128, 0, Color::Yellow),
    (0, 0, 128, Color::Blue),
    (128, 0, 128, Color::Magenta),
    (0, 128, 128, Color::Cyan),
    (192, 192, 192, Color::Gray),
    (128, 128, 128, Color::DarkGray),
    (255, 0, 0, Color::LightRed),
    (0, 255, 0, Color::LightGreen),
    (255, 255, 0, Color::LightYellow),
    (0, 0, 255, Color::LightBlue),
    (255, 0, 255, Color::LightMagenta),
    (0, 255, 255, Color::LightCyan),
    (255, 255, 255, Color::White),
];

fn dist(a: (u8, u8, u8), b: (u8, u8, u8)) -> u32 {
    let d = |x: u8, y: u8| (x as i32 - y as i32).pow(2) as u32;
    d(a.0, b.0) * 3 + d(a.1, b.1) * 4 + d(a.2, b.2) * 2
}

/// A colour as this terminal can show it (`None` in mono).
pub fn degrade(c: Color, depth: Depth) -> Option<Color> {
    let Color::Rgb(r, g, b) = c else {
        return (depth != Depth::Mono).then_some(c);
    };
    match depth {
        Depth::Mono => None,
        Depth::TrueColor => Some(c),
        Depth::Ansi256 => Some(Color::Indexed(nearest_256(r, g, b))),
        Depth::Ansi16 => ANSI16
            .iter()
            .min_by_key(|(x, y, z, _)| dist((r, g, b), (*x, *y, *z)))
            .map(|t| t.3),
    }
}

fn nearest_256(r: u8, g: u8, b: u8) -> u8 {
    const LV: [u8; 6] = [0, 95, 135, 175, 215, 255];
    let idx = |v: u8| {
        LV.iter()
            .enumerate()
            .min_by_key(|(_, l)| (v as i32 - **l as i32).abs())
            .map_or(0, |(i, _)| i)
    };
    let (ri, gi, bi) = (idx(r), idx(g), idx(b));
    let cube = (LV[ri], LV[gi], LV[bi]);
    let avg = (r as u32 + g as u32 + b as u32) / 3;
    let gi_ = ((avg.saturating_sub(8)) / 10).min(23) as u8;
    let gv = 8 + 10 * gi_;
    if dist((r, g, b), (gv, gv, gv)) < dist((r, g, b), cube) {
        232 + gi_
    } else {
        16 + 36 * ri as u8 + 6 * gi as u8 + bi as u8
    }
}

/// The built-in themes' names, for a message.
fn builtin_names() -> String {
    EMBEDDED
        .iter()
        .map(|(n, _)| *n)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_embedded_theme_parses_at_every_depth() {
        for (n, _) in EMBEDDED {
            for d in [Depth::TrueColor, Depth::Ansi256, Depth::Ansi16, Depth::Mono] {
                Theme::load(n, None, d).unwrap_or_else(|e| panic!("{n}: {e}"));
            }
        }
    }

    #[test]
    fn no_color_selects_mono_with_no_colours() {
        let env = |k: &str| (k == "NO_COLOR").then(|| "1".to_string());
        assert_eq!(Depth::detect(env), Depth::Mono);
        let t = Theme::load("default", None, Depth::Mono).unwrap();
        assert_eq!(t.name, "mono");
        for r in Role::ALL {
            assert_eq!(t.style(*r).fg, None, "{}", r.name());
            assert_eq!(t.style(*r).bg, None, "{}", r.name());
        }
    }

    #[test]
    fn hex_degrades_to_256_and_16() {
        let c = Color::Rgb(0xff, 0x00, 0x00);
        assert_eq!(degrade(c, Depth::Ansi256), Some(Color::Indexed(196)));
        assert_eq!(degrade(c, Depth::Ansi16), Some(Color::LightRed));
        assert_eq!(
            degrade(Color::Rgb(0x80, 0x80, 0x80), Depth::Ansi256),
            Some(Color::Indexed(244))
        );
    }

    #[test]
    fn bad_theme_names_file_key_and_problem() {
        fn parts(e: ThemeError) -> (String, String, String) {
            match e {
                ThemeError::File { file, key, problem } => (file, key, problem),
                other => panic!("a file error: {other}"),
            }
        }
        let e = Theme::parse(
            "x",
            "my.toml",
            "[roles]\ntext = { fg = \"#12345\" }\n",
            Depth::TrueColor,
        )
        .unwrap_err();
        let e = parts(e);
        assert_eq!(e.0, "my.toml");
        assert_eq!(e.1, "roles.text.fg");
        assert!(e.2.contains("#rrggbb"), "{}", e.2);
        let e = Theme::parse(
            "x",
            "my.toml",
            "[roles]\nnope = { fg = \"red\" }\n",
            Depth::TrueColor,
        )
        .unwrap_err();
        let e = parts(e);
        assert_eq!((e.1.as_str(), e.2.as_str()), ("roles.nope", "unknown role"));
        let e = Theme::parse(
            "x",
            "my.toml",
            "[roles]\ntext = { fg = \"red\", modifiers = [\"blink\"] }\n",
            Depth::TrueColor,
        )
        .unwrap_err();
        assert_eq!(parts(e).1, "roles.text.modifiers");
    }

    #[test]
    fn user_theme_file_overrides_the_embedded_one() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("themes")).unwrap();
        std::fs::write(
            dir.path().join("themes/default.toml"),
            "[roles]\ndanger = { fg = \"#00ff00\" }\n",
        )
        .unwrap();
        let t = Theme::load("default", Some(dir.path()), Depth::TrueColor).unwrap();
        assert_eq!(t.style(Role::Danger).fg, Some(Color::Rgb(0, 255, 0)));
        std::fs::write(dir.path().join("themes/default.toml"), "[roles\n").unwrap();
        let e = Theme::load("default", Some(dir.path()), Depth::TrueColor).unwrap_err();
        assert!(
            matches!(&e, ThemeError::File { file, .. } if file.ends_with("themes/default.toml:1:7")),
            "{e}"
        );
    }
}

//! The console's config file: theme choice and key rebinding; bad files are errors that name
//! the file, the key and the problem, never a silent fallback.

use countersign::console::testing::Action;
use countersign::console::testing::{Depth, Role};
use countersign::console::{ConsoleError, load_config};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

fn dir_with(config: &str) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("config.toml"), config).unwrap();
    d
}

#[test]
fn config_selects_theme_and_rebinds_keys() {
    let d = dir_with("theme = \"high-contrast\"\n[keys]\napprove = \"A\"\n");
    let (theme, keys) = load_config(Some(d.path()), None, Depth::Ansi16).unwrap();
    assert_eq!(theme.name, "high-contrast");
    let k = KeyEvent::new(KeyCode::Char('A'), KeyModifiers::SHIFT);
    assert_eq!(keys.action(&k), Some(Action::Approve));
    assert!(theme.style(Role::Danger).bg.is_some());
}

#[test]
fn no_color_wins_over_the_configured_theme() {
    let d = dir_with("theme = \"light\"\n");
    let (theme, _) = load_config(Some(d.path()), None, Depth::Mono).unwrap();
    assert_eq!(theme.name, "mono");
    assert!(
        Role::ALL
            .iter()
            .all(|r| theme.style(*r).fg.is_none() && theme.style(*r).bg.is_none())
    );
}

#[test]
fn bad_config_names_file_key_and_problem() {
    let d = dir_with("colour = \"red\"\n");
    let e = load_config(Some(d.path()), None, Depth::TrueColor)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("config.toml") && e.contains("`colour`") && e.contains("unknown setting"),
        "{e}"
    );

    let d = dir_with("[keys]\napprove = \"z\"\nreject = \"z\"\n");
    let e = load_config(Some(d.path()), None, Depth::TrueColor).unwrap_err();
    assert!(matches!(e, ConsoleError::Keymap(_)), "{e}");
    let e = e.to_string();
    assert!(
        e.contains("config.toml")
            && e.contains("keys.reject")
            && e.contains("also bound to approve"),
        "{e}"
    );

    let d = dir_with("theme = \"nope\"\n");
    let e = load_config(Some(d.path()), None, Depth::TrueColor)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("no theme named \"nope\": the built-in ones are default, light, high-contrast, mono, and there is no ")
            && e.ends_with("themes/nope.toml"),
        "the message names the theme, not a file as if it existed: {e}"
    );
    assert!(!e.contains("theme file"), "{e}");

    // A syntax error names the file, its line and its column, in config.toml and a theme.
    let d = dir_with("theme = \"light\"\n[keys]\napprove = = \"z\"\n");
    let e = load_config(Some(d.path()), None, Depth::TrueColor)
        .unwrap_err()
        .to_string();
    assert!(e.contains("config.toml:3:11"), "{e}");
    let d = dir_with("theme = \"mine\"\n");
    std::fs::create_dir_all(d.path().join("themes")).unwrap();
    std::fs::write(
        d.path().join("themes/mine.toml"),
        "[roles]\nselection = {\n",
    )
    .unwrap();
    let e = load_config(Some(d.path()), None, Depth::TrueColor)
        .unwrap_err()
        .to_string();
    assert!(e.contains("themes/mine.toml:2:"), "{e}");

    let d = dir_with("theme = \"mine\"\n");
    std::fs::create_dir_all(d.path().join("themes")).unwrap();
    std::fs::write(
        d.path().join("themes/mine.toml"),
        "[roles]\nselection = { bg = \"#zzzzzz\" }\n",
    )
    .unwrap();
    let e = load_config(Some(d.path()), None, Depth::TrueColor)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("themes/mine.toml") && e.contains("roles.selection.bg") && e.contains("#rrggbb"),
        "{e}"
    );
}

#[test]
fn a_default_key_taken_by_the_user_is_reported() {
    let d = dir_with("[keys]\nreject = \"j\"\n");
    let (_, keys) = load_config(Some(d.path()), None, Depth::TrueColor).unwrap();
    assert_eq!(keys.warnings.len(), 1, "{:?}", keys.warnings);
    assert!(keys.warnings[0].contains("key j now does reject (it did down)"));
}

#[test]
fn the_configuration_page_names_every_action_and_every_role() {
    // docs/configuration.md documents every key a user can set: it cannot fall behind the
    // keymap or the themes.
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/configuration.md"),
    )
    .expect("docs/configuration.md");
    for a in countersign::console::testing::Action::ALL {
        assert!(
            doc.contains(&format!("| `{}` |", a.name())),
            "action {} is not in docs/configuration.md",
            a.name()
        );
    }
    for r in countersign::console::testing::Role::ALL {
        assert!(
            doc.contains(&format!("`{}`", r.name())),
            "role {} is not in docs/configuration.md",
            r.name()
        );
    }
}

/// Issue 21: `[queue]` sets the age bands and notifications; absent, the defaults (15m, 1h,
/// off); a bad value is refused naming the file and the key, never replaced by a default.
#[test]
fn the_queue_table_sets_age_bands_and_notifications_and_refuses_bad_values() {
    use countersign::console::{AgeBands, Notify, Settings, load_settings};
    let d = dir_with("theme = \"light\"\n");
    assert_eq!(load_settings(Some(d.path())).unwrap(), Settings::default());
    assert_eq!(load_settings(None).unwrap(), Settings::default());
    assert_eq!(
        Settings::default().age,
        AgeBands {
            warn_after: 900,
            stale_after: 3600
        }
    );
    assert_eq!(Settings::default().notify, Notify::Off);
    let d = dir_with("[queue]\nwarn_after = \"90s\"\nstale_after = \"2h\"\nnotify = \"osc777\"\n");
    let s = load_settings(Some(d.path())).unwrap();
    assert_eq!((s.age.warn_after, s.age.stale_after), (90, 7200));
    assert_eq!(s.notify, Notify::Osc777);
    let d = dir_with("[stats]\nreview_cost = 4\ncatch = 0.5\n");
    let s = load_settings(Some(d.path())).unwrap();
    assert_eq!((s.review_cost, s.catch), (4.0, 0.5));
    assert_eq!(
        (Settings::default().review_cost, Settings::default().catch),
        (1.5, 0.9)
    );
    // And load_config accepts the same file.
    load_config(Some(d.path()), None, Depth::TrueColor).unwrap();
    for (bad, key) in [
        ("[queue]\nwarn_after = 15\n", "queue.warn_after"),
        ("[queue]\nwarn_after = \"15x\"\n", "queue.warn_after"),
        ("[queue]\nnotify = \"loud\"\n", "queue.notify"),
        ("[queue]\nbell = true\n", "queue.bell"),
        (
            "[queue]\nwarn_after = \"2h\"\nstale_after = \"1h\"\n",
            "queue.stale_after",
        ),
        ("queue = 3\n", "queue"),
        ("[stats]\ncatch = 1.5\n", "stats.catch"),
        ("[stats]\nreview_cost = -1\n", "stats.review_cost"),
        ("[stats]\nreview_cost = \"a lot\"\n", "stats.review_cost"),
        ("[stats]\ncost = 1\n", "stats.cost"),
    ] {
        let d = dir_with(bad);
        let e = load_settings(Some(d.path())).unwrap_err().to_string();
        assert!(e.contains("config.toml") && e.contains(key), "{bad}: {e}");
    }
}

/// A theme is named, not pathed: `../x` or `/abs/x` does not read a file outside `themes/`
/// (found from outside: `--theme ../../elsewhere` loaded `elsewhere.toml`, and a name
/// pointing at a copy of /etc/passwd was parsed). A FIFO in place of `config.toml` or of a
/// theme file is refused at once instead of waited on, and a file over 1 MiB is refused
/// without being read whole.
#[test]
fn theme_names_are_names_and_config_files_are_small_regular_files() {
    let d = dir_with("");
    let outside = d.path().join("elsewhere.toml");
    std::fs::write(&outside, "[roles]\n").unwrap();
    let abs = d.path().join("elsewhere");
    for name in ["../elsewhere", abs.to_str().unwrap(), "a/b", "", "x.y"] {
        let e = load_config(Some(d.path()), Some(name), Depth::TrueColor).unwrap_err();
        assert!(e.to_string().contains("no theme named"), "{name:?}: {e}");
    }
    std::fs::create_dir_all(d.path().join("themes")).unwrap();
    let fifo = |p: &std::path::Path| {
        let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    };
    fifo(&d.path().join("themes/pipe.toml"));
    let (done, finished) = std::sync::mpsc::channel();
    let dir = d.path().to_path_buf();
    std::thread::spawn(move || {
        let _ = done.send(
            load_config(Some(&dir), Some("pipe"), Depth::TrueColor)
                .err()
                .map(|e| e.to_string()),
        );
    });
    let said = finished
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("a FIFO theme was waited on");
    assert!(said.unwrap().contains("not a regular file"));
    let big = d.path().join("themes/big.toml");
    std::fs::write(&big, vec![b'#'; (1 << 20) + 1]).unwrap();
    let e = load_config(Some(d.path()), Some("big"), Depth::TrueColor).unwrap_err();
    assert!(e.to_string().contains("at most 1048576"), "{e}");
    let cfg = d.path().join("config.toml");
    std::fs::remove_file(&cfg).ok();
    fifo(&cfg);
    let (done, finished) = std::sync::mpsc::channel();
    let dir = d.path().to_path_buf();
    std::thread::spawn(move || {
        let _ = done.send(
            load_config(Some(&dir), None, Depth::TrueColor)
                .err()
                .map(|e| e.to_string()),
        );
    });
    let said = finished
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("a FIFO config.toml was waited on");
    assert!(said.unwrap().contains("not a regular file"));
}

/// A key the screens would show escaped (a control, a bidi or invisible character) is not a
/// key the footer can name: refused, as `f13` is; and a binding that takes another action's
/// only key is refused unless that action is given keys too (found from outside:
/// `approve = "q"` left quit with no key while the console said quit kept its other keys).
#[test]
fn keys_are_visible_and_no_action_is_left_without_one() {
    for (config, key) in [
        ("[keys]\nquit = \"\\u202e\"\n", "keys.quit"),
        ("[keys]\nhelp = \"\\u0007\"\n", "keys.help"),
        ("[keys]\nhelp = \"f13\"\n", "keys.help"),
        ("[keys]\napprove = \"q\"\n", "keys.approve"),
    ] {
        let d = dir_with(config);
        let e = load_config(Some(d.path()), None, Depth::TrueColor).unwrap_err();
        assert!(e.to_string().contains(key), "{config}: {e}");
    }
    let d = dir_with("[keys]\napprove = \"q\"\nquit = \"ctrl-q\"\n");
    let (_, keys) = load_config(Some(d.path()), None, Depth::TrueColor).unwrap();
    let q = KeyEvent::new(KeyCode::Char('q'), KeyModifiers::NONE);
    let x = KeyEvent::new(KeyCode::Char('q'), KeyModifiers::CONTROL);
    assert_eq!(keys.action(&q), Some(Action::Approve));
    assert_eq!(keys.action(&x), Some(Action::Quit));
}

/// Found from outside, each a configuration the console read wrongly or explained badly: a
/// dangling `config.toml` link was taken for no file (the defaults, silently); `queue = 5`
/// named the key `queue.`; `quit = ["q", "q"]` said q was "also bound to quit"; `approve =
/// []` left approve keyless without a word; a colour written as a number (`fg = 255`, which
/// the documentation allows) was refused; a theme's `name` held anything; and a hostile value
/// was quoted in two notations (`\\u{1b}` beside `\x1b`).
#[test]
fn configuration_mistakes_are_named_plainly() {
    let d = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(d.path().join("gone.toml"), d.path().join("config.toml")).unwrap();
    let e = load_config(Some(d.path()), None, Depth::TrueColor).unwrap_err();
    assert!(e.to_string().contains("config.toml"), "{e}");
    assert!(countersign::console::load_settings(Some(d.path())).is_err());

    let d = dir_with("queue = 5\n");
    let e = countersign::console::load_settings(Some(d.path()))
        .unwrap_err()
        .to_string();
    assert!(e.contains("key `queue`: must be a table"), "{e}");

    let d = dir_with("[keys]\nquit = [\"q\", \"q\"]\n");
    let e = load_config(Some(d.path()), None, Depth::TrueColor).unwrap_err();
    assert!(e.to_string().contains("q is listed twice"), "{e}");

    let d = dir_with("[keys]\napprove = []\n");
    let (_, keys) = load_config(Some(d.path()), None, Depth::TrueColor).unwrap();
    assert!(
        keys.warnings
            .iter()
            .any(|w| w.contains("keys.approve = [] leaves approve with no key")),
        "{:?}",
        keys.warnings
    );

    std::fs::create_dir_all(d.path().join("themes")).unwrap();
    let theme = |text: &str| {
        std::fs::write(d.path().join("themes/t.toml"), text).unwrap();
        load_config(Some(d.path()), Some("t"), Depth::Ansi256)
    };
    let (t, _) = theme("[palette]\nx = 17\n[roles]\ntext = { fg = 255, bg = \"x\" }\n").unwrap();
    let st = t.style(Role::Text);
    assert_eq!(
        (st.fg, st.bg),
        (
            Some(ratatui::style::Color::Indexed(255)),
            Some(ratatui::style::Color::Indexed(17))
        )
    );
    for (text, says) in [
        (
            "[roles]\ntext = { fg = 256 }\n",
            "256 is not a colour number",
        ),
        ("[roles]\ntext = { fg = true }\n", "must be a colour"),
        ("name = 3\n[roles]\n", "key `name`"),
        ("name = \"a\\u202eb\"\n[roles]\n", "key `name`"),
        (
            "[roles]\ntext = { fg = \"re\\u001bd\" }\n",
            "\"re\\x1bd\" is not a colour",
        ),
    ] {
        let e = theme(text).unwrap_err().to_string();
        assert!(e.contains(says), "{text}: {e}");
    }
    theme("name = \"My theme\"\n[roles]\n").unwrap();
    let e = load_config(Some(d.path()), Some("a\u{1b}b"), Depth::TrueColor)
        .unwrap_err()
        .to_string();
    assert!(e.contains("no theme named \"a\\x1bb\""), "{e}");
}

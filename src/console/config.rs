//! `config.toml`: the theme, the `[keys]` bindings and the `[queue]` settings.

use std::path::{Path, PathBuf};

use super::keymap::Keymap;
use super::options::ConsoleError;
use super::settings::Settings;
use super::theme::{Depth, Theme};

pub(crate) fn env(k: &str) -> Option<String> {
    std::env::var(k).ok().filter(|v| !v.is_empty())
}

pub(crate) fn default_config_dir() -> Option<PathBuf> {
    env("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| env("HOME").map(|h| Path::new(&h).join(".config")))
        .map(|d| d.join("countersign"))
}

/// Reads `config.toml` (theme, `[keys]`); absent file = defaults.
pub fn load_config(
    dir: Option<&Path>,
    theme_override: Option<&str>,
    depth: Depth,
) -> Result<(Theme, Keymap), ConsoleError> {
    let mut theme_name = theme_override.map(str::to_owned);
    let mut keymap = Keymap::default();
    if let Some(dir) = dir {
        let p = dir.join("config.toml");
        if super::files::present(&p) {
            let file = super::files::shown(&p);
            let t = read_table(&p, &file)?;
            if theme_name.is_none()
                && let Some(v) = t.get("theme")
            {
                theme_name = Some(
                    v.as_str()
                        .ok_or_else(|| ConsoleError::Config {
                            file: file.clone(),
                            problem: "key `theme`: must be a string".into(),
                        })?
                        .to_string(),
                );
            }
            if let Some(k) = t.get("keys") {
                let k = k.as_table().ok_or_else(|| ConsoleError::Config {
                    file: file.clone(),
                    problem: "key `keys`: must be a table".into(),
                })?;
                keymap = Keymap::with_overrides(&file, k)?;
            }
        }
    }
    let theme = Theme::load(theme_name.as_deref().unwrap_or("default"), dir, depth)?;
    Ok((theme, keymap))
}

/// Reads `config.toml`'s `[queue]` table (age bands, notifications); absent file or table =
/// defaults. A file that does not parse is refused as [`load_config`] refuses it.
pub fn load_settings(dir: Option<&Path>) -> Result<Settings, ConsoleError> {
    let Some(p) = dir
        .map(|d| d.join("config.toml"))
        .filter(|p| super::files::present(p))
    else {
        return Ok(Settings::default());
    };
    let file = super::files::shown(&p);
    let t = read_table(&p, &file)?;
    super::settings::from_table(&file, &t)
}

/// `mouse = true` in `config.toml`: clicks select and open rows, the wheel scrolls (off when
/// the file or the key is absent).
pub fn load_mouse(dir: Option<&Path>) -> Result<bool, ConsoleError> {
    let Some(p) = dir
        .map(|d| d.join("config.toml"))
        .filter(|p| super::files::present(p))
    else {
        return Ok(false);
    };
    let file = super::files::shown(&p);
    match read_table(&p, &file)?.get("mouse") {
        None => Ok(false),
        Some(toml::Value::Boolean(b)) => Ok(*b),
        Some(_) => Err(ConsoleError::Config {
            file,
            problem: "key `mouse`: must be true or false".into(),
        }),
    }
}

/// The file as a TOML table with only the keys the console knows.
fn read_table(p: &Path, file: &str) -> Result<toml::Table, ConsoleError> {
    let src = super::files::read_small(p).map_err(|problem| ConsoleError::Config {
        file: file.to_string(),
        problem,
    })?;
    let t: toml::Table = src
        .parse()
        .map_err(|e: toml::de::Error| ConsoleError::Config {
            file: super::toml_at::at(file, &src, &e),
            problem: e.message().to_string(),
        })?;
    for k in t.keys() {
        if !["theme", "keys", "queue", "stats", "mouse"].contains(&k.as_str()) {
            return Err(ConsoleError::Config {
                file: file.to_string(),
                problem: format!(
                    "key `{k}`: unknown setting; expected theme, mouse, [keys], [queue] or [stats]"
                ),
            });
        }
    }
    Ok(t)
}

//! `config.toml`'s `[queue]` table (issue 21): the age bands' thresholds and notifications;
//! and its `[stats]` table: the c and q of the stats screen's L* = c / (q·p).
//!
//! ```toml
//! [queue]
//! warn_after = "15m"    # an approval this old is in the warning band
//! stale_after = "1h"    # and this old, stale
//! notify = "off"        # or "bell", "osc9", "osc777": when a new approval arrives
//! ```

use super::options::ConsoleError;

/// How the console tells that a new approval arrived while it is open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Notify {
    /// Nothing (the default).
    #[default]
    Off,
    /// The terminal's bell (BEL).
    Bell,
    /// A desktop notification through OSC 9 (iTerm2, kitty, WezTerm, Windows Terminal).
    Osc9,
    /// A desktop notification through OSC 777 (`notify`: rxvt-unicode, foot, Ghostty, VTE).
    Osc777,
}

/// The queue's age bands: younger than `warn_after` seconds is fresh, from `stale_after` on it
/// is stale, warning between.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgeBands {
    pub warn_after: i64,
    pub stale_after: i64,
}

impl Default for AgeBands {
    fn default() -> Self {
        AgeBands {
            warn_after: 15 * 60,
            stale_after: 60 * 60,
        }
    }
}

/// Which band an age falls in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Band {
    Fresh,
    Warning,
    Stale,
}

impl AgeBands {
    /// The band of an age in seconds (a negative age, a time in the future, is fresh).
    pub fn band(&self, age: i64) -> Band {
        if age >= self.stale_after {
            Band::Stale
        } else if age >= self.warn_after {
            Band::Warning
        } else {
            Band::Fresh
        }
    }
}

/// The settings `config.toml` gives beside the theme and the keys.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    pub age: AgeBands,
    pub notify: Notify,
    /// `[stats] review_cost`: c, what one review costs (the stats screen's L*).
    pub review_cost: f64,
    /// `[stats] catch`: q, the share of wrong calls a reviewer catches (0 < q <= 1).
    pub catch: f64,
}

impl Default for Settings {
    /// As `countersign stats` assumes by default: c = 1.5, q = 0.9.
    fn default() -> Self {
        Settings {
            age: AgeBands::default(),
            notify: Notify::Off,
            review_cost: 1.5,
            catch: 0.9,
        }
    }
}

/// Reads `[queue]` and `[stats]` from the parsed file (absent: the defaults).
pub(crate) fn from_table(file: &str, t: &toml::Table) -> Result<Settings, ConsoleError> {
    let mut s = Settings::default();
    stats_table(file, t, &mut s)?;
    let Some(q) = t.get("queue") else {
        return Ok(s);
    };
    let bad = |key: &str, problem: String| ConsoleError::Config {
        file: file.to_string(),
        problem: format!("key `queue.{key}`: {problem}"),
    };
    let q = q.as_table().ok_or_else(|| ConsoleError::Config {
        file: file.to_string(),
        problem: "key `queue`: must be a table ([queue])".into(),
    })?;
    for (k, v) in q {
        match k.as_str() {
            "warn_after" | "stale_after" => {
                let secs = v
                    .as_str()
                    .ok_or_else(|| "must be a string such as \"15m\"".to_string())
                    .and_then(parse_duration)
                    .map_err(|e| bad(k, e))?
                    .as_secs() as i64;
                if k == "warn_after" {
                    s.age.warn_after = secs;
                } else {
                    s.age.stale_after = secs;
                }
            }
            "notify" => {
                s.notify = match v.as_str() {
                    Some("off") => Notify::Off,
                    Some("bell") => Notify::Bell,
                    Some("osc9") => Notify::Osc9,
                    Some("osc777") => Notify::Osc777,
                    _ => {
                        return Err(bad(
                            k,
                            "must be \"off\", \"bell\", \"osc9\" or \"osc777\"".into(),
                        ));
                    }
                }
            }
            _ => {
                return Err(bad(
                    k,
                    "unknown setting; expected warn_after, stale_after or notify".into(),
                ));
            }
        }
    }
    if s.age.stale_after < s.age.warn_after {
        return Err(bad(
            "stale_after",
            "must not be shorter than warn_after".into(),
        ));
    }
    Ok(s)
}

/// `[stats]`: `review_cost` (c > 0) and `catch` (0 < q <= 1), numbers.
fn stats_table(file: &str, t: &toml::Table, s: &mut Settings) -> Result<(), ConsoleError> {
    let Some(v) = t.get("stats") else {
        return Ok(());
    };
    let bad = |key: &str, problem: &str| ConsoleError::Config {
        file: file.to_string(),
        problem: format!("key `stats{key}`: {problem}"),
    };
    let v = v.as_table().ok_or_else(|| bad("", "must be a table"))?;
    for (k, x) in v {
        let n = x
            .as_float()
            .or_else(|| x.as_integer().map(|i| i as f64))
            .filter(|n| n.is_finite() && *n > 0.0);
        match (k.as_str(), n) {
            ("review_cost", Some(n)) => s.review_cost = n,
            ("catch", Some(n)) if n <= 1.0 => s.catch = n,
            ("review_cost", _) => return Err(bad(".review_cost", "must be a positive number")),
            ("catch", _) => {
                return Err(bad(".catch", "must be a number above 0 and at most 1"));
            }
            _ => {
                return Err(bad(
                    &format!(".{k}"),
                    "unknown setting; expected review_cost or catch",
                ));
            }
        }
    }
    Ok(())
}

/// `90s`, `15m`, `24h`, `7d`, `2w` (one whole number and one unit, at most a hundred years).
pub(crate) fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let split = s
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("'{s}' has no unit: use s, m, h, d or w (e.g. 24h)"))?;
    let (num, unit) = s.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("'{s}' does not start with a whole number (e.g. 24h)"))?;
    let secs = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 604_800,
        _ => return Err(format!("'{s}': unknown unit '{unit}'; use s, m, h, d or w")),
    };
    n.checked_mul(secs)
        .filter(|&t| t <= 100 * 365 * 86_400)
        .map(std::time::Duration::from_secs)
        .ok_or_else(|| format!("'{s}' is longer than a hundred years"))
}

//! What a database's name given as a SQLite path must not be: a URL of another kind, or a
//! libpq connection string. Read as a path, it would be opened (or created) as a file of that
//! name and, on failure, printed whole, with any password it holds. Refused instead, shown with
//! its password hidden.

use crate::safetext::plain_line;

/// True when `s` names a PostgreSQL database (`postgres://` or `postgresql://`, in any case)
/// rather than a SQLite path.
pub fn is_pg_url(s: &str) -> bool {
    let lower = s.get(..13).unwrap_or(s).to_ascii_lowercase();
    lower.starts_with("postgres://") || lower.starts_with("postgresql://")
}

/// The password in what follows a `scheme:` (between the user and the last '@'; with no '@',
/// whatever follows a ':' in the host part that is not a port number, in case it is one), and
/// any `…password = VALUE` option (a quoted value to its closing quote), replaced by `***`.
/// White space before the scheme does not hide it.
fn hide_passwords(text: &str) -> String {
    let lead = text.len() - text.trim_start().len();
    let body = &text[lead..];
    let scheme_end = body.find(':').filter(|&c| {
        c > 0
            && body[..c]
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"+.-".contains(&b))
    });
    let shown = match scheme_end {
        Some(c) => {
            let start = c + 1 + body[c + 1..].len() - body[c + 1..].trim_start_matches('/').len();
            let (head, rest) = text.split_at(lead + start);
            let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
            match rest.rfind('@') {
                Some(at) if rest[..at].contains(':') => {
                    let user = &rest[..rest.find(':').unwrap_or(0)];
                    format!("{head}{user}:***{}", &rest[at..])
                }
                None => match authority.rfind(':') {
                    Some(colon)
                        if !authority[colon + 1..].bytes().all(|b| b.is_ascii_digit())
                            && !authority.ends_with(']') =>
                    {
                        format!("{head}{}:***{}", &rest[..colon], &rest[authority.len()..])
                    }
                    _ => text.to_string(),
                },
                _ => text.to_string(),
            }
        }
        None => text.to_string(),
    };
    hide_password_options(&shown)
}

/// Every `password = VALUE` option in `shown` (any case, white space around `=`) with its
/// value replaced by `***`: a value in single quotes to its closing quote (a backslash
/// escapes the next character, as libpq reads it), else to the next white space or `&`.
fn hide_password_options(shown: &str) -> String {
    let lower = shown.to_ascii_lowercase();
    let mut out = String::with_capacity(shown.len());
    let mut from = 0;
    let mut at = 0;
    while let Some(i) = lower[at..].find("password").map(|i| i + at) {
        let after = i + "password".len();
        let eq = after + lower[after..].len() - lower[after..].trim_start().len();
        if !lower[eq..].starts_with('=') {
            at = after;
            continue;
        }
        let value = eq + 1 + lower[eq + 1..].len() - lower[eq + 1..].trim_start().len();
        let end = if shown[value..].starts_with('\'') {
            let mut escaped = false;
            shown[value + 1..]
                .char_indices()
                .find(|&(_, c)| {
                    let closes = c == '\'' && !escaped;
                    escaped = c == '\\' && !escaped;
                    closes
                })
                .map_or(shown.len(), |(j, _)| value + 1 + j + 1)
        } else {
            shown[value..]
                .find(|c: char| c == '&' || c.is_whitespace())
                .map_or(shown.len(), |e| e + value)
        };
        out.push_str(&shown[from..value]);
        out.push_str("***");
        from = end;
        at = end;
    }
    out.push_str(&shown[from..]);
    out
}

/// Why `name` is not taken as a SQLite path, or `None` when it may be one. `name` is not a
/// `postgres://` or `postgresql://` URL (those are read as PostgreSQL's). Anything that names
/// an existing file system entry is a path, whatever it looks like. The reason names it
/// escaped for one line, its password hidden.
pub fn not_a_path(name: &str) -> Option<String> {
    if std::fs::symlink_metadata(name).is_ok() {
        return None;
    }
    let lower = name.to_ascii_lowercase();
    let scheme_like =
        lower.starts_with("postgres") && lower.find(':').is_some_and(|c| !lower[..c].contains('/'));
    let what = if name.contains("://") || scheme_like {
        "looks like a URL, not a SQLite file's path; a PostgreSQL database is named by a URL \
         beginning postgres:// or postgresql://"
    } else if lower.contains("password=")
        || (name.contains(' ')
            && ["host=", "dbname=", "user="]
                .iter()
                .any(|k| lower.starts_with(k)))
    {
        "looks like a libpq connection string, not a SQLite file's path; countersign names a \
         PostgreSQL database by a URL beginning postgres:// or postgresql://"
    } else {
        return None;
    };
    Some(format!(
        "{} {what} (and no file of that name exists)",
        name_shown(name)
    ))
}

/// A database's name as the refusals here show it: escaped for one line, at most 200
/// characters, any password hidden.
pub fn name_shown(name: &str) -> String {
    plain_line(hide_passwords(name).as_bytes(), 200)
}

/// Why a `postgres://` or `postgresql://` URL cannot be opened by a build without
/// PostgreSQL, or `None` when `name` is an existing file system entry (then it is a path,
/// as in [`not_a_path`]). The reason names it escaped for one line, its password hidden.
pub fn no_postgres_here(name: &str) -> Option<String> {
    if std::fs::symlink_metadata(name).is_ok() {
        return None;
    }
    let shown = name_shown(name);
    Some(format!(
        "{shown} is a PostgreSQL URL, and this build has no PostgreSQL (it was built without \
         the feature `postgres`); name a SQLite file, or build countersign with its default \
         features"
    ))
}

#[cfg(test)]
mod tests {
    use super::{no_postgres_here, not_a_path};

    #[test]
    fn a_postgres_url_without_postgres_is_refused_with_its_password_hidden() {
        for url in [
            "postgres://alice:Hunter2Sekrit@db.example/x",
            "POSTGRESQL://alice:Hunter2Sekrit@db.example/x?password=Hunter2Sekrit",
        ] {
            let why = no_postgres_here(url).expect("refused");
            assert!(!why.contains("Hunter2Sekrit"), "{why}");
            assert!(why.contains("alice:***@db.example/x"), "{why}");
            assert!(why.contains("without the feature `postgres`"), "{why}");
        }
        let d = tempfile::tempdir().unwrap();
        let there = d.path().join("postgres:");
        std::fs::write(&there, b"").unwrap();
        assert_eq!(no_postgres_here(there.to_str().unwrap()), None);
    }

    #[test]
    fn urls_and_connection_strings_are_refused_with_their_passwords_hidden() {
        for (name, secret) in [
            (
                "postgress://alice:Hunter2Sekrit@db.example/x",
                "Hunter2Sekrit",
            ),
            (
                "postgresq://alice:Hunter2Sekrit@db.example/x",
                "Hunter2Sekrit",
            ),
            (
                "postgres:/alice:Hunter2Sekrit@db.example/x",
                "Hunter2Sekrit",
            ),
            ("mysql://u:p/a@ss@h/x", "p/a@ss"),
            ("host=db password=Hunter2Sekrit dbname=x", "Hunter2Sekrit"),
            ("host=db PASSWORD=Hunter2Sekrit", "Hunter2Sekrit"),
            ("x?Password=Hunter2Sekrit&y=1", "Hunter2Sekrit"),
            // White space before the scheme, around '=', a quoted value, no '@'.
            (" postgres://u:Hunter2Sekrit@h/x", "Hunter2Sekrit"),
            ("\tmysql://u:Hunter2Sekrit@h/x", "Hunter2Sekrit"),
            ("host=db password = Hunter2Sekrit", "Hunter2Sekrit"),
            ("host=db password= Hunter2Sekrit", "Hunter2Sekrit"),
            ("host=db password='Hunter2 Sekrit' user=u", "Sekrit"),
            ("password='Hunter2\\' Sekrit' user=u", "Sekrit"),
            ("postgress://u:Hunter2Sekrit", "Hunter2Sekrit"),
            ("postgress://u:Hunter2Sekrit/x", "Hunter2Sekrit"),
        ] {
            let why = not_a_path(name).unwrap_or_else(|| panic!("{name} taken as a path"));
            assert!(!why.contains(secret), "{why}");
            assert!(why.contains("postgres://"), "{why}");
        }
        for path in [
            "runs.db",
            "/var/lib/agents/runs.db",
            "./postgres/runs.db",
            "host=x.db",
            "a b.db",
        ] {
            assert_eq!(not_a_path(path), None, "{path}");
        }
        // A file system entry that exists is a path, whatever its name looks like.
        let dir = tempfile::tempdir().unwrap();
        for name in ["password=hunter2.db", "mysql:x.db"] {
            let p = dir.path().join(name);
            std::fs::write(&p, b"").unwrap();
            assert_eq!(not_a_path(p.to_str().unwrap()), None, "{name}");
        }
        let url = dir.path().join("a://b");
        std::fs::create_dir_all(&url).unwrap();
        assert_eq!(not_a_path(url.to_str().unwrap()), None);
        let gone = dir.path().join("password=other.db");
        assert!(not_a_path(gone.to_str().unwrap()).is_some());
    }
}

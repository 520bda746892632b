//! libpq's password file: `PGPASSFILE`, else `~/.pgpass`; lines `host:port:database:user:password`
//! with `*` matching anything and `\` escaping `:` and `\`. As libpq does, a file readable by
//! group or others is ignored.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

fn path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("PGPASSFILE").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".pgpass"))
}

/// Splits one line into its fields, undoing `\` escapes.
fn fields(line: &str) -> Vec<String> {
    let (mut out, mut cur, mut esc) = (Vec::new(), String::new(), false);
    for c in line.chars() {
        match (esc, c) {
            (true, _) => {
                cur.push(c);
                esc = false;
            }
            (false, '\\') => esc = true,
            (false, ':') if out.len() < 4 => out.push(std::mem::take(&mut cur)),
            (false, _) => cur.push(c),
        }
    }
    out.push(cur);
    out
}

fn matches(pattern: &str, value: &str) -> bool {
    pattern == "*" || pattern == value
}

/// The password file, when there is one that [`lookup`] ignores because group or others may
/// read it (with its permission bits): a connection refused for want of a password says so.
pub(crate) fn ignored() -> Option<(PathBuf, u32)> {
    let p = path()?;
    let meta = std::fs::metadata(&p).ok()?;
    let mode = meta.permissions().mode() & 0o777;
    (meta.is_file() && mode & 0o077 != 0).then_some((p, mode))
}

/// The password the file gives for this connection, if any. A socket directory (or no host)
/// matches `localhost`, as in libpq.
pub(crate) fn lookup(host: &str, port: &str, dbname: &str, user: &str) -> Option<String> {
    let p = path()?;
    let meta = std::fs::metadata(&p).ok()?;
    if !meta.is_file() || meta.permissions().mode() & 0o077 != 0 {
        return None;
    }
    let text = std::fs::read_to_string(&p).ok()?;
    lookup_in(&text, host, port, dbname, user)
}

pub(crate) fn lookup_in(
    text: &str,
    host: &str,
    port: &str,
    dbname: &str,
    user: &str,
) -> Option<String> {
    let host = if host.is_empty() || host.starts_with('/') {
        "localhost"
    } else {
        host
    };
    let port = if port.is_empty() { "5432" } else { port };
    let dbname = if dbname.is_empty() { user } else { dbname };
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(fields)
        .find(|f| {
            f.len() == 5
                && matches(&f[0], host)
                && matches(&f[1], port)
                && matches(&f[2], dbname)
                && matches(&f[3], user)
        })
        .map(|f| f[4].clone())
}

#[cfg(test)]
mod tests {
    use super::lookup_in;

    #[test]
    fn wildcards_escapes_and_the_first_match() {
        let file =
            "# comment\ndb.example:5432:runs:alice:a\\:b\\\\c\n*:*:*:bob:second\n*:*:*:*:any\n";
        assert_eq!(
            lookup_in(file, "db.example", "5432", "runs", "alice").as_deref(),
            Some("a:b\\c")
        );
        assert_eq!(
            lookup_in(file, "h", "1", "d", "bob").as_deref(),
            Some("second")
        );
        assert_eq!(
            lookup_in(file, "/tmp/sock", "", "d", "carol").as_deref(),
            Some("any")
        );
        assert_eq!(lookup_in("h:1:d:u:p\n", "other", "1", "d", "u"), None);
    }
}

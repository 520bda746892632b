//! The check that refuses to start a stdio server whose arguments reach the proxy's own files
//! (agentrt mcp 2.3): the configuration, the database and every manifest decide what a model
//! may do, so a server pointed at them, or at a directory holding them, could rewrite its own
//! rules. A guard, not a boundary: a server can still reach them by other means.

use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use super::config::ProxyConfig;

/// A protected file: its path as configured, and the identities that reach it.
struct Protected {
    shown: PathBuf,
    /// (device, inode) of the file (if it exists) and of every ancestor directory.
    ids: Vec<(u64, u64)>,
    /// The resolved path, for a file not created yet.
    resolved: PathBuf,
    exists: bool,
}

/// Refuses a server (not marked `skip_path_check`) with an argument reaching a protected file.
pub fn check(cfg: &ProxyConfig) -> Result<(), String> {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let home = std::env::var_os("HOME").map(PathBuf::from);
    // A PostgreSQL database is no file here: its protection is its roles (decision 0085).
    let mut files = vec![cfg.path.clone()];
    files.extend(cfg.database.file().map(Path::to_path_buf));
    files.extend(cfg.servers.iter().map(|s| s.manifest.clone()));
    let protected: Vec<Protected> = files.iter().map(|f| protect(f, &cwd)).collect();
    for s in &cfg.servers {
        if s.skip_path_check {
            continue;
        }
        for arg in s.command.iter().skip(1) {
            for cand in candidates(arg, &cwd, home.as_deref()) {
                if let Some(p) = reaches(&cand, &protected) {
                    return Err(format!(
                        "server {}: its argument {} reaches {}, which the proxy's policy and approvals depend on: point the server elsewhere, or set skip_path_check on it if it cannot write there",
                        super::quote(&s.name),
                        super::quote(arg),
                        super::sanitize(&p.shown.display().to_string())
                    ));
                }
            }
        }
    }
    Ok(())
}

fn absolute(p: &Path, cwd: &Path) -> PathBuf {
    let joined = if p.is_absolute() {
        p.to_path_buf()
    } else {
        cwd.join(p)
    };
    // Lexical clean-up of `.` and `..` (the resolved path is compared too).
    let mut out = PathBuf::new();
    for c in joined.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

fn id(p: &Path) -> Option<(u64, u64)> {
    std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()))
}

fn protect(file: &Path, cwd: &Path) -> Protected {
    let abs = absolute(file, cwd);
    let resolved = std::fs::canonicalize(&abs).unwrap_or_else(|_| {
        // Not created yet: resolve its directory.
        match (abs.parent(), abs.file_name()) {
            (Some(d), Some(n)) => std::fs::canonicalize(d)
                .map(|d| d.join(n))
                .unwrap_or_else(|_| abs.clone()),
            _ => abs.clone(),
        }
    });
    let mut ids = Vec::new();
    for path in [&abs, &resolved] {
        let mut cur = Some(path.as_path());
        while let Some(p) = cur {
            if let Some(i) = id(p)
                && !ids.contains(&i)
            {
                ids.push(i);
            }
            cur = p.parent();
        }
    }
    Protected {
        shown: file.to_path_buf(),
        exists: abs.exists(),
        ids,
        resolved,
    }
}

/// The paths an argument could name.
fn candidates(arg: &str, cwd: &Path, home: Option<&Path>) -> Vec<PathBuf> {
    let mut texts: Vec<&str> = vec![arg];
    if let Some((_, v)) = arg.split_once('=') {
        texts.push(v);
    }
    if let Some((_, v)) = arg.split_once(':') {
        texts.push(v);
    }
    if arg.starts_with('-') && !arg.starts_with("--") && arg.len() > 2 {
        texts.push(arg.get(2..).unwrap_or_default());
    }
    let mut more = Vec::new();
    for t in &texts {
        if let Some(p) = t.strip_prefix("file://") {
            more.push(p);
        }
    }
    texts.extend(more);
    let mut out = Vec::new();
    for t in texts {
        if t.is_empty() {
            continue;
        }
        let expanded = match (t, home) {
            ("~", Some(h)) => h.to_path_buf(),
            (t, Some(h)) if t.starts_with("~/") => h.join(&t[2..]),
            (t, _) => PathBuf::from(t),
        };
        out.push(absolute(&expanded, cwd));
    }
    out
}

fn reaches<'p>(cand: &Path, protected: &'p [Protected]) -> Option<&'p Protected> {
    if let Some(i) = id(cand) {
        return protected.iter().find(|p| p.ids.contains(&i));
    }
    let resolved = match (cand.parent(), cand.file_name()) {
        (Some(d), Some(n)) => std::fs::canonicalize(d).map(|d| d.join(n)).ok()?,
        _ => return None,
    };
    protected
        .iter()
        .find(|p| !p.exists && p.resolved == resolved)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(dir: &Path, args: &[&str]) -> ProxyConfig {
        let mut command = vec!["srv".to_string()];
        command.extend(args.iter().map(|a| a.to_string()));
        let text = serde_json::json!({
            "database": "runs.db", "session": "s",
            "servers": [{"name": "fs", "command": command, "manifest": "m/fs.json"}]
        })
        .to_string();
        crate::mcp::config::parse(&dir.join("proxy.json"), text.as_bytes()).unwrap()
    }

    #[test]
    fn config_refuses_a_server_that_reaches_the_proxys_files() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("cfg");
        std::fs::create_dir_all(dir.join("m")).unwrap();
        std::fs::write(dir.join("proxy.json"), "{}").unwrap();
        std::fs::write(dir.join("m/fs.json"), "{}").unwrap();
        let elsewhere = root.path().join("data");
        std::fs::create_dir_all(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&dir, root.path().join("link")).unwrap();
        let d = dir.display().to_string();
        for arg in [
            d.clone(),
            format!("{d}/m"),
            format!("--root={d}"),
            format!("-r{d}"),
            format!("ro:{d}"),
            format!("file://{d}/m/fs.json"),
            format!("{}/link/m", root.path().display()),
            format!("{d}/runs.db"), // not created yet
            format!("{}/data/../cfg", root.path().display()),
            "/".to_string(),
        ] {
            let e = check(&cfg(&dir, &[&arg])).unwrap_err();
            assert!(e.starts_with("server \"fs\": its argument "), "{arg}: {e}");
            assert!(e.contains("which the proxy's policy and approvals depend on"));
        }
        for arg in [
            elsewhere.display().to_string(),
            "--verbose".into(),
            "3".into(),
        ] {
            assert!(check(&cfg(&dir, &[&arg])).is_ok(), "{arg}");
        }
        let mut c = cfg(&dir, &[&d]);
        c.servers[0].skip_path_check = true;
        assert!(check(&c).is_ok());
    }
}

//! Files only their owner can change (agentrt's `ReadOwned`): the configuration, rules and
//! manifests decide what a model may do, so a file its group or others can write is refused.

use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Bytes read from a file at most (a configuration or manifest is small; a huge file is an
/// error, not an allocation).
pub const MAX_FILE_BYTES: u64 = 16 << 20;

/// Reads `path` after checking the open file: a regular file, no group or other write bit,
/// owned by the current user. Errors name the path and what to do.
pub fn read_owned(path: &Path) -> Result<Vec<u8>, String> {
    let shown = path.display();
    let f = std::fs::File::open(path).map_err(|e| format!("{shown}: {e}"))?;
    let md = f.metadata().map_err(|e| format!("{shown}: {e}"))?;
    check_owned(path, &md)?;
    if md.len() > MAX_FILE_BYTES {
        return Err(format!("{shown} is larger than {MAX_FILE_BYTES} bytes"));
    }
    let mut buf = Vec::with_capacity(md.len() as usize);
    f.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut buf)
        .map_err(|e| format!("{shown}: {e}"))?;
    if buf.len() as u64 > MAX_FILE_BYTES {
        return Err(format!("{shown} is larger than {MAX_FILE_BYTES} bytes"));
    }
    Ok(buf)
}

/// The checks of [`read_owned`] on metadata already read.
pub fn check_owned(path: &Path, md: &std::fs::Metadata) -> Result<(), String> {
    let shown = path.display();
    if !md.file_type().is_file() {
        return Err(format!("{shown} is not a regular file"));
    }
    let mode = md.mode();
    if mode & 0o022 != 0 {
        return Err(format!(
            "{shown} has mode {}, which lets its group or others write it: chmod go-w it",
            mode_text(mode)
        ));
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if md.uid() != me {
        return Err(format!(
            "{shown} (mode {}) is owned by uid {}, not by the current user",
            mode_text(mode),
            md.uid()
        ));
    }
    Ok(())
}

/// Go's `FileMode.String()` for a regular file or directory: `-rw-r--r--`, `drwx------`.
pub fn mode_text(mode: u32) -> String {
    let mut s = String::with_capacity(10);
    s.push(if mode & 0o170000 == 0o040000 {
        'd'
    } else {
        '-'
    });
    for (bit, c) in [
        (0o400, 'r'),
        (0o200, 'w'),
        (0o100, 'x'),
        (0o040, 'r'),
        (0o020, 'w'),
        (0o010, 'x'),
        (0o004, 'r'),
        (0o002, 'w'),
        (0o001, 'x'),
    ] {
        s.push(if mode & bit != 0 { c } else { '-' });
    }
    s
}

/// The database path's check before and after the store opens it (agentrt mcp 2.2): if it
/// exists it is no symbolic link, a regular file, the current user's, not writable by others.
pub fn check_database(path: &Path) -> Result<(), String> {
    let shown = path.display();
    let md = match std::fs::symlink_metadata(path) {
        Ok(md) => md,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("database: {shown}: {e}")),
    };
    if md.file_type().is_symlink() {
        return Err(format!(
            "database: {shown} is a symbolic link; name the database file itself"
        ));
    }
    if !md.file_type().is_file() {
        return Err(format!("database: {shown} is not a regular file"));
    }
    check_owned(path, &md).map_err(|e| format!("database: {e}"))
}

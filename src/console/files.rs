//! The console's own files (`config.toml`, themes) read safely: regular files only, opened
//! without blocking, and small.

use std::path::Path;

/// The most a configuration or theme file may hold: these are a few kilobytes by hand.
pub const FILE_MAX: u64 = 1 << 20;

/// How a message names the file `p`: escaped for one line in the reversible notation, so that
/// a value the message quotes (already escaped) keeps one notation beside it.
pub fn shown(p: &Path) -> String {
    crate::safetext::escape_reversible(
        p.as_os_str().as_encoded_bytes(),
        crate::safetext::Options::line(),
    )
}

/// Whether `p` names a file system entry at all: a dangling link or an unreadable entry is
/// there, so that reading it fails loudly instead of the console taking the defaults.
pub fn present(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok()
}

/// A configuration or theme file's text: a regular file (a FIFO is refused, not waited on:
/// it is opened without blocking and looked at before any read), at most [`FILE_MAX`] bytes,
/// UTF-8.
pub fn read_small(p: &Path) -> Result<String, String> {
    use std::io::Read as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(p)
        .map_err(|e| e.to_string())?;
    let meta = f.metadata().map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    if meta.len() > FILE_MAX {
        return Err(format!(
            "{} bytes; a configuration file is at most {FILE_MAX}",
            meta.len()
        ));
    }
    let mut bytes = Vec::new();
    f.take(FILE_MAX + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > FILE_MAX {
        return Err(format!("more than {FILE_MAX} bytes"));
    }
    String::from_utf8(bytes).map_err(|_| "not UTF-8".to_string())
}

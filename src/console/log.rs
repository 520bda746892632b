//! The console's log file: append only, every line escaped; never the terminal.

use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use super::text;

/// A log file (append only); never the terminal.
#[derive(Clone)]
pub struct Log(Arc<Mutex<Option<std::fs::File>>>);

impl Log {
    pub fn open(path: &Path) -> Log {
        if let Some(d) = path.parent() {
            let _ = std::fs::create_dir_all(d);
        }
        let f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .ok();
        Log(Arc::new(Mutex::new(f)))
    }
    pub fn write(&self, msg: &str) {
        if let Ok(mut g) = self.0.lock()
            && let Some(f) = g.as_mut()
        {
            let t = SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0);
            let _ = writeln!(f, "{t} {}", text::escaped(msg.as_bytes()));
        }
    }
}

//! Waiting for another process's commit without polling tables (issue 21's `watch`).
//!
//! SQLite's `PRAGMA data_version` says *whether* another connection committed, but only when
//! asked. [`Store::wait_for_commit`] asks it only when the file system says a file of the
//! database changed: on Linux an inotify watch on the database's directory, filtered to the
//! database and its `-wal` (every WAL commit appends to the `-wal`, and a checkpoint writes the
//! database), so a process waiting here sleeps in `poll(2)` between commits and uses no CPU.
//! Where inotify is unavailable (another OS, the per-user watch limit reached), it falls back
//! to asking `data_version` once per `fallback` interval.
//!
//! inotify is four system calls through `libc`, which the crate already uses; the `notify`
//! crate's watcher thread and event channel would be more than one blocking wait needs.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::{Duration, Instant};

use super::Store;
use super::error::StoreError;

/// A watch on the directory of one database.
#[derive(Debug)]
pub struct ChangeWatch {
    /// The inotify descriptor, when the watch could be made.
    fd: Option<std::os::fd::OwnedFd>,
    /// The database's file name; events on names that start with it count.
    name: OsString,
    /// How often `data_version` is asked when there is no watch.
    fallback: Duration,
}

impl ChangeWatch {
    /// Watches the directory of `db`. Never fails: without inotify the watch asks
    /// `data_version` every `fallback`.
    pub fn new(db: &Path, fallback: Duration) -> ChangeWatch {
        let name = db.file_name().map(OsString::from).unwrap_or_default();
        let dir = match db.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => std::path::PathBuf::from("."),
        };
        ChangeWatch {
            fd: inotify_on(&dir),
            name,
            fallback,
        }
    }

    /// True when the watch uses inotify (false: it asks every `fallback`).
    pub fn is_event_driven(&self) -> bool {
        self.fd.is_some()
    }

    /// Sleeps until a file of the database may have changed or `timeout` passed.
    fn sleep(&self, timeout: Duration) {
        let Some(fd) = &self.fd else {
            std::thread::sleep(timeout.min(self.fallback));
            return;
        };
        use std::os::fd::AsRawFd;
        let mut pfd = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: one pollfd on a descriptor this struct owns.
        let n = unsafe { libc::poll(&mut pfd, 1, ms) };
        if n > 0 {
            self.drain(fd.as_raw_fd());
        }
    }

    /// Reads the queued events (all of them: the caller asks `data_version` next, whatever
    /// they name; names are looked at only so a busy directory's other files do not count
    /// as changes forever).
    fn drain(&self, fd: i32) -> bool {
        let mut buf = [0u8; 4096];
        let mut ours = false;
        loop {
            // SAFETY: reading into a local buffer of its size from a non-blocking descriptor.
            let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
            if n <= 0 {
                return ours;
            }
            let mut off = 0usize;
            let n = n as usize;
            let head = std::mem::size_of::<libc::inotify_event>();
            while off + head <= n {
                // SAFETY: the kernel writes whole events; the header is read unaligned.
                let ev: libc::inotify_event =
                    unsafe { std::ptr::read_unaligned(buf[off..].as_ptr().cast()) };
                let len = ev.len as usize;
                let name = &buf[(off + head).min(n)..(off + head + len).min(n)];
                let name = name.split(|&b| b == 0).next().unwrap_or(&[]);
                if name.starts_with(self.name.as_bytes()) {
                    ours = true;
                }
                off += head + len;
            }
        }
    }
}

fn inotify_on(dir: &Path) -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: inotify_init1 has no memory effects; the descriptor is owned below.
    let fd = unsafe { libc::inotify_init1(libc::IN_CLOEXEC | libc::IN_NONBLOCK) };
    if fd < 0 {
        return None;
    }
    // SAFETY: fd was just returned by the kernel and nothing else owns it.
    let owned = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    let mask = libc::IN_MODIFY | libc::IN_CREATE | libc::IN_MOVED_TO | libc::IN_CLOSE_WRITE;
    // SAFETY: a NUL-terminated path and a descriptor this function owns.
    let wd = unsafe { libc::inotify_add_watch(fd, c.as_ptr(), mask) };
    (wd >= 0).then_some(owned)
}

impl Store {
    /// Waits until another connection has committed since `data_version` read `last`, or
    /// `timeout` passed; returns the version now (equal to `last` on a timeout).
    pub fn wait_for_commit(
        &self,
        watch: &ChangeWatch,
        last: i64,
        timeout: Duration,
    ) -> Result<i64, StoreError> {
        let end = Instant::now() + timeout;
        loop {
            let now = self.data_version()?;
            if now != last {
                return Ok(now);
            }
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(now);
            }
            watch.sleep(left);
        }
    }
}

/// The longest presentation kept in a [`ArrivedApproval`] (bytes); a longer one is cut and its
/// length given.
pub const PRESENTATION_MAX: usize = 64 * 1024;

/// The most bytes of a tool's name a watched approval carries; [`ArrivedApproval::tool_len`]
/// says how long it was.
pub const TOOL_MAX: usize = 256;

/// An approval row as `watch` announces it: the fields a person or a paging tool needs to
/// find it, never its request (which may be huge).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArrivedApproval {
    /// SQLite's rowid: approvals are announced in its order.
    pub rowid: i64,
    /// The approval's id (stored bytes).
    pub id: Vec<u8>,
    /// Its run's id (stored bytes).
    pub run_id: Vec<u8>,
    /// Its step's id (stored bytes).
    pub step_id: Vec<u8>,
    /// The approval kind (the side effect).
    pub kind: Vec<u8>,
    /// The status when read (`pending` for every approval [`Store::approvals_after`] returns).
    pub status: Vec<u8>,
    /// When it was requested, as stored.
    pub created_at: Vec<u8>,
    /// When it expires, as stored (empty: never).
    pub expires_at: Vec<u8>,
    /// The call's tool, from its step's decision (`None` when that is not readable JSON; a
    /// repeated `tool` member read as Go reads it, the last), its first [`TOOL_MAX`] bytes.
    pub tool: Option<Vec<u8>>,
    /// The tool name's whole length in bytes (more than `tool` holds when it was cut).
    pub tool_len: u64,
    /// The presentation's first [`PRESENTATION_MAX`] bytes.
    pub presentation: Vec<u8>,
    /// The presentation's whole length in bytes.
    pub presentation_len: u64,
}

impl Store {
    /// The largest approval rowid now (0 when there is none): where a watch that announces
    /// only new approvals starts.
    pub fn last_approval_rowid(&self) -> Result<i64, StoreError> {
        use super::error::Ctx;
        self.read(|c| {
            c.query_row("SELECT COALESCE(MAX(rowid), 0) FROM approvals", [], |r| {
                r.get(0)
            })
            .ctx("watch: last approval")
        })
    }

    /// Up to `limit` approvals with a rowid above `after`, in rowid order, and the largest
    /// rowid looked at (so a caller moves past decided ones too). Only pending ones are
    /// returned.
    pub fn approvals_after(
        &self,
        after: i64,
        limit: u32,
    ) -> Result<(Vec<ArrivedApproval>, i64), StoreError> {
        use super::column::{bytes as b, opt_bytes};
        use super::error::Ctx;
        self.read(|c| {
            let tool = super::column::last_member("s.decision_json", "tool");
            let mut stmt = c
                .prepare_cached(&format!(
                    "SELECT a.rowid, a.id, a.run_id, a.step_id, a.kind,
                            CASE WHEN r.status = 'WAITING_FOR_APPROVAL' THEN a.status END,
                            a.created_at,
                            a.expires_at,
                            CASE WHEN json_valid(s.decision_json)
                                 THEN substr(CAST({tool} AS BLOB), 1, {TOOL_MAX}) END,
                            CASE WHEN json_valid(s.decision_json)
                                 THEN length(CAST({tool} AS BLOB)) END,
                            substr(CAST(a.presentation_json AS BLOB), 1, ?3),
                            length(CAST(a.presentation_json AS BLOB))
                     FROM approvals a LEFT JOIN steps s ON s.id = a.step_id
                     LEFT JOIN runs r ON r.id = a.run_id
                     WHERE a.rowid > ?1 ORDER BY a.rowid LIMIT ?2"
                ))
                .ctx("watch: approvals")?;
            let mut rows = stmt
                .query(rusqlite::params![after, limit, PRESENTATION_MAX as i64])
                .ctx("watch: approvals")?;
            let mut out = Vec::new();
            let mut last = after;
            while let Some(r) = rows.next().ctx("watch: approvals")? {
                let g = |i: usize| r.get_ref(i).map(b).ctx("watch: approvals");
                let rowid: i64 = r.get(0).ctx("watch: approvals")?;
                last = last.max(rowid);
                let status = g(5)?;
                if status != b"pending" {
                    continue;
                }
                let tool = opt_bytes(r.get_ref(8).ctx("watch: approvals")?);
                let tool_len: Option<i64> = r.get(9).ctx("watch: approvals")?;
                let len: Option<i64> = r.get(11).ctx("watch: approvals")?;
                out.push(ArrivedApproval {
                    rowid,
                    id: g(1)?,
                    run_id: g(2)?,
                    step_id: g(3)?,
                    kind: g(4)?,
                    status,
                    created_at: g(6)?,
                    expires_at: g(7)?,
                    tool,
                    tool_len: tool_len.unwrap_or(0).max(0) as u64,
                    presentation: g(10)?,
                    presentation_len: len.unwrap_or(0).max(0) as u64,
                });
            }
            Ok((out, last))
        })
    }
}

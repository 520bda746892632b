//! A thin VFS over SQLite's own `unix` VFS that checks, at the moment SQLite opens it, every
//! file it would read into the database: the `-journal` it replays, the super-journal a journal
//! names, and the `-wal` (issue 14 item 2).
//!
//! The path checks in `open.rs` run before SQLite opens anything, which leaves a window: a user
//! who can write the directory (a 1777 `/tmp`) can drop a crafted `-journal` after the check
//! and before SQLite's first read replays it. Here the check moves into SQLite's own open:
//!
//! 1. before SQLite opens the file, it is opened here (`O_NOFOLLOW`, `O_NONBLOCK`) and the
//!    descriptor's `fstat` must show a regular file of the database's owner that group and
//!    others cannot write;
//! 2. after SQLite opened it, the path (`lstat`) must still be such a file, and the same inode
//!    when step 1 found one.
//!
//! In a directory whose sticky bit is set, or that only the owner can write, nobody else can
//! rename or delete the owner's files, so a file that passes both steps is the one SQLite
//! holds: one created by another user in between is theirs (refused), one they remove in
//! between leaves nothing at the path (refused). Every other call goes to the `unix` VFS
//! unchanged, with the same file object size.
//!
//! The `-shm` is not opened through `xOpen`: SQLite's WAL code opens it with the `unix` VFS's
//! own `open` system call. That call is replaced here (`xSetSystemCall`, the hook SQLite keeps
//! for it) by one that, for a `-shm` beside an existing database, checks the descriptor it
//! returns with `fstat`: the very file SQLite will map, so nothing can be swapped in between.
//! It must be a regular file (SQLite asks `O_NOFOLLOW`) of the database's owner, or of this
//! process's user (one it has just created, before SQLite as root hands it to the owner), that
//! group and others cannot write.
//!
//! A refusal makes SQLite's open fail with SQLITE_CANTOPEN; the reason is kept for the thread
//! (SQLite calls the VFS on the caller's thread) and [`take_refusal`] turns it into
//! `StoreError::ForeignJournal` (a journal or `-wal`) or `StoreError::InsecureMode` (a `-shm`,
//! as the path check before the open names one).

use std::cell::RefCell;
use std::ffi::{CStr, OsStr, c_char, c_int};
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::ptr;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicPtr, Ordering};

use rusqlite::ffi;

/// The name connections are opened with.
pub(crate) const NAME: &CStr = c"countersign-unix";

/// `SQLITE_OPEN_SUPER_JOURNAL` (0x4000; `MASTER_JOURNAL` in older headers).
const OPEN_SUPER_JOURNAL: c_int = 0x0000_4000;

/// The files checked at open.
const CHECKED: c_int = ffi::SQLITE_OPEN_MAIN_JOURNAL | OPEN_SUPER_JOURNAL | ffi::SQLITE_OPEN_WAL;

/// SQLite's `unix` VFS, found at registration.
static UNIX: AtomicPtr<ffi::sqlite3_vfs> = AtomicPtr::new(ptr::null_mut());

/// The registration's outcome (SQLite's result code on failure).
static REGISTERED: OnceLock<Result<(), c_int>> = OnceLock::new();

/// What a refused open found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal {
    /// The file SQLite tried to open.
    pub path: PathBuf,
    /// The database it belongs to (the path without its suffix).
    pub db: PathBuf,
    /// Its mode (0 when it vanished).
    pub mode: u32,
    /// Why, as a clause after "is <mode>, ".
    pub reason: &'static str,
    /// The file is a `-shm` (whose bytes SQLite maps, not replays).
    pub shm: bool,
}

thread_local! {
    static REFUSED: RefCell<Option<Refusal>> = const { RefCell::new(None) };
}

/// The refusal this thread's last SQLite call ran into, if any (and forgets it).
pub(crate) fn take_refusal() -> Option<Refusal> {
    REFUSED.with(|r| r.borrow_mut().take())
}

/// True when this thread's last SQLite call ran into a refusal.
pub(crate) fn has_refusal() -> bool {
    REFUSED.with(|r| r.borrow().is_some())
}

/// Forgets a refusal left from an earlier call on this thread.
pub(crate) fn clear_refusal() {
    REFUSED.with(|r| *r.borrow_mut() = None);
}

/// Registers the VFS once (not as the default) and returns its name.
pub(crate) fn name() -> Result<&'static CStr, c_int> {
    let done = REGISTERED.get_or_init(|| {
        // SAFETY: sqlite3_vfs_find(NULL) returns the default VFS (`unix` on this platform)
        // or NULL; the copy below is leaked, so it outlives every connection, as SQLite
        // requires of a registered VFS.
        unsafe {
            let unix = ffi::sqlite3_vfs_find(c"unix".as_ptr());
            if unix.is_null() {
                return Err(ffi::SQLITE_ERROR);
            }
            UNIX.store(unix, Ordering::Release);
            let mut ours: ffi::sqlite3_vfs = ptr::read(unix);
            ours.zName = NAME.as_ptr();
            ours.pNext = ptr::null_mut();
            ours.xOpen = Some(x_open);
            check_shm_opens(unix)?;
            let ours = Box::leak(Box::new(ours));
            match ffi::sqlite3_vfs_register(ours, 0) {
                ffi::SQLITE_OK => Ok(()),
                rc => Err(rc),
            }
        }
    });
    done.map(|()| NAME)
}

unsafe extern "C" fn x_open(
    _vfs: *mut ffi::sqlite3_vfs,
    z_name: *const c_char,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    let unix = UNIX.load(Ordering::Acquire);
    // SAFETY: registration stored the `unix` VFS before registering this one.
    let Some(open) = (unsafe { (*unix).xOpen }) else {
        return ffi::SQLITE_CANTOPEN;
    };
    if flags & CHECKED == 0 || z_name.is_null() {
        // SAFETY: SQLite's arguments, passed on unchanged.
        return unsafe { open(unix, z_name, file, flags, out_flags) };
    }
    // SAFETY: a non-NULL name from SQLite is a NUL-terminated string.
    let path = PathBuf::from(OsStr::from_bytes(
        unsafe { CStr::from_ptr(z_name) }.to_bytes(),
    ));
    let expect = Expect::of(&path, flags);
    let before = match std::panic::catch_unwind(|| before_open(&path, &expect)) {
        Ok(Ok(found)) => found,
        Ok(Err(refusal)) => return refuse(refusal),
        Err(_) => return ffi::SQLITE_CANTOPEN,
    };
    // SAFETY: as above.
    let rc = unsafe { open(unix, z_name, file, flags, out_flags) };
    if rc != ffi::SQLITE_OK {
        return rc;
    }
    let after = std::panic::catch_unwind(|| after_open(&path, &expect, before))
        .unwrap_or(Err(expect.refusal(&path, 0, "which could not be checked")));
    match after {
        Ok(()) => ffi::SQLITE_OK,
        Err(refusal) => {
            // SAFETY: the `unix` VFS opened `file` and set its methods; closing it and
            // clearing them is what a failed xOpen must leave (SQLite then does not close it).
            unsafe {
                let methods = (*file).pMethods;
                if !methods.is_null() {
                    if let Some(close) = (*methods).xClose {
                        close(file);
                    }
                    (*file).pMethods = ptr::null();
                }
            }
            refuse(refusal)
        }
    }
}

fn refuse(refusal: Refusal) -> c_int {
    REFUSED.with(|r| *r.borrow_mut() = Some(refusal));
    ffi::SQLITE_CANTOPEN
}

/// Whose file it must be, and the database it belongs to.
struct Expect {
    db: PathBuf,
    uid: u32,
}

impl Expect {
    /// A `-journal` or `-wal` belongs to the database whose name it extends, and must be its
    /// owner's; a super-journal (named inside a journal, anywhere) must be this process's
    /// user's, as the journal that names it is its owner's by then.
    fn of(path: &Path, flags: c_int) -> Expect {
        // SAFETY: geteuid has no preconditions and cannot fail.
        let me = unsafe { libc::geteuid() };
        let bytes = path.as_os_str().as_bytes();
        let stem = [b"-journal".as_slice(), b"-wal"]
            .iter()
            .find_map(|s| bytes.strip_suffix(*s))
            .filter(|_| flags & OPEN_SUPER_JOURNAL == 0);
        match stem {
            Some(stem) => {
                let db = PathBuf::from(OsStr::from_bytes(stem));
                let uid = fs::metadata(&db).map(|m| m.uid()).unwrap_or(me);
                Expect { db, uid }
            }
            None => Expect {
                db: path.to_path_buf(),
                uid: me,
            },
        }
    }

    fn refusal(&self, path: &Path, mode: u32, reason: &'static str) -> Refusal {
        Refusal {
            path: path.to_path_buf(),
            db: self.db.clone(),
            mode,
            reason,
            shm: false,
        }
    }

    /// None when `meta` is a file SQLite may read into the database.
    fn fault(&self, meta: &fs::Metadata) -> Option<&'static str> {
        if !meta.file_type().is_file() {
            Some("which is not a regular file")
        } else if meta.uid() != self.uid {
            Some("owned by another user than the database")
        } else if meta.mode() & 0o022 != 0 {
            Some("writable by group or others")
        } else {
            None
        }
    }
}

/// Step 1: the file as it is now, by descriptor (`None` when there is none yet).
fn before_open(path: &Path, expect: &Expect) -> Result<Option<(u64, u64)>, Refusal> {
    let opened = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path);
    let f = match opened {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            let mode = fs::symlink_metadata(path).map(|m| m.mode()).unwrap_or(0);
            return Err(expect.refusal(path, mode, "which is not a regular file"));
        }
        // Absent (SQLite will create it), or not ours to read: the check after the open
        // decides.
        Err(_) => return Ok(None),
    };
    let meta = f
        .metadata()
        .map_err(|_| expect.refusal(path, 0, "which could not be checked"))?;
    match expect.fault(&meta) {
        Some(reason) => Err(expect.refusal(path, meta.mode(), reason)),
        None => Ok(Some((meta.dev(), meta.ino()))),
    }
}

/// Step 2: the path after SQLite opened it.
fn after_open(path: &Path, expect: &Expect, before: Option<(u64, u64)>) -> Result<(), Refusal> {
    let meta = fs::symlink_metadata(path)
        .map_err(|_| expect.refusal(path, 0, "which vanished while SQLite opened it"))?;
    if let Some(reason) = expect.fault(&meta) {
        return Err(expect.refusal(path, meta.mode(), reason));
    }
    if before.is_some_and(|b| b != (meta.dev(), meta.ino())) {
        return Err(expect.refusal(
            path,
            meta.mode(),
            "which was replaced while SQLite opened it",
        ));
    }
    Ok(())
}

/// The signature of SQLite's `open` system call (`osOpen`: path, flags, mode).
type OpenFn = unsafe extern "C" fn(*const c_char, c_int, c_int) -> c_int;

/// The `open` the `unix` VFS used before [`check_shm_opens`] replaced it.
static REAL_OPEN: AtomicPtr<()> = AtomicPtr::new(ptr::null_mut());

/// Replaces the `unix` VFS's `open` system call with [`open_checking_shm`] (once: this runs in
/// the registration).
///
/// # Safety
/// `unix` is SQLite's registered `unix` VFS.
unsafe fn check_shm_opens(unix: *mut ffi::sqlite3_vfs) -> Result<(), c_int> {
    // SAFETY: the `unix` VFS implements both calls (since SQLite 3.7.6); "open" is the name
    // of its first system call, and the replacement has the signature SQLite calls it with.
    unsafe {
        let (Some(get), Some(set)) = ((*unix).xGetSystemCall, (*unix).xSetSystemCall) else {
            return Err(ffi::SQLITE_ERROR);
        };
        let Some(real) = get(unix, c"open".as_ptr()) else {
            return Err(ffi::SQLITE_ERROR);
        };
        REAL_OPEN.store(real as *mut (), Ordering::Release);
        let ours: OpenFn = open_checking_shm;
        let ours = std::mem::transmute::<OpenFn, unsafe extern "C" fn()>(ours);
        match set(unix, c"open".as_ptr(), Some(ours)) {
            ffi::SQLITE_OK => Ok(()),
            rc => Err(rc),
        }
    }
}

unsafe extern "C" fn open_checking_shm(path: *const c_char, flags: c_int, mode: c_int) -> c_int {
    let real = REAL_OPEN.load(Ordering::Acquire);
    // SAFETY: set before this function was installed, from SQLite's own `open`.
    let real = unsafe { std::mem::transmute::<*mut (), OpenFn>(real) };
    // SAFETY: SQLite's arguments, passed on unchanged.
    let fd = unsafe { real(path, flags, mode) };
    if fd < 0 || path.is_null() {
        return fd;
    }
    // SAFETY: SQLite passes a NUL-terminated path.
    let bytes = unsafe { CStr::from_ptr(path) }.to_bytes();
    let Some(stem) = bytes.strip_suffix(b"-shm") else {
        return fd;
    };
    let checked = std::panic::catch_unwind(|| shm_fault(Path::new(OsStr::from_bytes(stem)), fd))
        .unwrap_or(Some((0, "which could not be checked")));
    let Some((mode, reason)) = checked else {
        return fd;
    };
    // SAFETY: `fd` was opened above and is not handed to SQLite.
    unsafe { libc::close(fd) };
    REFUSED.with(|r| {
        *r.borrow_mut() = Some(Refusal {
            path: PathBuf::from(OsStr::from_bytes(bytes)),
            db: PathBuf::from(OsStr::from_bytes(stem)),
            mode,
            reason,
            shm: true,
        })
    });
    // SAFETY: errno is this thread's; SQLite reads it for its log line.
    unsafe { *libc::__errno_location() = libc::EACCES };
    -1
}

/// What is wrong with the `-shm` open at `fd` for the database `db` (mode, reason), or `None`.
/// A `-shm` beside no database file is not one of the store's, and is left alone.
fn shm_fault(db: &Path, fd: c_int) -> Option<(u32, &'static str)> {
    let owner = fs::metadata(db).ok().filter(|m| m.is_file())?.uid();
    // SAFETY: an all-zero `stat` is a valid value to be overwritten; `fd` is open.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return Some((0, "which could not be checked"));
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    let mode = st.st_mode;
    if mode & libc::S_IFMT != libc::S_IFREG {
        Some((mode, "which is not a regular file"))
    } else if st.st_uid != owner && st.st_uid != me {
        Some((mode, "owned by another user than the database"))
    } else if mode & 0o022 != 0 {
        Some((mode, "writable by group or others"))
    } else {
        None
    }
}

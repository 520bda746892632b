//! SIGINT and SIGTERM end serving as a closed stdin does (agentrt mcp 2.14): no new call is
//! accepted, holds end at once, calls in flight finish and are recorded, then the upstream
//! servers are closed and the process exits 0. The signals are blocked on every thread and
//! taken by one thread with `sigwait`; servers start with a clean mask (`client.rs`).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::Proxy;

/// The set of SIGINT and SIGTERM, blocked on the calling thread (and every thread it starts
/// after this).
pub fn block() -> libc::sigset_t {
    // SAFETY: plain libc calls on a local set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

/// Starts the thread that waits for a signal, then stops the proxy and exits 0.
pub fn watch(set: libc::sigset_t, proxy: Arc<Proxy>) {
    std::thread::spawn(move || {
        let mut sig = 0;
        // SAFETY: `set` is a valid, initialised set.
        let rc = unsafe { libc::sigwait(&set, &mut sig) };
        if rc != 0 {
            return;
        }
        proxy.say(&format!(
            "stopping on signal {sig}: calls in flight finish first"
        ));
        proxy.shutting.store(true, Ordering::SeqCst);
        while proxy.inflight.load(Ordering::SeqCst) > 0 {
            std::thread::sleep(Duration::from_millis(20));
        }
        proxy.close();
        std::process::exit(0);
    });
}

//! The worker (issue 15 item 6): resumes, as soon as they are decided, the runs this driver's
//! tools serve. It notices a decision by SQLite's `PRAGMA data_version` on its own connection
//! (which moves only when another connection commits), so an idle worker reads no table: it
//! scans for resumable runs once at the start and again only after the version moved. Each
//! resume is an ordinary [`Driver::resume`], whose lease and compare-and-set transactions make
//! several workers (and consoles) on one database execute each approved request exactly once:
//! the loser of a race gets agentrt's `ErrRunState`/`ErrRunLeased` and moves on.
//! It also takes over a RUNNING run whose lease has run out (the process holding it died),
//! as `resume` does, waking when the soonest lease it saw runs out: a death commits nothing.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::{Driver, RuntimeError, blocking};
use crate::runtime::types::{Key, Run, Timestamp};

/// At most this many runs are read per scan (the rest come with the next one).
pub const SCAN_LIMIT: u32 = 1000;

/// The first wait before a failed resume is tried again; it doubles up to [`RETRY_MOST`].
pub const RETRY_FIRST: Duration = Duration::from_secs(1);

/// The longest wait between two tries of a failed resume.
pub const RETRY_MOST: Duration = Duration::from_secs(30);

/// How long after a lease runs out the worker looks again (a lease is expired only once its
/// time has passed).
pub const LEASE_MARGIN: Duration = Duration::from_millis(50);

/// What the worker did, as it happens.
#[derive(Debug, Clone)]
pub enum WorkEvent {
    /// A scan for resumable runs found `candidates` (served or not).
    Scanned {
        /// How many resumable runs the scan read (at most [`SCAN_LIMIT`]).
        candidates: usize,
    },
    /// A run was resumed to its next pause or end.
    Resumed(Box<Run>),
    /// Another worker or console resumed it first, or holds its lease.
    Taken {
        /// The run.
        run_id: String,
        /// The refusal (`ErrRunState` or `ErrRunLeased` text).
        why: String,
    },
    /// The resume failed; the run is tried again after 1 s, doubling to 30 s
    /// (or at the next change, if sooner) until a try ends it one way or the
    /// other.
    Failed {
        /// The run.
        run_id: String,
        /// The resume's error.
        error: String,
    },
}

/// Receives the worker's events.
pub type WorkObserver = Arc<dyn Fn(&WorkEvent) + Send + Sync>;

/// How the worker runs.
#[derive(Clone)]
pub struct WorkOptions {
    /// The pause between two `data_version` checks (zero: 100 ms).
    pub check_every: Duration,
    /// Set to stop the worker at its next check (a resume in progress finishes first).
    pub stop: Arc<AtomicBool>,
    /// Return after this many checks in a row saw no change (`Some(0)`: after the first scan
    /// and its resumes). `None`: until `stop`.
    pub idle_checks: Option<u64>,
    /// Receives every [`WorkEvent`].
    pub observer: Option<WorkObserver>,
}

impl Default for WorkOptions {
    fn default() -> WorkOptions {
        WorkOptions {
            check_every: Duration::from_millis(100),
            stop: Arc::new(AtomicBool::new(false)),
            idle_checks: None,
            observer: None,
        }
    }
}

/// What a worker did before it returned.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkReport {
    /// Scans of the tables for resumable runs.
    pub scans: u64,
    /// `data_version` checks.
    pub checks: u64,
    /// Runs this worker resumed.
    pub resumed: u64,
    /// Resumes that failed (each try counts; a run tried again and resumed counts here and
    /// in `resumed`).
    pub failed: u64,
}

impl Driver {
    /// Whether this driver's tools serve the run: every tool its `run.created` event names
    /// (by spec hash) is registered here with that same spec. A run without that list (an
    /// agentrt before v0.5) is not served: its own program resumes it.
    pub fn serves(&self, run_id: impl AsRef<[u8]>) -> Result<bool, RuntimeError> {
        let run_id = run_id.as_ref();
        let first = self.inner.store.first_event(run_id)?;
        let Some((_, payload)) = first.filter(|(kind, _)| kind == "run.created") else {
            return Ok(false);
        };
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&payload) else {
            return Ok(false);
        };
        let Some(hashes) = v.get("tools").and_then(|t| t.as_array()) else {
            return Ok(false);
        };
        let ours = self.inner.tools.spec_hashes();
        Ok(!hashes.is_empty()
            && hashes
                .iter()
                .all(|h| h.as_str().is_some_and(|h| ours.iter().any(|o| o == h))))
    }

    /// Resumes the runs this driver serves as soon as they are decided (a granted approval, or
    /// a denial with feedback), until `opts.stop` is set or `opts.idle_checks` checks in a row
    /// saw no change. A failed resume is reported and tried again, after 1 s, doubling to
    /// 30 s, or at the next change if sooner, until a try ends it one way or the other; it
    /// never ends the worker. The run is tried again by its id, also when the failure left it
    /// RUNNING under this worker's lease (the database failed while its call was in flight),
    /// which no scan for decided runs would find: the resume then reconciles the call in
    /// flight as agentrt does (its outcome unknown, a person is asked). A RUNNING run whose
    /// lease has run out (its holder died or stopped renewing it) is taken over the same way,
    /// as `resume` takes it over; the worker wakes when the soonest lease runs out, since no
    /// commit says a holder died. Errors are the store's, reading the version or the
    /// candidates.
    pub async fn work(&self, opts: WorkOptions) -> Result<WorkReport, RuntimeError> {
        let mut report = WorkReport::default();
        let emit = |e: WorkEvent| {
            if let Some(o) = &opts.observer {
                o(&e);
            }
        };
        let check_every = if opts.check_every.is_zero() {
            Duration::from_millis(100)
        } else {
            opts.check_every
        };
        let mut served: HashMap<Key, bool> = HashMap::new();
        let mut last = self.data_version().await?;
        // Runs whose last resume failed, tried again by id; when, and the next wait.
        let mut failed: Vec<String> = Vec::new();
        let mut retry_at: Option<std::time::Instant>;
        // When the soonest lease still running runs out: nothing commits when its holder dies.
        let mut lease_wake: Option<std::time::Instant>;
        let mut backoff = RETRY_FIRST;
        loop {
            if opts.stop.load(Ordering::SeqCst) {
                return Ok(report);
            }
            let store = self.inner.store.clone();
            let found = blocking(move || store.resumable_runs(SCAN_LIMIT)).await??;
            report.scans += 1;
            emit(WorkEvent::Scanned {
                candidates: found.len(),
            });
            // Then the RUNNING runs whose lease ran out, and the failed ones neither lists
            // (left RUNNING under this worker's lease).
            let (expired, wake) = self.expired_leases().await?;
            lease_wake = wake;
            let mut listed: Vec<Key> = found.iter().map(|c| c.id.clone()).collect();
            for id in expired {
                if !listed.contains(&id) {
                    listed.push(id);
                }
            }
            let again = std::mem::take(&mut failed)
                .into_iter()
                .map(|id| Key::new(id.as_bytes()))
                .filter(|k| !listed.contains(k));
            for c_id in listed.clone().into_iter().chain(again) {
                if opts.stop.load(Ordering::SeqCst) {
                    return Ok(report);
                }
                let serves = match served.get(&c_id) {
                    Some(s) => *s,
                    None => {
                        let (d, id) = (self.clone(), c_id.clone());
                        let s = blocking(move || d.serves(id.as_bytes())).await??;
                        served.insert(c_id.clone(), s);
                        s
                    }
                };
                // The driver names runs by text; a run whose id is not UTF-8 is not served.
                let Some(id) = serves
                    .then(|| std::str::from_utf8(c_id.as_bytes()).ok())
                    .flatten()
                else {
                    continue;
                };
                match self.resume(id).await {
                    Ok(run) => {
                        report.resumed += 1;
                        emit(WorkEvent::Resumed(Box::new(run)));
                    }
                    Err(e) if e.is_run_state() || e.is_run_leased() => emit(WorkEvent::Taken {
                        run_id: id.to_string(),
                        why: e.to_string(),
                    }),
                    Err(e) => {
                        report.failed += 1;
                        failed.push(id.to_string());
                        emit(WorkEvent::Failed {
                            run_id: id.to_string(),
                            error: e.to_string(),
                        })
                    }
                }
            }
            if failed.is_empty() {
                (retry_at, backoff) = (None, RETRY_FIRST);
            } else {
                retry_at = Some(std::time::Instant::now() + backoff);
                backoff = (backoff * 2).min(RETRY_MOST);
            }
            // Wait for another connection's commit.
            let mut idle = 0u64;
            loop {
                if opts.idle_checks.is_some_and(|n| idle >= n) || opts.stop.load(Ordering::SeqCst) {
                    return Ok(report);
                }
                tokio::time::sleep(check_every).await;
                report.checks += 1;
                let now = self.data_version().await?;
                if now != last {
                    last = now;
                    break;
                }
                let due = |t: Option<std::time::Instant>| {
                    t.is_some_and(|t| std::time::Instant::now() >= t)
                };
                if due(retry_at) || due(lease_wake) {
                    break;
                }
                idle += 1;
            }
        }
    }

    /// The RUNNING runs whose lease has run out by the time leases are judged by (this
    /// process's lease clock on SQLite, the server's on PostgreSQL), and when the soonest one
    /// still running runs out (plus [`LEASE_MARGIN`]). An expiry that does not parse is
    /// neither: `resume` is the way to such a run.
    async fn expired_leases(&self) -> Result<(Vec<Key>, Option<std::time::Instant>), RuntimeError> {
        let store = self.inner.store.clone();
        let local = self.inner.lease_now();
        let (leased, now) = blocking(move || {
            Ok::<_, crate::runtime::store::StoreError>((
                store.leased_runs(SCAN_LIMIT)?,
                store.lease_now(local)?,
            ))
        })
        .await??;
        let mut expired = Vec::new();
        let mut soonest: Option<i64> = None;
        for l in leased {
            let Ok(at) = Timestamp::parse(&l.lease_expires_at) else {
                continue;
            };
            match at.sub(&now) {
                left if left < 0 => expired.push(l.id),
                left => soonest = Some(soonest.map_or(left, |s| s.min(left))),
            }
        }
        let wake = soonest.map(|ns| {
            std::time::Instant::now() + Duration::from_nanos(ns.unsigned_abs()) + LEASE_MARGIN
        });
        Ok((expired, wake))
    }

    async fn data_version(&self) -> Result<i64, RuntimeError> {
        let store = self.inner.store.clone();
        Ok(blocking(move || store.data_version()).await??)
    }
}

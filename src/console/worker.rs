//! Database work off the UI thread: one thread owns the read-only connection (and the decider),
//! answers queries as messages tagged with their request id, and polls `PRAGMA data_version`
//! about once a second to tell the UI when another connection committed. A second one, the
//! counting lane, has its own connection and answers only the counts (scans on a large
//! database: agentrt's schema indexes no status), so paging never waits behind a count.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::time::{Duration, Instant};

use super::data::*;
use super::log::Log;
use super::msg::{Input, Job};
use super::terminal;

/// Answers one query (also used synchronously by tests and the bench).
pub fn handle(data: &mut dyn ConsoleData, q: &Query) -> Reply {
    match data.query(q) {
        Ok(r) => r,
        Err(e) => Reply::Failed(e),
    }
}

/// Answers one query as the worker does: the recheck through the binary's hook (which may
/// take a while and writes nothing), everything else through the reader; a run header is
/// marked resumable when the hook can resume it.
pub fn answer(
    data: &mut dyn ConsoleData,
    hook: Option<&dyn ResumeHook>,
    db: &std::path::Path,
    q: &Query,
) -> Reply {
    match q {
        Query::Recheck { run, step } => return Reply::Recheck(recheck(hook, db, run, step)),
        Query::Marked { ids } => return marked(data, ids),
        Query::MarkedRuns { ids } => return marked_runs(data, ids),
        Query::QueueAll { filter, max } => return queue_all(data, filter, *max),
        _ => {}
    }
    let mut r = handle(data, q);
    mark_resumable(&mut r, hook);
    r
}

/// The marked approvals read again, one by one, as the approval detail reads each (a request
/// too large to show is named by its size, never read); the first failed read fails the
/// whole answer.
fn marked(data: &mut dyn ConsoleData, ids: &[Key]) -> Reply {
    let read = read_each(
        data,
        ids,
        |id| Query::Approval { id },
        |r| match r {
            Reply::Approval(a) => Some(a),
            _ => None,
        },
    );
    read.map_or_else(Reply::Failed, Reply::Marked)
}

/// The marked runs read again, one header at a time.
fn marked_runs(data: &mut dyn ConsoleData, ids: &[Key]) -> Reply {
    let read = read_each(
        data,
        ids,
        |id| Query::Run { id },
        |r| match r {
            Reply::Run(h) => Some(h),
            _ => None,
        },
    );
    read.map_or_else(Reply::Failed, Reply::MarkedRuns)
}

/// Each of `ids` read by its own query (`ask`) and its reply's row taken out (`take`), in
/// order; the first failed read fails them all.
fn read_each<T>(
    data: &mut dyn ConsoleData,
    ids: &[Key],
    ask: impl Fn(Key) -> Query,
    take: impl Fn(Reply) -> Option<T>,
) -> Result<Vec<(Key, T)>, DataError> {
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        let row = match handle(data, &ask(id.clone())) {
            Reply::Failed(e) => return Err(e),
            r => take(r).ok_or_else(|| DataError::Read("unexpected reply to a read".into()))?,
        };
        out.push((id.clone(), row));
    }
    Ok(out)
}

/// Rows one read of "every row in the filter" takes.
const ALL_WINDOW: u64 = 500;

/// Every queue row `filter` matches (as the `/` filter matches: the shown text), up to `max`,
/// read a window at a time from the last row read.
fn queue_all(data: &mut dyn ConsoleData, filter: &str, max: u64) -> Reply {
    let mut rows: Vec<QueueRow> = Vec::new();
    loop {
        let offset = rows.len() as u64;
        let anchor = rows.last().and_then(|r| {
            r.approval_id
                .as_str()
                .map(|id| (offset - 1, id.to_string()))
        });
        let list = Query::Queue {
            filter: String::new(),
            sort: crate::console::sort::Sort::Age,
            offset,
            limit: ALL_WINDOW,
            anchor,
            end: None,
        };
        // The rows the `/` filter shows: matched on the shown text by the scan, as the list
        // on screen is (`console::scan`), never by an SQL match over stored bytes.
        let q = if filter.is_empty() {
            list
        } else {
            Query::Filtered {
                filter: filter.to_string(),
                list: Box::new(list),
            }
        };
        let page = match handle(data, &q) {
            Reply::Queue(p) => p,
            Reply::Failed(e) => return Reply::Failed(e),
            _ => return Reply::Failed(DataError::Read("unexpected reply to a read".into())),
        };
        let more = page.total > offset + page.rows.len() as u64;
        let n = page.rows.len();
        rows.extend(page.rows);
        if rows.len() as u64 > max {
            rows.truncate(max as usize);
            return Reply::QueueAll(rows, true);
        }
        if !more || n == 0 {
            return Reply::QueueAll(rows, false);
        }
    }
}

/// Today's answer of the policy about the call of `step`, through the hook.
fn recheck(hook: Option<&dyn ResumeHook>, db: &std::path::Path, run: &Key, step: &Key) -> Recheck {
    let Some(hook) = hook else {
        return Recheck::Unavailable("this console was given no policy to ask".into());
    };
    // The hook names runs by text: a run whose id is not UTF-8 is never offered to it.
    let Some(run) = run.as_str() else {
        return Recheck::Unavailable("the run's id is not UTF-8".into());
    };
    let report = match hook.recheck(db, run) {
        Ok(r) => r,
        Err(why) => return Recheck::Unavailable(why),
    };
    let step_id = step.as_str().unwrap_or_default();
    if let Some(c) = report.checked.iter().find(|c| c.step_id == step_id) {
        if c.differences.is_empty() {
            let d = &c.recorded;
            return Recheck::Same(if d.reason.is_empty() {
                d.outcome.to_string()
            } else {
                format!("{}: {}", d.outcome, d.reason)
            });
        }
        return Recheck::Differs(page_differences(c));
    }
    match report.skipped.first() {
        Some(s) => Recheck::Unavailable(s.why.clone()),
        None => Recheck::Unavailable("the call is no longer waiting on a person".into()),
    }
}

/// The differences the page shows: all of them while the policy still asks a person; when it
/// no longer does, its answer only (the recorded request's members are then all "absent",
/// which says nothing the answer does not).
fn page_differences(c: &crate::runtime::driver::Rechecked) -> Vec<String> {
    let asks = matches!(&c.now, Ok(d) if d.outcome == "require_approval");
    if asks {
        return c.differences.clone();
    }
    let member = |d: &String| {
        ["kind:", "capability", "presentation", "approval hash:"]
            .iter()
            .any(|p| d.starts_with(p))
    };
    let mut out: Vec<String> = c
        .differences
        .iter()
        .filter(|d| !member(d))
        .cloned()
        .collect();
    let dropped = c.differences.len() - out.len();
    if dropped > 0 {
        out.push(format!(
            "it no longer asks a person, so the {dropped} recorded fact(s) of the request are not asked for now"
        ));
    }
    out
}

/// Whether a query belongs on the counting lane (a count that may scan whole tables).
pub fn is_count(q: &Query) -> bool {
    matches!(
        q,
        Query::Counts | Query::QueueTotal { .. } | Query::Length(_) | Query::Stats { .. }
    )
}

/// Marks a run header resumable when the hook knows its tools and the run has not ended.
pub fn mark_resumable(r: &mut Reply, hook: Option<&dyn ResumeHook>) {
    let Some(hook) = hook else { return };
    // The hook names runs by text: a run whose id is not UTF-8 is never offered to it (its
    // lossy form could name another run).
    match r {
        Reply::Run(Some(h)) => {
            h.resumable =
                !h.status.is_terminal() && h.id.as_str().is_some_and(|id| hook.can_resume(id));
        }
        Reply::Approval(Some(a)) => {
            a.resumable = !a.run_status.is_terminal()
                && a.run_id.as_str().is_some_and(|id| hook.can_resume(id));
        }
        _ => {}
    }
}

pub struct Worker {
    pub data: Box<dyn ConsoleData>,
    pub decider: Option<Box<dyn Decider>>,
    pub resume: Option<Arc<dyn ResumeHook>>,
    pub db: PathBuf,
    /// How often to poll `data_version`; `None` for the counting lane, which does not poll.
    pub poll: Option<Duration>,
    pub log: Option<Log>,
}

impl Worker {
    /// Starts the thread; jobs go in through the returned sender, results come out on `out`.
    pub fn spawn(self, out: Sender<Input>) -> Sender<Job> {
        let (tx, rx) = channel();
        std::thread::Builder::new()
            .name("countersign-db".into())
            .spawn(move || {
                let _tell = TellIfPanicking(out.clone());
                self.run(rx, out)
            })
            .ok();
        tx
    }

    fn run(mut self, rx: Receiver<Job>, out: Sender<Input>) {
        let fault = terminal::test_fault();
        let mut version = self.data.data_version().ok();
        // Whether the last change check failed (said once, until one succeeds).
        let mut unreachable = false;
        // Without polling, wake only for jobs (an hour is "never" here).
        let every = self.poll.unwrap_or(Duration::from_secs(3600));
        let mut next_poll = Instant::now() + every;
        loop {
            let wait = next_poll.saturating_duration_since(Instant::now());
            match rx.recv_timeout(wait) {
                Ok(Job::Query(id, q)) => {
                    if fault.as_deref() == Some("worker") {
                        panic!("fault injected by COUNTERSIGN_TEST_PANIC=worker");
                    }
                    let r = answer(self.data.as_mut(), self.resume.as_deref(), &self.db, &q);
                    if out.send(Input::Reply(id, r)).is_err() {
                        return;
                    }
                }
                Ok(Job::Write(id, c)) => self.write(id, c, &out),
                Err(RecvTimeoutError::Timeout) if self.poll.is_none() => {
                    next_poll = Instant::now() + every;
                }
                Err(RecvTimeoutError::Timeout) => {
                    next_poll = Instant::now() + every;
                    match self.data.data_version() {
                        // After an outage everything is read again, whatever the version.
                        Ok(v) if Some(v) != version || unreachable => {
                            version = Some(v);
                            unreachable = false;
                            if out.send(Input::DataChanged).is_err() {
                                return;
                            }
                        }
                        Ok(_) => {}
                        Err(e) => {
                            if let Some(l) = &self.log {
                                l.write(&format!("data_version poll failed: {e}"));
                            }
                            if !std::mem::replace(&mut unreachable, true)
                                && out.send(Input::DataUnreachable(e.to_string())).is_err()
                            {
                                return;
                            }
                        }
                    }
                }
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
    }

    fn write(&mut self, id: u64, c: Write, out: &Sender<Input>) {
        if let Write::Resume { run } = &c {
            let Some(hook) = self.resume.clone() else {
                let _ = out.send(Input::Done(
                    id,
                    Err(DecideError::Unavailable(
                        "this build cannot resume runs".into(),
                    )),
                ));
                return;
            };
            let Some(run) = run.as_str() else {
                let _ = out.send(Input::Done(
                    id,
                    Err(DecideError::Unavailable(
                        "this run's id is not UTF-8; this build resumes only runs whose id is UTF-8"
                            .into(),
                    )),
                ));
                return;
            };
            if !hook.can_resume(run) {
                let _ = out.send(Input::Done(
                    id,
                    Err(DecideError::Unavailable(
                        "this build does not register the tools this run needs".into(),
                    )),
                ));
                return;
            }
            let (db, run, out) = (self.db.clone(), run.to_string(), out.clone());
            let _ = out.send(Input::Progress(id, "resuming in the background…".into()));
            std::thread::spawn(move || {
                let r = hook
                    .resume(&db, &run)
                    .map_err(|m| DecideError::Other(m.into()));
                let _ = out.send(Input::Done(id, r));
            });
            return;
        }
        let r = match &mut self.decider {
            Some(d) => d.run(&c),
            None => Err(DecideError::Unavailable(
                "this console has no writer (read-only)".into(),
            )),
        };
        if let Some(l) = &self.log {
            l.write(&format!(
                "command {id}: {}",
                if r.is_ok() { "ok" } else { "refused" }
            ));
        }
        let _ = out.send(Input::Done(id, r));
    }
}

/// Tells the UI thread that the database thread is gone when it unwinds from a panic, so the
/// console exits (restoring the terminal) instead of waiting for answers that never come.
struct TellIfPanicking(Sender<Input>);

impl Drop for TellIfPanicking {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let _ = self.0.send(Input::WorkerStopped);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader whose change checks follow a script (then repeat its last answer).
    struct Scripted(Vec<Result<i64, ()>>);

    impl ConsoleData for Scripted {
        fn data_version(&mut self) -> Result<i64, DataError> {
            let next = if self.0.len() > 1 {
                self.0.remove(0)
            } else {
                self.0[0]
            };
            next.map_err(|()| DataError::Read("connection closed".into()))
        }
        fn query(&mut self, _: &Query) -> Result<Reply, DataError> {
            Err(DataError::Read("not asked".into()))
        }
    }

    /// A database that stops answering is said once, however many checks fail, and when it
    /// answers again everything is read anew even though its version did not move (found
    /// from outside: a console kept its counts through an outage with nothing marking them).
    #[test]
    fn an_outage_is_said_once_and_its_end_reloads() {
        let script = vec![Ok(1), Ok(1), Err(()), Err(()), Err(()), Ok(1)];
        let w = Worker {
            data: Box::new(Scripted(script)),
            decider: None,
            resume: None,
            db: PathBuf::new(),
            poll: Some(Duration::from_millis(5)),
            log: None,
        };
        let (out, inputs) = channel();
        let _jobs = w.spawn(out);
        let mut seen = Vec::new();
        // Bounded by what arrives, never judged by the clock.
        while let Ok(i) = inputs.recv_timeout(Duration::from_secs(30)) {
            let done = matches!(i, Input::DataChanged);
            seen.push(match i {
                Input::DataUnreachable(_) => "unreachable",
                Input::DataChanged => "changed",
                _ => "other",
            });
            if done {
                break;
            }
        }
        assert_eq!(seen, ["unreachable", "changed"]);
        // And nothing more while it keeps answering the same version.
        assert!(inputs.recv_timeout(Duration::from_millis(200)).is_err());
    }
}

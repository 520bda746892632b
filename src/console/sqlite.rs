//! `ConsoleData` on the run database through the store: opened with the store's hardened
//! read-only open (`Store::open_existing(path, true)`: symlink and file-mode rules, trigger and
//! view refusal, schema version check), read with the store's bounded page reads and decoders
//! (`runtime::store` pages and views). This file only converts the store's rows into the
//! console's row types; the bytes of a column that was not valid UTF-8 are passed on as stored.
//! The conversion is written over [`ConsoleReads`], so PostgreSQL's reads (`console::pg`) fill
//! the same screens through it (decision 0084).

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::data::*;
use super::fate::{asked_again, fate_from, fate_of};
use super::reads::ConsoleReads;
use crate::runtime::store::{self, Near, Store, StoreError, raw_bytes};
use crate::runtime::types::{Approval, Run, Said, Step};

/// The console's reader over a run database's reads: SQLite's [`Store`] ([`SqliteData`]) or
/// PostgreSQL's (`console::pg`).
pub struct StoreData<S> {
    store: S,
}

/// The console's reader on a SQLite run database.
pub type SqliteData = StoreData<Store>;

impl<S: ConsoleReads> StoreData<S> {
    /// A reader over `store`.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub fn over(store: S) -> Self {
        StoreData { store }
    }

    /// The reads it answers from.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub(crate) fn reads(&self) -> &S {
        &self.store
    }
}

impl StoreData<Store> {
    /// Opens the database read-only with the store's hardened open (the console's reader never
    /// writes); refuses what the store refuses, with the store's message.
    /// Keeps a 32 MiB page cache so page reads of a large database stop re-reading the same
    /// pages.
    pub fn open(path: &Path) -> Result<Self, DataError> {
        Self::open_with_cache(path, 32 * 1024)
    }

    /// As [`SqliteData::open`], for the counting lane: its reads are scans, which a cache does
    /// not help, so it keeps SQLite's default 2 MiB and the process stays small.
    pub fn open_counting(path: &Path) -> Result<Self, DataError> {
        Self::open_with_cache(path, 2 * 1024)
    }

    fn open_with_cache(path: &Path, kib: i64) -> Result<Self, DataError> {
        // The name's and the message's bytes (a name that is not UTF-8 as `\xff`, never as
        // U+FFFD, a character no file is called).
        let err = |e: StoreError| DataError::Open {
            path: Said::new().id(path.as_os_str().as_bytes()),
            cause: e.said(),
        };
        let store = Store::open_existing(path, true).map_err(err)?;
        store.set_page_cache_kib(kib).map_err(err)?;
        Ok(StoreData { store })
    }
}

fn rd(e: StoreError) -> DataError {
    DataError::Read(e.to_string())
}

/// The console's request for a window of a list as the store's: a limit of 0 reads one row
/// and shows none, an anchor's index or an end past `i64::MAX` is not used, and `key` names
/// the anchor row as the store's read of that list names it.
fn near<'k, K, A>(
    (offset, limit): (u64, u64),
    anchor: &'k Option<(u64, K)>,
    end: &Option<u64>,
    key: impl FnOnce(&'k K) -> A,
) -> Near<A> {
    let i = |n: u64| i64::try_from(n).ok();
    Near {
        limit: i(limit).unwrap_or(i64::MAX).max(1),
        offset: i(offset).unwrap_or(i64::MAX),
        anchor: anchor.as_ref().and_then(|(ix, k)| Some((i(*ix)?, key(k)))),
        end: end.and_then(i),
    }
}

/// A window the store read by key as the console's page (at most `limit` rows shown).
fn window<S, T>(limit: u64, w: store::WindowPage<S>, f: impl Fn(S) -> T) -> Page<T> {
    Page {
        offset: w.offset.max(0) as u64,
        total: w.total.max(0) as u64,
        exact: w.exact,
        rows: w
            .items
            .into_iter()
            .take(usize::try_from(limit).unwrap_or(usize::MAX))
            .map(f)
            .collect(),
    }
}

/// A list the store reads a window at a time by a row's id: `read` is handed the store's
/// window for the console's request, and each row it reads is shown as `row` makes it.
fn by_id<S, T>(
    span: (u64, u64),
    anchor: &Option<(u64, String)>,
    end: &Option<u64>,
    read: impl FnOnce(Near<&str>) -> Result<store::WindowPage<S>, StoreError>,
    row: impl Fn(S) -> T,
) -> Result<Page<T>, DataError> {
    let w = read(near(span, anchor, end, String::as_str)).map_err(rd)?;
    Ok(window(span.1, w, row))
}

fn some_bytes(s: &str) -> Option<Vec<u8>> {
    (!s.is_empty()).then(|| s.as_bytes().to_vec())
}

fn some_text(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

fn queue_row(q: store::QueueItem) -> QueueRow {
    let a = q.approval;
    QueueRow {
        created_at: a.created_at,
        expires_at: a.expires_at,
        expires_unreadable: super::time::names_column(&a.decode_error, "expires_at"),
        approval_id: Key::new(a.id_bytes()),
        run_id: Key::new(a.run_id_bytes()),
        step_id: Key::new(a.step_id_bytes()),
        step_index: q.step_index,
        kind: raw_bytes(&a.raw_invalid, "kind", &a.kind),
        tool: q.tool.map(String::into_bytes),
        args_repeat_a_key: q
            .args_head
            .as_deref()
            .is_some_and(super::fields::repeats_a_key),
        args: q.args_head,
        paused_again: false,
        goal: Vec::new(),
        agent_reason: Vec::new(),
        sorted_by: None,
        hash: a.hash,
    }
}

fn run_row(o: store::RunOverview) -> RunRow {
    let r = o.run;
    RunRow {
        goal: raw_bytes(&r.raw_invalid, "goal", &r.goal),
        reason_detail: raw_bytes(&r.raw_invalid, "reason_detail", &r.reason_detail),
        status: r.status.clone(),
        step_count: r.step_count,
        created_at: r.created_at,
        finished_at: r.finished_at,
        pending: o.pending.max(0) as u64,
        damaged: o.damaged,
        fate: None,
        reason: raw_bytes(&r.raw_invalid, "reason", &r.reason),
        id: Key::new(r.id_bytes()),
    }
}

fn run_header(r: Run) -> RunHeader {
    RunHeader {
        goal: raw_bytes(&r.raw_invalid, "goal", &r.goal),
        reason_detail: raw_bytes(&r.raw_invalid, "reason_detail", &r.reason_detail),
        limits_json: raw_bytes(&r.raw_invalid, "limits", &r.limits_json),
        lease_owner: raw_bytes(&r.raw_invalid, "lease_owner", &r.lease_owner),
        status: r.status.clone(),
        step_count: r.step_count,
        created_at: r.created_at,
        started_at: r.started_at,
        finished_at: r.finished_at,
        model_calls: r.model_calls,
        input_tokens: r.input_tokens,
        output_tokens: r.output_tokens,
        cached_input_tokens: r.cached_input_tokens,
        cost_micros: r.estimated_cost_micros,
        active_ms: r.active_ms,
        lease_expires_at: r.lease_expires_at,
        resumable: false,
        fate: None,
        proxy_session: None,
        reason: raw_bytes(&r.raw_invalid, "reason", &r.reason),
        id: Key::new(r.id_bytes()),
    }
}

fn step_row(s: Step) -> StepRow {
    let d = s.decision.as_ref();
    let o = s.observation.as_ref();
    StepRow {
        idx: s.index,
        status: s.status.clone(),
        tool: d.and_then(|d| some_bytes(&d.tool)),
        decision_kind: d.and_then(|d| some_text(d.kind.as_str())),
        policy_outcome: s
            .policy
            .as_ref()
            .and_then(|p| some_text(p.outcome.as_str())),
        observation_kind: o.and_then(|o| some_text(&o.kind)),
        summary: o.and_then(|o| some_bytes(&o.summary)),
        decode_error: some_text(&s.decode_error),
        id: Key::new(s.id_bytes()),
    }
}

fn event_row(m: store::MarkedEvent) -> EventRow {
    let e = m.event;
    EventRow {
        seq: e.seq,
        payload: raw_bytes(&e.raw_invalid, "payload", &e.payload),
        step_id: Key::new(e.step_id_bytes()),
        kind: e.kind_bytes().to_vec(),
        at: e.at_text,
        chain: match m.mark {
            store::ChainMark::Holds => ChainMark::Ok,
            store::ChainMark::Broken => ChainMark::Broken,
            store::ChainMark::Unknown => ChainMark::Unknown,
        },
    }
}

fn model_call_row(m: store::ModelCallView) -> ModelCallRow {
    ModelCallRow {
        model: raw_bytes(&m.raw_invalid, "model", &m.model),
        error: raw_bytes(&m.raw_invalid, "error", &m.error),
        id: Key::new(raw_bytes(&m.raw_invalid, "id", &m.id)),
        step_id: Key::new(raw_bytes(&m.raw_invalid, "step_id", &m.step_id)),
        attempt: m.attempt,
        status: m.status,
        input_tokens: m.input_tokens,
        output_tokens: m.output_tokens,
        cost_micros: m.cost_micros,
        latency_ms: m.latency_ms,
    }
}

fn approval_row(a: Approval, run_status: Option<&crate::runtime::types::RunStatus>) -> ApprovalRow {
    let raw = |col: &str, text: &str| raw_bytes(&a.raw_invalid, col, text);
    ApprovalRow {
        capability: raw("capability", &a.capability),
        presentation: raw("presentation", &a.presentation),
        request: raw("request", &a.request_json),
        decided_by: raw("decided_by", &a.decided_by),
        note: raw("note", &a.note),
        status: a.status.clone(),
        created_at: a.created_at,
        decided_at: a.decided_at,
        expires_at: a.expires_at,
        decode_error: some_text(&a.decode_error),
        run_status: run_status.cloned().unwrap_or_default(),
        reason: Vec::new(),
        request_not_shown: None,
        resumable: false,
        proxy_session: None,
        hash_refused: false,
        id: Key::new(a.id_bytes()),
        run_id: Key::new(a.run_id_bytes()),
        step_id: Key::new(a.step_id_bytes()),
        kind: raw_bytes(&a.raw_invalid, "kind", &a.kind),
        hash: a.hash,
    }
}

fn damaged_row(mut d: store::DamagedColumn) -> DamagedRow {
    d.raw_len = d.raw_len.max(0);
    DamagedRow {
        damage: d,
        run_status: None,
    }
}

impl<S: ConsoleReads> StoreData<S> {
    fn counts(&self) -> Result<Counts, StoreError> {
        let c = self.store.view_counts()?;
        let n = |v: i64| v.max(0) as u64;
        Ok(Counts {
            pending: n(c.pending),
            runs: n(c.runs),
            waiting: n(c.waiting),
            running: n(c.running),
            failed: n(c.failed),
            oldest: c
                .oldest_pending
                .as_deref()
                .and_then(|t| Timestamp::parse(t).ok()),
            newest: c.newest_pending,
        })
    }

    fn run(&self, id: &Key) -> Result<Option<RunHeader>, StoreError> {
        match self.store.get_run_capped(id) {
            Ok(r) => {
                let mut h = run_header(r);
                // A fate that cannot be read leaves the header as it was (never fails it).
                h.fate = fate_of(&self.store, &h.id, &h.status).ok().flatten();
                h.proxy_session = self.proxy_session(&h.id);
                Ok(Some(h))
            }
            Err(StoreError::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The MCP proxy session whose call `run` answers. A proxy's index that cannot be read (a
    /// hand-made table) says nothing.
    fn proxy_session(&self, run: &Key) -> Option<Vec<u8>> {
        self.store.proxy_call(run).ok().flatten().map(|p| p.session)
    }

    fn approvals(
        &self,
        run: &Key,
        offset: u64,
        limit: u64,
        anchor: &Option<(u64, String)>,
        end: &Option<u64>,
    ) -> Result<Page<ApprovalRow>, StoreError> {
        let near = near((offset, limit), anchor, end, String::as_str);
        let (w, status) = self.store.list_run_approvals_near(run, near)?;
        Ok(window(limit, w, |a| approval_row(a, status.as_ref())))
    }

    /// The exact length of the list `q` reads (asked after a jump to the end).
    fn length(&self, q: &Query) -> Result<u64, DataError> {
        let s = &self.store;
        let n = match q {
            Query::Queue { filter, .. } => s.count_queue(filter),
            Query::Runs { status, filter, .. } => {
                s.count_runs_overview(status.as_ref().map_or("", RunStatus::as_str), filter)
            }
            Query::Steps { run, .. } => s.count_steps(run),
            Query::Events { run, .. } => s.count_events(run),
            Query::Approvals { run, .. } => s.count_run_approvals(run),
            Query::ModelCalls { run, .. } => s.count_model_calls(run),
            Query::Damaged { .. } => s.count_damaged(),
            other => {
                return Err(DataError::Read(format!(
                    "not a list: {}",
                    match other {
                        Query::Length(_) => "a length",
                        _ => "a single row",
                    }
                )));
            }
        };
        Ok(n.map_err(rd)?.max(0) as u64)
    }

    fn approval(&self, id: &Key) -> Result<Option<ApprovalRow>, StoreError> {
        // Read as a page reads it: a huge request is never loaded to be shown (issue 14 item 6).
        let Some(v) = self.store.approval_view_capped(id)? else {
            return Ok(None);
        };
        // Up to SHOWN_REQUEST_MAX bytes the request is read whole, shown and decidable as
        // before; only a larger one stays the store's stand-in.
        let v = match store::capped_request(&v.approval) {
            Some(n) if n <= store::SHOWN_REQUEST_MAX => match self.store.approval_view(id)? {
                Some(whole) => whole,
                None => return Ok(None),
            },
            _ => v,
        };
        Ok(Some(v).map(|v| {
            let mut approval = v.approval;
            let not_shown = store::capped_request(&approval);
            // The decision's own check, once here rather than on every frame that draws it.
            let hash_refused =
                not_shown.is_none() && crate::runtime::operator::verify_hash(&approval).is_err();
            if let Some(n) = not_shown {
                // The store's note is what this screen says instead, not a damaged column.
                // The note contains "; " itself: remove it whole (it is joined last).
                let note = store::capped_note(n);
                let e = &mut approval.decode_error;
                if let Some(head) = e.strip_suffix(&note) {
                    *e = head.strip_suffix("; ").unwrap_or(head).to_string();
                }
            }
            let mut row = approval_row(approval, v.run_status.as_ref());
            row.reason = v.reason.into_bytes();
            row.request_not_shown = not_shown.map(|n| (n, n > store::SHOWN_REQUEST_MAX));
            row.proxy_session = self.proxy_session(&row.run_id);
            row.hash_refused = hash_refused;
            row
        }))
    }

    fn verify(&self) -> Result<ChainReport, StoreError> {
        let r = self.store.verify_chain()?;
        Ok(ChainReport {
            checked: r.checked.max(0) as u64,
            head: r.hash,
            broken_at: r.chain_break.map(|b| (b.seq, b.detail)),
        })
    }
}

impl<S: ConsoleReads> ConsoleData for StoreData<S> {
    fn data_version(&mut self) -> Result<i64, DataError> {
        self.store.data_version().map_err(rd)
    }

    fn query(&mut self, q: &Query) -> Result<Reply, DataError> {
        self.store.ready().map_err(rd)?;
        if let Query::Filtered { filter, list } = q {
            return super::scan::filtered(self, filter, list);
        }
        let s = &self.store;
        Ok(match q {
            Query::Counts => Reply::Counts(self.counts().map_err(rd)?),
            Query::Queue {
                filter,
                sort,
                offset,
                limit,
                anchor,
                end,
            } => {
                let span = (*offset, *limit);
                let mut page = if *sort == Sort::Age {
                    by_id(
                        span,
                        anchor,
                        end,
                        |near| s.list_queue_rows_near(filter, near),
                        queue_row,
                    )?
                } else {
                    by_id(
                        span,
                        anchor,
                        end,
                        |near| s.list_queue_sorted_near(filter, &sort.order(), near),
                        |(q, v)| QueueRow {
                            sorted_by: Some(v),
                            ..queue_row(q)
                        },
                    )?
                };
                // Each shown row's run, by key: was this approval asked again after a grant?
                // (A read that fails marks none, as a fate that cannot be read marks nothing.)
                let runs: Vec<Key> = page.rows.iter().map(|r| r.run_id.clone()).collect();
                if let Ok(lasts) = s.last_two_approvals(&runs) {
                    for (r, two) in page.rows.iter_mut().zip(lasts) {
                        r.paused_again = asked_again(&two).as_ref() == Some(&r.approval_id);
                    }
                }
                super::context::queue_texts(s, &mut page.rows).map_err(rd)?;
                Reply::Queue(page)
            }
            Query::QueueTotal { filter } => {
                Reply::Total(s.count_queue(filter).map_err(rd)?.max(0) as u64)
            }
            Query::Length(q) => Reply::Total(self.length(q)?),
            Query::Runs {
                status,
                filter,
                offset,
                limit,
                anchor,
                end,
            } => {
                let status = status.as_ref().map_or("", RunStatus::as_str);
                let mut page = by_id(
                    (*offset, *limit),
                    anchor,
                    end,
                    |near| s.list_runs_overview_near(status, filter, near),
                    run_row,
                )?;
                // Each shown run's fate, by key (a window's worth of runs, their last two
                // approvals read at once; a read that fails shows no fate, as before).
                let runs: Vec<Key> = page.rows.iter().map(|r| r.id.clone()).collect();
                if let Ok(lasts) = s.last_two_approvals(&runs) {
                    for (r, two) in page.rows.iter_mut().zip(lasts) {
                        r.fate = fate_from(s, two, &r.status).ok().flatten();
                    }
                }
                Reply::Runs(page)
            }
            Query::Run { id } => Reply::Run(self.run(id).map_err(rd)?.map(Box::new)),
            Query::Steps { .. }
            | Query::Events { .. }
            | Query::Approvals { .. }
            | Query::ModelCalls { .. } => self.run_tab(q)?,
            Query::Approval { id } => Reply::Approval(self.approval(id).map_err(rd)?.map(Box::new)),
            Query::Damaged {
                offset,
                limit,
                anchor,
                end,
            } => {
                let near = near((*offset, *limit), anchor, end, |(t, row, col)| {
                    (*t, row.as_str(), *col)
                });
                let w = s.list_damaged_near(near).map_err(rd)?;
                let mut page = window(*limit, w, damaged_row);
                // Each shown row's run status, by key (a window's worth of lookups): the
                // screen offers cancel only on a run that has not finished.
                for r in &mut page.rows {
                    r.run_status = s
                        .get_run_capped(&r.damage.run_id)
                        .ok()
                        .map(|run| run.status);
                }
                Reply::Damaged(page)
            }
            Query::RunPrefix { prefix, limit } => {
                Reply::RunPrefix(s.runs_with_prefix(prefix.as_bytes(), *limit).map_err(rd)?)
            }
            Query::Verify => Reply::Verify(self.verify().map_err(rd)?),
            Query::Stats { now } => Reply::Stats(Box::new(
                s.stats(None, Timestamp::from_unix(*now, 0)).map_err(rd)?,
            )),
            // Answered by the scan above; kept here so the match stays whole.
            Query::Filtered { filter, list } => super::scan::filtered(self, filter, list)?,
            Query::Context {
                approval,
                run,
                step,
                target,
            } => Reply::Context(Box::new(
                super::context::read(s, approval, run, step, target.as_ref()).map_err(rd)?,
            )),
            // Answered by the worker through the binary's hook; a reader alone cannot.
            Query::Recheck { .. } => Reply::Recheck(Recheck::Unavailable(
                "this console was given no policy to ask".into(),
            )),
            // Answered by the worker, one read of this reader at a time.
            Query::Marked { .. } | Query::MarkedRuns { .. } | Query::QueueAll { .. } => {
                return Err(DataError::Read(
                    "marked rows are read by the worker, not by one read".into(),
                ));
            }
        })
    }
}

impl<S: ConsoleReads> StoreData<S> {
    /// A page of one of the run detail's tabs.
    fn run_tab(&self, q: &Query) -> Result<Reply, DataError> {
        let s = &self.store;
        Ok(match q {
            Query::Steps {
                run,
                offset,
                limit,
                anchor,
                end,
            } => Reply::Steps(by_id(
                (*offset, *limit),
                anchor,
                end,
                |near| s.list_steps_page_near(run, near),
                step_row,
            )?),
            Query::Events {
                run,
                offset,
                limit,
                anchor,
                end,
            } => {
                let near = near((*offset, *limit), anchor, end, |seq| *seq);
                let w = s.list_marked_events_near(run, near).map_err(rd)?;
                Reply::Events(window(*limit, w, event_row))
            }
            Query::Approvals {
                run,
                offset,
                limit,
                anchor,
                end,
            } => Reply::Approvals(
                self.approvals(run, *offset, *limit, anchor, end)
                    .map_err(rd)?,
            ),
            Query::ModelCalls {
                run,
                offset,
                limit,
                anchor,
                end,
            } => Reply::ModelCalls(by_id(
                (*offset, *limit),
                anchor,
                end,
                |near| s.list_model_calls_near(run, near),
                model_call_row,
            )?),
            _ => return Err(DataError::Read("not a page of a run's tab".into())),
        })
    }
}

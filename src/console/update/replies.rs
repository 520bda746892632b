//! Replies from the worker: applied to the slot whose request id they carry; a reply nobody
//! waits for any more (the screen was left, a newer read was sent) is dropped.

use crate::console::data::*;
use crate::console::facts::Presented;
use crate::console::msg::Effect;
use crate::console::nav::ListView;
use crate::console::page;
use crate::console::state::{
    App, ApprovalScreen, Level, Overlay, Pending, RunDetailScreen, Screen, short,
};
use crate::console::time;

fn take<T>(l: &mut ListView<T>, id: u64, page: Page<T>, id_of: impl Fn(&T) -> Key) -> bool {
    if l.pending == Some(id) {
        l.counting = None;
        l.apply(page, id_of);
        true
    } else {
        false
    }
}

/// What applying a reply to the stack asks to follow.
#[derive(Default)]
struct Follow {
    /// The queue screen (its depth) and filter whose page came back inexact: its count follows.
    count_for: Option<(usize, String)>,
    relayout: bool,
    /// A length asked for by a jump to the end came back: the window at the end follows.
    reload_end: bool,
    /// The approval detail's row came back: its page context and recheck follow.
    page_reads: bool,
}

pub(super) fn on_reply(app: &mut App, id: u64, r: Reply) -> Vec<Effect> {
    if app.counts_pending == Some(id) {
        app.counts_pending = None;
        match r {
            Reply::Counts(c) => {
                let fx = super::notify::on_counts(app, &c);
                app.counts = Some(c);
                app.counts_stale = false;
                return fx;
            }
            // The header keeps the last counts (or `…`), marked stale; the next change asks
            // again.
            Reply::Failed(m) => {
                app.counts_stale = true;
                app.notice = Some((Level::Error, format!("header counts: {m}").into()))
            }
            _ => {}
        }
        return vec![];
    }
    if let Some(pos) = app.running.iter().position(|(i, _)| *i == id) {
        app.running.remove(pos);
        app.notice = Some(finished(r));
        return vec![];
    }
    if let Some(fx) = super::marks::on_reply(app, id, &r) {
        return fx;
    }
    if let Some((_, given)) = app.resolving.take_if(|(i, _)| *i == id) {
        return super::command_line::on_prefix(app, given, r);
    }
    let rows = app.list_rows();
    let top = app.stack.len().saturating_sub(1);
    let mut follow = Follow::default();
    let notice = &mut app.notice;
    for (depth, s) in app.stack.iter_mut().enumerate() {
        if apply(s, depth, top, id, r.clone(), notice, &mut follow) {
            break;
        }
    }
    if let Some(Screen::Queue(s)) = app.stack.last_mut() {
        s.list.scroll_into_view(rows);
    }
    if follow.relayout {
        app.relayout();
    }
    closed_elsewhere(app);
    let mut fx = vec![];
    if follow.page_reads {
        fx.extend(page_reads(app));
    }
    if follow.reload_end {
        fx.extend(app.start());
    }
    // A list's first read was one screen; it is shown, the whole window around it follows
    // (and the queue's count with that window's reply, not twice).
    if app.stack.last_mut().is_some_and(widen_due) {
        let top = app.stack.len() - 1;
        follow.count_for.take_if(|(depth, _)| *depth == top);
        fx.extend(app.load_window());
    }
    // The rows are shown; the queue's count comes after them (on the counting lane).
    if let Some((depth, filter)) = follow.count_for {
        let cid = app.id();
        if let Some(Screen::Queue(s)) = app.stack.get_mut(depth) {
            s.list.counting = Some(cid);
            fx.push(Effect::Query(cid, Query::QueueTotal { filter }));
        }
    }
    // The header counts are first read once the first screen's rows have come back.
    if app.counts.is_none() && app.counts_pending.is_none() {
        fx.extend(app.load_counts());
    }
    fx
}

/// Whether the screen's list (the run detail's open tab) showed its first, one-screen read
/// and is to be read whole now.
fn widen_due(s: &mut Screen) -> bool {
    match s {
        Screen::Queue(s) => s.list.widen_due(),
        Screen::Runs(s) => s.list.widen_due(),
        Screen::Damaged(s) => s.list.widen_due(),
        Screen::RunDetail(s) => match s.tab {
            Tab::Steps => s.steps.widen_due(),
            Tab::Events => s.events.widen_due(),
            Tab::Approvals => s.approvals.widen_due(),
            Tab::ModelCalls => s.calls.widen_due(),
        },
        _ => false,
    }
}

/// Closes a decision dialog whose approval a reload found decided (by another console or
/// command), saying who decided, how and when; nothing is written.
fn closed_elsewhere(app: &mut App) {
    let Some(Overlay::Confirm(c)) = &app.overlay else {
        return;
    };
    let Pending::Decide { approval, .. } = &c.what else {
        return;
    };
    let Some(Screen::Approval(s)) = app.stack.last() else {
        return;
    };
    let Some(a) = s.row.as_ref().filter(|a| a.id == *approval) else {
        return;
    };
    if a.status == ApprovalStatus::Pending {
        return;
    }
    let by = if a.decided_by.is_empty() {
        "someone".to_string()
    } else {
        crate::console::text::escaped(&a.decided_by)
    };
    let when = if a.decided_at.is_zero() {
        String::new()
    } else {
        format!(" {}", time::ago_at(&a.decided_at, app.now))
    };
    app.notice = Some((
        Level::Error,
        format!(
            "closed: already {} by {by}{when}; nothing changed",
            a.status
        )
        .into(),
    ));
    app.overlay = None;
}

/// The notice for a `:verify` (or other running read) that finished.
fn finished(r: Reply) -> (Level, Vec<u8>) {
    match r {
        Reply::Verify(rep) => match rep.broken_at {
            None => (
                Level::Ok,
                format!(
                    "event chain verified: {} events, head {}",
                    rep.checked,
                    short(&rep.head)
                )
                .into(),
            ),
            Some((seq, d)) => (
                Level::Error,
                format!(
                    "event chain broken at seq {seq}: {d} ({} verified before it)",
                    rep.checked
                )
                .into(),
            ),
        },
        Reply::Failed(e) => (Level::Error, e.to_string().into()),
        _ => (Level::Info, "done".into()),
    }
}

/// Applies a reply to one screen of the stack; whether it was that screen's.
fn apply(
    s: &mut Screen,
    depth: usize,
    top: usize,
    id: u64,
    r: Reply,
    notice: &mut Option<(Level, Vec<u8>)>,
    follow: &mut Follow,
) -> bool {
    let end = &mut follow.reload_end;
    match (s, r) {
        (Screen::Queue(s), Reply::Total(n)) => total(&mut s.list, id, n, end),
        (Screen::Runs(s), Reply::Total(n)) => total(&mut s.list, id, n, end),
        (Screen::Damaged(s), Reply::Total(n)) => total(&mut s.list, id, n, end),
        (Screen::RunDetail(s), Reply::Total(n)) => {
            total(&mut s.steps, id, n, end)
                || total(&mut s.events, id, n, end)
                || total(&mut s.approvals, id, n, end)
                || total(&mut s.calls, id, n, end)
        }
        (Screen::Queue(s), Reply::Queue(p)) => {
            let exact = p.exact;
            let hit = take(&mut s.list, id, p, |r| r.approval_id.clone());
            if hit && !exact {
                follow.count_for = Some((depth, s.filter.clone()));
            }
            hit
        }
        (Screen::Runs(s), Reply::Runs(p)) => take(&mut s.list, id, p, |r| r.id.clone()),
        (Screen::Damaged(s), Reply::Damaged(p)) => take(&mut s.list, id, p, DamagedRow::key),
        (Screen::RunDetail(s), r) => run_detail(s, id, r, notice),
        (Screen::Approval(s), Reply::Approval(a)) if s.pending == Some(id) => {
            approval(s, a, notice);
            follow.relayout = depth == top;
            follow.page_reads = depth == top && s.row.is_some();
            true
        }
        (Screen::Approval(s), Reply::Context(c)) if s.context_pending == Some(id) => {
            s.context_pending = None;
            s.context = Some(*c);
            rebuild(s);
            follow.relayout = depth == top;
            true
        }
        (Screen::Approval(s), Reply::Recheck(r)) if s.recheck_pending == Some(id) => {
            s.recheck_pending = None;
            s.recheck = Some(r);
            rebuild(s);
            follow.relayout = depth == top;
            true
        }
        (Screen::Approval(s), Reply::Failed(m))
            if s.context_pending == Some(id) || s.recheck_pending == Some(id) =>
        {
            if s.recheck_pending == Some(id) {
                s.recheck_pending = None;
                s.recheck = Some(Recheck::Unavailable(format!("the re-check failed: {m}")));
            } else {
                s.context_pending = None;
            }
            rebuild(s);
            follow.relayout = depth == top;
            fail(notice, m)
        }
        (Screen::Queue(s), Reply::Failed(m)) if s.list.pending == Some(id) => fail(notice, m),
        (Screen::Queue(s), Reply::Failed(m)) if s.list.counting == Some(id) => {
            s.list.counting = None;
            fail(notice, m)
        }
        (Screen::Runs(s), Reply::Failed(m))
            if s.list.pending == Some(id) || s.list.counting == Some(id) =>
        {
            s.list.counting = None;
            s.list.to_end = false;
            fail(notice, m)
        }
        (Screen::Damaged(s), Reply::Failed(m))
            if s.list.pending == Some(id) || s.list.counting == Some(id) =>
        {
            s.list.counting = None;
            s.list.to_end = false;
            fail(notice, m)
        }
        (Screen::Approval(s), Reply::Failed(m)) if s.pending == Some(id) => {
            s.pending = None;
            fail(notice, m)
        }
        (Screen::Stats(s), Reply::Stats(st)) if s.pending == Some(id) => {
            s.pending = None;
            s.error = None;
            s.stats = Some(st);
            true
        }
        (Screen::Stats(s), Reply::Failed(m)) if s.pending == Some(id) => {
            s.pending = None;
            s.error = Some(m.to_string());
            true
        }
        _ => false,
    }
}

/// A reply for the run detail: its header, one of its tabs' pages, or a failure.
fn run_detail(
    s: &mut RunDetailScreen,
    id: u64,
    r: Reply,
    notice: &mut Option<(Level, Vec<u8>)>,
) -> bool {
    match r {
        Reply::Run(h) if s.header_pending == Some(id) => {
            s.header_pending = None;
            s.missing = h.is_none();
            s.header = h.map(|b| *b);
            true
        }
        Reply::Steps(p) => take(&mut s.steps, id, p, |r| r.id.clone()),
        Reply::Events(p) => take(&mut s.events, id, p, |r| Key::from(r.seq.to_string())),
        Reply::Approvals(p) => take(&mut s.approvals, id, p, |r| r.id.clone()),
        Reply::ModelCalls(p) => take(&mut s.calls, id, p, |r| r.id.clone()),
        // Only a read this screen asked for and still waits for (issue 16: it took any).
        Reply::Failed(m) if waits_for(s, id) => {
            if s.header_pending == Some(id) {
                s.header_pending = None;
            }
            s.steps.to_end = false;
            s.events.to_end = false;
            s.approvals.to_end = false;
            s.calls.to_end = false;
            fail(notice, m)
        }
        _ => false,
    }
}

/// Whether the run detail waits for read `id`: its header, or a page or count of a tab.
fn waits_for(s: &RunDetailScreen, id: u64) -> bool {
    fn list<T>(l: &ListView<T>, id: u64) -> bool {
        l.pending == Some(id) || l.counting == Some(id)
    }
    s.header_pending == Some(id)
        || list(&s.steps, id)
        || list(&s.events, id)
        || list(&s.approvals, id)
        || list(&s.calls, id)
}

/// The approval detail's row came back: its fields, and a warning when its hash changed.
fn approval(
    s: &mut ApprovalScreen,
    a: Option<Box<ApprovalRow>>,
    notice: &mut Option<(Level, Vec<u8>)>,
) {
    s.pending = None;
    s.missing = a.is_none();
    if let (Some(old), Some(new)) = (&s.row, &a)
        && old.hash != new.hash
    {
        s.changed = true;
        *notice = Some((
            Level::Error,
            "approval changed since you read it; it was reloaded: read it again".into(),
        ));
    }
    s.row = a.map(|b| *b);
    if s.row
        .as_ref()
        .is_none_or(|r| r.status != ApprovalStatus::Pending)
    {
        // Nothing waits on a person: there is no call to ask about.
        s.recheck = Some(Recheck::Unavailable(
            "the approval is no longer pending".into(),
        ));
    }
    rebuild(s);
}

/// The approval detail's fields again: the decision page from what is known, then the raw
/// fields; and which untrusted texts carry a warning.
fn rebuild(s: &mut ApprovalScreen) {
    let known = page::Known {
        context: s.context.as_ref(),
        recheck: s.recheck.as_ref(),
    };
    let was = s.fields.get(s.cursor).map(|f| (f.label.clone(), f.look));
    let offset = s.lines_before(s.cursor).checked_sub(s.scroll);
    s.fields = s
        .row
        .as_ref()
        .map(|a| page::fields(a, known))
        .unwrap_or_default();
    s.hostile = page::hostile(&s.fields, s.context.as_ref());
    // The cursor stays on the field it was on (the page above it may have grown or shrunk):
    // the one with the same label nearest to where it was.
    let same = |i: &usize| {
        was.as_ref()
            .is_some_and(|(l, k)| s.fields[*i].label == *l && s.fields[*i].look == *k)
    };
    let near = (0..s.fields.len())
        .filter(same)
        .min_by_key(|i| i.abs_diff(s.cursor));
    if let Some(i) = near {
        s.cursor = i;
        s.keep = offset;
    }
    s.cursor = s.cursor.min(s.fields.len().saturating_sub(1));
}

/// The reads that follow the approval detail's row: its page context and, while it is
/// pending, today's answer of the policy (both on the worker; the recheck writes nothing).
fn page_reads(app: &mut App) -> Vec<Effect> {
    let (cid, rid) = (app.id(), app.id());
    let Some(Screen::Approval(s)) = app.stack.last_mut() else {
        return vec![];
    };
    let Some(a) = &s.row else {
        return vec![];
    };
    let target = Presented::parse(&a.presentation).and_then(|p| p.target());
    let mut fx = vec![Effect::Query(
        cid,
        Query::Context {
            approval: a.id.clone(),
            run: a.run_id.clone(),
            step: a.step_id.clone(),
            target,
        },
    )];
    s.context_pending = Some(cid);
    if a.status == ApprovalStatus::Pending {
        s.recheck_pending = Some(rid);
        fx.push(Effect::Query(
            rid,
            Query::Recheck {
                run: a.run_id.clone(),
                step: a.step_id.clone(),
            },
        ));
    }
    fx
}

/// Applies a total to the list that asked for it; after a jump to the end, the cursor is on
/// the last row and its window must be read.
fn total<T>(l: &mut ListView<T>, id: u64, n: u64, reload_end: &mut bool) -> bool {
    let to_end = l.to_end;
    if !l.apply_total(id, n) {
        return false;
    }
    if to_end {
        l.remember_none();
        *reload_end = true;
    }
    true
}

fn fail(notice: &mut Option<(Level, Vec<u8>)>, e: DataError) -> bool {
    *notice = Some((Level::Error, e.to_string().into()));
    true
}

pub(super) fn on_done(app: &mut App, id: u64, r: WriteResult) -> Vec<Effect> {
    if let Some(fx) = super::bulk::on_done(app, id, &r) {
        return fx;
    }
    let Some(pos) = app.running.iter().position(|(i, _)| *i == id) else {
        return vec![];
    };
    app.running.remove(pos);
    app.notice = Some(match &r {
        Ok(m) => (Level::Ok, m.clone().into()),
        Err(DecideError::AlreadyDecided { status, by, at }) => {
            let who = if by.is_empty() {
                String::new()
            } else {
                format!(" by {by}")
            };
            let when = at.map_or_else(String::new, |at| format!(" {}", time::ago_at(&at, app.now)));
            (
                Level::Error,
                format!("already {status}{who}{when}; nothing was changed").into(),
            )
        }
        Err(e) => (Level::Error, e.bytes()),
    });
    // Whatever happened, show the rows and counts as they are now.
    let mut fx = app.reload_all();
    fx.dedup();
    fx
}

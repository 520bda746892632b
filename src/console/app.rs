//! The console's state and its one transition function, `update(state, input) -> effects`.
//! Pure: no I/O, no clock; the loop in `mod.rs` feeds inputs and performs effects.

use std::collections::BTreeSet;

use crossterm::event::KeyEvent;

use super::data::*;
use super::fields::{self, Field, FieldView};
use super::keymap::{Action, Keymap};
use super::nav::{ListView, window_for};
use super::theme::{Role, Theme};

/// What the loop feeds `update`.
#[derive(Debug, Clone)]
pub enum Input {
    Key(KeyEvent),
    Paste(String),
    Resize(u16, u16),
    /// The clock, in Unix seconds.
    Tick(i64),
    Reply(u64, Reply),
    /// The database changed (data_version moved).
    DataChanged,
    Done(u64, CommandResult),
    Progress(u64, String),
    /// The database thread died (a panic); the console cannot go on.
    WorkerStopped,
}

/// What `update` asks the loop to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    Query(u64, Query),
    Command(u64, Command),
    /// Put this (already escaped) text on the clipboard (OSC 52).
    Copy(String),
    Suspend,
    Quit,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Info,
    Ok,
    Error,
}

#[derive(Debug, Clone)]
pub struct QueueScreen {
    pub list: ListView<QueueRow>,
    pub filter: String,
}

#[derive(Debug, Clone)]
pub struct RunsScreen {
    pub list: ListView<RunRow>,
    pub filter: String,
    pub status: Option<String>,
}

#[derive(Debug, Clone)]
pub struct RunDetailScreen {
    pub id: Key,
    pub header: Option<RunHeader>,
    pub header_pending: Option<u64>,
    pub missing: bool,
    pub tab: Tab,
    pub steps: ListView<StepRow>,
    pub events: ListView<EventRow>,
    pub approvals: ListView<ApprovalRow>,
    pub calls: ListView<ModelCallRow>,
}

#[derive(Debug, Clone)]
pub struct ApprovalScreen {
    pub id: Key,
    pub row: Option<ApprovalRow>,
    pub pending: Option<u64>,
    pub missing: bool,
    pub fields: Vec<Field>,
    pub view: Vec<FieldView>,
    pub expanded: BTreeSet<usize>,
    pub strict: bool,
    /// Code-point inspector of the selected field.
    pub inspect: bool,
    /// The inspector's page (`]` / `[` while it is open); back to 0 when the field changes.
    pub inspect_page: usize,
    pub cursor: usize,
    pub scroll: usize,
    /// Set when a reload found a different hash than the one shown before.
    pub changed: bool,
}

#[derive(Debug, Clone)]
pub struct DamagedScreen {
    pub list: ListView<DamagedRow>,
}

#[derive(Debug, Clone)]
pub enum Screen {
    Queue(QueueScreen),
    Runs(RunsScreen),
    RunDetail(Box<RunDetailScreen>),
    Approval(Box<ApprovalScreen>),
    Damaged(DamagedScreen),
    Help { scroll: usize },
}

impl Screen {
    pub fn title(&self) -> &'static str {
        match self {
            Screen::Queue(_) => "queue",
            Screen::Runs(_) => "runs",
            Screen::RunDetail(_) => "run",
            Screen::Approval(_) => "approval",
            Screen::Damaged(_) => "damaged",
            Screen::Help { .. } => "help",
        }
    }
}

/// A text input (filter, command line, reason).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TextInput {
    pub text: String,
}

impl TextInput {
    /// Pasted text goes in as one line (line breaks become spaces; controls dropped from our
    /// own input, which is the operator's, not the database's).
    fn paste(&mut self, s: &str) {
        for c in s.chars() {
            if c == '\n' || c == '\r' || c == '\t' {
                self.text.push(' ');
            } else if !c.is_control() {
                self.text.push(c);
            }
        }
    }
}

/// What a confirmation will do when accepted.
#[derive(Debug, Clone, PartialEq)]
pub enum Pending {
    Approve {
        run: Key,
        approval: Key,
        hash: String,
    },
    Reject {
        run: Key,
        approval: Key,
        hash: String,
    },
    Cancel {
        run: Key,
    },
    Resume {
        run: Key,
    },
}

#[derive(Debug, Clone)]
pub struct Confirm {
    pub what: Pending,
    /// Lines repeating what will happen (tool, run, short hash, warnings); untrusted parts are
    /// kept as bytes and escaped when drawn.
    pub lines: Vec<(String, Vec<u8>)>,
    pub warnings: Vec<String>,
    /// Reject and cancel ask for a reason.
    pub reason: Option<TextInput>,
}

#[derive(Debug, Clone)]
pub enum Overlay {
    Confirm(Box<Confirm>),
    Filter(TextInput),
    Command(TextInput),
}

/// Options that shape the app (from the command line).
#[derive(Debug, Clone)]
pub struct AppConfig {
    pub by: String,
    pub read_only: bool,
    pub can_resume: bool,
}

pub struct App {
    pub stack: Vec<Screen>,
    pub overlay: Option<Overlay>,
    pub keymap: Keymap,
    pub theme: Theme,
    pub cfg: AppConfig,
    pub now: i64,
    pub size: (u16, u16),
    /// The header counts; `None` until the first read of them comes back.
    pub counts: Option<Counts>,
    pub counts_pending: Option<u64>,
    pub notice: Option<(Level, String)>,
    /// Commands in flight: id → what they do (for the progress line).
    pub running: Vec<(u64, String)>,
    pub next_id: u64,
    pub quit: bool,
    /// Set when something visible changed since the last draw.
    pub dirty: bool,
}

pub fn short(h: &str) -> &str {
    h.get(..12).unwrap_or(h)
}

impl App {
    pub fn new(cfg: AppConfig, keymap: Keymap, theme: Theme, now: i64, size: (u16, u16)) -> App {
        let notice =
            (!keymap.warnings.is_empty()).then(|| (Level::Info, keymap.warnings.join("; ")));
        App {
            stack: vec![Screen::Queue(QueueScreen {
                list: ListView::default(),
                filter: String::new(),
            })],
            overlay: None,
            keymap,
            theme,
            cfg,
            now,
            size,
            counts: None,
            counts_pending: None,
            notice,
            running: Vec::new(),
            next_id: 1,
            quit: false,
            dirty: true,
        }
    }

    pub(crate) fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// Rows a list shows (screen height minus header, table header, hint and status bars).
    pub fn list_rows(&self) -> u16 {
        self.size.1.saturating_sub(5).max(1)
    }

    pub fn top(&self) -> &Screen {
        self.stack.last().unwrap_or(&Screen::Help { scroll: 0 })
    }

    /// Whether the top screen shows relative times (the clock ticks only then).
    pub fn shows_clock(&self) -> bool {
        !matches!(self.top(), Screen::Help { .. })
    }

    /// Effects to read everything the top screen shows. The header counts follow the first
    /// reply (see `replies::on_reply`): on a large database they are scans, and the rows come
    /// first.
    pub fn start(&mut self) -> Vec<Effect> {
        self.load_top(false)
    }

    /// The top screen's rows and then the header counts (a refresh, or after a decision).
    pub fn reload_all(&mut self) -> Vec<Effect> {
        let mut fx = self.load_top(false);
        fx.extend(self.load_counts());
        fx
    }

    pub(crate) fn load_counts(&mut self) -> Vec<Effect> {
        let id = self.id();
        self.counts_pending = Some(id);
        vec![Effect::Query(id, Query::Counts)]
    }

    /// Reads the top screen's data; `keep` re-reads the same window (live reload).
    fn load_top(&mut self, keep: bool) -> Vec<Effect> {
        let win = window_for(self.list_rows());
        let id = self.id();
        let Some(top) = self.stack.last_mut() else {
            return vec![];
        };
        let q = match top {
            Screen::Queue(s) => {
                let filter = s.filter.clone();
                list_query(
                    &mut s.list,
                    id,
                    keep,
                    win,
                    |r| r.approval_id.as_str().map(str::to_string),
                    |offset, anchor, end| Query::Queue {
                        filter,
                        offset,
                        limit: win,
                        anchor,
                        end,
                    },
                )
            }
            Screen::Runs(s) => {
                let (status, filter) = (s.status.clone(), s.filter.clone());
                list_query(
                    &mut s.list,
                    id,
                    keep,
                    win,
                    |r| r.id.as_str().map(str::to_string),
                    |offset, anchor, end| Query::Runs {
                        status,
                        filter,
                        offset,
                        limit: win,
                        anchor,
                        end,
                    },
                )
            }
            Screen::Damaged(s) => list_query(
                &mut s.list,
                id,
                keep,
                win,
                |r| {
                    r.row_id
                        .as_str()
                        .map(|id| (r.table, id.to_string(), r.column))
                },
                |offset, anchor, end| Query::Damaged {
                    offset,
                    limit: win,
                    anchor,
                    end,
                },
            ),
            Screen::Approval(s) => {
                s.pending = Some(id);
                Query::Approval { id: s.id.clone() }
            }
            Screen::RunDetail(s) => {
                s.header_pending = Some(id);
                let hq = Query::Run { id: s.id.clone() };
                let id2 = self.next_id + 1;
                self.next_id = id2;
                let run = s.id.clone();
                let q = match s.tab {
                    Tab::Steps => list_query(
                        &mut s.steps,
                        id2,
                        keep,
                        win,
                        |r| r.id.as_str().map(str::to_string),
                        |offset, anchor, end| Query::Steps {
                            run,
                            offset,
                            limit: win,
                            anchor,
                            end,
                        },
                    ),
                    Tab::Events => list_query(
                        &mut s.events,
                        id2,
                        keep,
                        win,
                        |r| Some(r.seq),
                        |offset, anchor, end| Query::Events {
                            run,
                            offset,
                            limit: win,
                            anchor,
                            end,
                        },
                    ),
                    Tab::Approvals => list_query(
                        &mut s.approvals,
                        id2,
                        keep,
                        win,
                        |r| r.id.as_str().map(str::to_string),
                        |offset, anchor, end| Query::Approvals {
                            run,
                            offset,
                            limit: win,
                            anchor,
                            end,
                        },
                    ),
                    Tab::ModelCalls => list_query(
                        &mut s.calls,
                        id2,
                        keep,
                        win,
                        |r| r.id.as_str().map(str::to_string),
                        |offset, anchor, end| Query::ModelCalls {
                            run,
                            offset,
                            limit: win,
                            anchor,
                            end,
                        },
                    ),
                };
                return vec![Effect::Query(id, hq), Effect::Query(id2, q)];
            }
            Screen::Help { .. } => return vec![],
        };
        vec![Effect::Query(id, q)]
    }

    fn push(&mut self, s: Screen) -> Vec<Effect> {
        self.stack.push(s);
        self.load_top(false)
    }

    pub fn push_run(&mut self, id: Key) -> Vec<Effect> {
        self.push(Screen::RunDetail(Box::new(RunDetailScreen {
            id,
            header: None,
            header_pending: None,
            missing: false,
            tab: Tab::Steps,
            steps: ListView::default(),
            events: ListView::default(),
            approvals: ListView::default(),
            calls: ListView::default(),
        })))
    }

    pub fn push_approval(&mut self, id: Key) -> Vec<Effect> {
        self.push(Screen::Approval(Box::new(ApprovalScreen {
            id,
            row: None,
            pending: None,
            missing: false,
            fields: Vec::new(),
            view: Vec::new(),
            expanded: BTreeSet::new(),
            strict: false,
            inspect: false,
            inspect_page: 0,
            cursor: 0,
            scroll: 0,
            changed: false,
        })))
    }

    /// Width the approval detail lays its fields out at.
    pub fn detail_width(&self) -> u16 {
        self.size.0.saturating_sub(2)
    }

    pub fn relayout(&mut self) {
        let w = self.detail_width();
        let st = self.theme.text_styles();
        let label = self.theme.style(Role::Title);
        let badge = self.theme.style(Role::Badge);
        if let Some(Screen::Approval(s)) = self.stack.last_mut() {
            s.view = fields::layout(&s.fields, w, &s.expanded, s.strict, &st, label, badge);
        }
    }
}

/// The read of a list's window for its cursor (`keep`: the same window again, a live reload):
/// by key around the first row already read when that row is nearer than the list's start,
/// or from the end when the length is known and the end is nearer (the store picks the nearest;
/// issue 14 item 8). After a jump to the end of a list longer than a window counts, its length
/// is asked first (on the counting lane).
fn list_query<T, K>(
    l: &mut ListView<T>,
    id: u64,
    keep: bool,
    win: u64,
    key: impl Fn(&T) -> Option<K>,
    build: impl FnOnce(u64, Option<(u64, K)>, Option<u64>) -> Query,
) -> Query {
    let off = if keep {
        l.page.offset
    } else {
        l.window_offset(win)
    };
    let q = build(off, l.anchor(off, key), l.end());
    if l.to_end && !l.page.exact {
        l.counting = Some(id);
        Query::Length(Box::new(q))
    } else {
        l.to_end = false;
        l.pending = Some(id);
        q
    }
}

/// The transition function.
pub fn update(app: &mut App, input: Input) -> Vec<Effect> {
    app.dirty = true;
    match input {
        Input::Key(k) => super::keys::on_key(app, k),
        Input::Paste(s) => {
            match &mut app.overlay {
                Some(Overlay::Filter(t)) | Some(Overlay::Command(t)) => t.paste(&s),
                Some(Overlay::Confirm(c)) => {
                    if let Some(r) = &mut c.reason {
                        r.paste(&s)
                    }
                }
                None => app.dirty = false, // bracketed paste goes only into inputs
            }
            vec![]
        }
        Input::Resize(w, h) => {
            app.size = (w, h);
            app.relayout();
            vec![]
        }
        Input::Tick(now) => {
            app.now = now;
            vec![]
        }
        Input::DataChanged => {
            // The screen's rows first: the counts can take a full scan on a large database.
            let mut fx = app.load_top(true);
            fx.extend(app.load_counts());
            fx
        }
        Input::Reply(id, r) => super::replies::on_reply(app, id, r),
        Input::Done(id, r) => super::replies::on_done(app, id, r),
        Input::Progress(id, msg) => {
            if app.running.iter().any(|(i, _)| *i == id) {
                app.notice = Some((Level::Info, msg));
            }
            vec![]
        }
        Input::WorkerStopped => {
            app.quit = true;
            vec![]
        }
    }
}

/// Re-export for the key handler.
pub(crate) fn action_of(app: &App, k: &KeyEvent) -> Option<Action> {
    app.keymap.action(k)
}

/// Builds the confirmation for a decision on the shown approval.
pub(crate) fn confirm_decision_cfg(
    cfg: &AppConfig,
    s: &ApprovalScreen,
    approve: bool,
    now: i64,
) -> Result<Confirm, String> {
    let Some(a) = &s.row else {
        return Err("the approval is not loaded yet".into());
    };
    if cfg.read_only {
        return Err("read-only: actions are off (started with --read-only)".into());
    }
    if a.status != "pending" {
        return Err(format!("approval is {}, not pending", a.status));
    }
    if a.decode_error.is_some() {
        return Err(
            "this approval does not decode; it cannot be decided (cancel the run instead)".into(),
        );
    }
    if let Some((n, bytes)) = a.request_not_shown {
        // Issue 14 item 6: nothing is decided on arguments the reviewer was not shown.
        return Err(format!(
            "no argument shown ({n} {}): not decidable here; x cancels",
            if bytes { "bytes" } else { "chars" }
        ));
    }
    if a.run_status != "WAITING_FOR_APPROVAL" {
        return Err(format!("run is {}, not waiting for approval", a.run_status));
    }
    let tool = fields::tool_of(a).unwrap_or_default();
    let folded = s.view.iter().filter(|v| v.folded).count();
    let escapes: usize = s.view.iter().map(|v| v.badges.escapes).sum();
    let flagged: usize = s.view.iter().filter(|v| v.badges.any()).count();
    let mut warnings = Vec::new();
    if folded > 0 {
        warnings.push(format!(
            "{folded} field(s) were folded in the view you saw (e expands)"
        ));
    }
    if escapes > 0 {
        warnings.push(format!("{escapes} escape(s) in the values"));
    }
    if flagged > 0 {
        warnings.push(format!(
            "{flagged} field(s) hold bidi, hidden or control text"
        ));
    }
    if s.changed {
        warnings.push("this approval changed while you were reading it".into());
    }
    if super::time::expired(&a.expires_at, now) {
        warnings.push(format!(
            "it {}: deciding now expires it and cancels the run",
            super::time::countdown(&a.expires_at, now)
        ));
    }
    let what = if approve {
        Pending::Approve {
            run: a.run_id.clone(),
            approval: a.id.clone(),
            hash: a.hash.clone(),
        }
    } else {
        Pending::Reject {
            run: a.run_id.clone(),
            approval: a.id.clone(),
            hash: a.hash.clone(),
        }
    };
    Ok(Confirm {
        what,
        lines: vec![
            ("tool".into(), tool),
            ("run".into(), a.run_id.as_bytes().to_vec()),
            ("approval".into(), a.id.as_bytes().to_vec()),
            ("hash".into(), short(&a.hash).as_bytes().to_vec()),
            ("by".into(), cfg.by.clone().into_bytes()),
        ],
        warnings,
        reason: (!approve).then(TextInput::default),
    })
}

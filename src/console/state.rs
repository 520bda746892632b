//! The console's state: the stack of screens, the overlay, the text inputs and what is in
//! flight. Plain data and read-only questions about it; it changes only in `update`.

use std::collections::BTreeSet;

use ratatui::text::Line;

use super::bulk::{BulkRun, Item, Marks, Verb};
use super::data::*;
use super::fields::{ApprovalField, FieldView};
use super::keymap::Keymap;
use super::layout;
use super::nav::ListView;
use super::settings::Settings;
use super::theme::Theme;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Info,
    Ok,
    Error,
}

/// One notice as the message log keeps it: when (Unix seconds), how it read, all of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub at: i64,
    pub level: Level,
    /// The notice as drawn: text, with an id that is not UTF-8 as its stored bytes (the view
    /// escapes them).
    pub text: Vec<u8>,
}

/// What the console says of an MCP proxy's run when asked to resume it (issue 18).
pub const PROXY_COLLECTS: &str = "an MCP proxy's run: the host's next identical call collects an approved request; there is nothing to resume here";

/// What the console says of a run this build cannot resume (issue 15 item 6).
pub const PROGRAM_RESUMES: &str =
    "its own program must resume this run (a run `agent` made: `agent ... --resume`)";

/// How many notices the message log keeps (the oldest go first).
pub const MESSAGES_KEPT: usize = 500;

#[derive(Debug, Clone)]
pub struct QueueScreen {
    pub list: ListView<QueueRow>,
    pub filter: String,
    /// The order and grouping (issue 21; the `sort` action cycles it).
    pub sort: Sort,
}

#[derive(Debug, Clone)]
pub struct RunsScreen {
    pub list: ListView<RunRow>,
    pub filter: String,
    pub status: Option<RunStatus>,
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

impl RunDetailScreen {
    pub fn new(id: Key) -> RunDetailScreen {
        RunDetailScreen {
            id,
            header: None,
            header_pending: None,
            missing: false,
            tab: Tab::Steps,
            steps: ListView::default(),
            events: ListView::default(),
            approvals: ListView::default(),
            calls: ListView::default(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct ApprovalScreen {
    pub id: Key,
    pub row: Option<ApprovalRow>,
    pub pending: Option<u64>,
    pub missing: bool,
    pub fields: Vec<ApprovalField>,
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
    /// The decision page's context (goal, the agent's reason, related work), once read.
    pub context: Option<PageContext>,
    pub context_pending: Option<u64>,
    /// Today's answer of the policy, once the worker asked it.
    pub recheck: Option<Recheck>,
    pub recheck_pending: Option<u64>,
    /// Which untrusted texts carry a warning badge (`goal`, `reason`, `args`).
    pub hostile: Vec<&'static str>,
    /// After the fields were rebuilt around the cursor: its line's distance from the top of
    /// the body, which the next layout restores (so a reload does not move what is read).
    pub keep: Option<usize>,
}

impl ApprovalScreen {
    /// Lines of the laid-out fields before field `i`.
    pub fn lines_before(&self, i: usize) -> usize {
        self.view.iter().take(i).map(|v| v.lines.len()).sum()
    }
}

impl ApprovalScreen {
    pub fn new(id: Key) -> ApprovalScreen {
        ApprovalScreen {
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
            context: None,
            context_pending: None,
            recheck: None,
            recheck_pending: None,
            hostile: Vec::new(),
            keep: None,
        }
    }
}

/// The queue's numbers (issue 21): read once when opened and on `refresh`, not on every
/// change (the read scans every step and approval).
#[derive(Debug, Clone, Default)]
pub struct StatsScreen {
    pub stats: Option<Box<crate::runtime::stats::Stats>>,
    pub pending: Option<u64>,
    /// Why the last read failed.
    pub error: Option<String>,
    pub scroll: usize,
}

#[derive(Debug, Clone, Default)]
pub struct DamagedScreen {
    pub list: ListView<DamagedRow>,
    /// The `/` filter (matched on the shown text, `console::filter`).
    pub filter: String,
}

#[derive(Debug, Clone)]
pub enum Screen {
    Queue(QueueScreen),
    Runs(RunsScreen),
    RunDetail(Box<RunDetailScreen>),
    Approval(Box<ApprovalScreen>),
    Damaged(DamagedScreen),
    Stats(Box<StatsScreen>),
    Help {
        scroll: usize,
    },
    /// The message log (`:messages`): every notice of this session in full, newest first.
    Messages {
        scroll: usize,
    },
}

impl Screen {
    pub fn title(&self) -> &'static str {
        match self {
            Screen::Queue(_) => "queue",
            Screen::Runs(_) => "runs",
            Screen::RunDetail(_) => "run",
            Screen::Approval(_) => "approval",
            Screen::Damaged(_) => "damaged",
            Screen::Stats(_) => "stats",
            Screen::Help { .. } => "help",
            Screen::Messages { .. } => "messages",
        }
    }
}

/// A text input (filter, command line, reason).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TextInput {
    pub text: String,
}

/// What a confirmation will do when accepted.
#[derive(Debug, Clone, PartialEq)]
pub enum Pending {
    /// An answer to the shown approval (deny: the call does not run; the note is the agent's
    /// observation).
    Decide {
        choice: Choice,
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

impl Pending {
    /// A denial with feedback: its note is for the agent, not a reason on record.
    pub fn is_deny(&self) -> bool {
        matches!(
            self,
            Pending::Decide {
                choice: Choice::Deny,
                ..
            }
        )
    }
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

/// A reject, deny or cancel of the marked rows, asked before it is done (issue 21): the rows
/// as read again when it opened, each with why it would be skipped, and the one reason.
#[derive(Debug, Clone)]
pub struct BulkConfirm {
    pub verb: Verb,
    pub items: Vec<Item>,
    pub reason: TextInput,
    /// The first line shown of the list of rows.
    pub scroll: usize,
}

/// What a bulk decision did (or, for a dry run, would do): the rows decided and the rows
/// skipped, each with why.
#[derive(Debug, Clone)]
pub struct BulkResult {
    pub verb: Verb,
    pub dry: bool,
    pub done: Vec<Item>,
    pub skipped: Vec<(Item, Vec<u8>)>,
    pub scroll: usize,
    /// The confirmation a dry run was asked from: shown again when the result closes.
    pub back: Option<Box<BulkConfirm>>,
}

/// One row of the approve table: the approval as read for the table (its hash is the one the
/// approval is bound to) and the arguments it will run with.
#[derive(Debug, Clone)]
pub struct TableRow {
    pub item: Item,
    pub hash: String,
    pub args: Vec<(Vec<u8>, Vec<u8>)>,
    /// The arguments are longer than the table shows: not approved from the table.
    pub cut: bool,
}

/// Approving several marked rows: a table of exactly what each will run, read whole before
/// `enter` approves; leaving it approves nothing.
#[derive(Debug, Clone)]
pub struct ApproveTable {
    pub rows: Vec<TableRow>,
    /// The table laid out at the terminal's width (by `update`, as the approval detail is).
    pub lines: Vec<Line<'static>>,
    pub scroll: usize,
}

#[derive(Debug, Clone)]
pub enum Overlay {
    Confirm(Box<Confirm>),
    Filter(FilterEdit),
    CommandLine(TextInput),
    /// The runs' status filter as a list to pick from (`f`).
    Picker(StatusPicker),
    Bulk(Box<BulkConfirm>),
    BulkResult(Box<BulkResult>),
    ApproveTable(Box<ApproveTable>),
}

/// The `/` filter being typed: the list narrows with every key (`update/filter.rs`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FilterEdit {
    pub input: TextInput,
    /// The filter when `/` was pressed: `esc` puts it back.
    pub before: String,
    /// The filter read in flight (at most one while typing).
    pub inflight: Option<u64>,
    /// The text changed since that read was sent: read again when it comes back.
    pub stale: bool,
}

/// The statuses the picker lists after "all", in this order.
pub const RUN_STATUSES: [RunStatus; 6] = [
    RunStatus::WaitingForApproval,
    RunStatus::Running,
    RunStatus::Interrupted,
    RunStatus::Completed,
    RunStatus::Failed,
    RunStatus::Cancelled,
];

/// The status picker: `None` (all runs) first, then each status; the cursor is an index.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StatusPicker {
    pub cursor: usize,
}

/// The `:` command line's history (this session only, newest last) and where Up/Down are.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CommandHistory {
    pub entries: Vec<String>,
    /// The entry shown (an index into `entries`), `None` while editing a new line.
    pub at: Option<usize>,
    /// The line being typed before Up was pressed, given back past the newest entry.
    pub draft: String,
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
    /// `config.toml`'s `[queue]` settings (age bands, notifications; issue 21).
    pub settings: Settings,
    pub now: i64,
    pub size: (u16, u16),
    /// The header counts; `None` until the first read of them comes back.
    pub counts: Option<Counts>,
    pub counts_pending: Option<u64>,
    /// The database stopped answering (or the last count read failed): the header's counts
    /// are as of the last read, and say so, until a read of them succeeds.
    pub counts_stale: bool,
    pub notice: Option<(Level, Vec<u8>)>,
    /// Every notice shown, in full, oldest first (at most [`MESSAGES_KEPT`]); `:messages`.
    pub messages: Vec<Message>,
    /// Notices dropped from the front of `messages` to keep it bounded.
    pub messages_dropped: u64,
    /// A `:run PREFIX` whose candidates are being read: the read's id and the text typed.
    pub resolving: Option<(u64, Key)>,
    /// Writes and `:verify` in flight: id → what they do (for the progress line).
    pub running: Vec<(u64, String)>,
    pub next_id: u64,
    pub quit: bool,
    /// Set when something visible changed since the last draw.
    pub dirty: bool,
    /// The command line's history (`update/command_line.rs`).
    pub history: CommandHistory,
    /// The queue's marked rows (issue 21), kept by id across reloads and screens.
    pub marks: Marks,
    /// A bulk decision in flight.
    pub bulk: Option<BulkRun>,
}

/// The first 12 characters of a hash, as every screen shows it.
pub fn short(h: &str) -> &str {
    h.get(..12).unwrap_or(h)
}

impl App {
    pub fn new(cfg: AppConfig, keymap: Keymap, theme: Theme, now: i64, size: (u16, u16)) -> App {
        let notice = (!keymap.warnings.is_empty())
            .then(|| (Level::Info, keymap.warnings.join("; ").into_bytes()));
        App {
            stack: vec![Screen::Queue(QueueScreen {
                list: ListView::default(),
                filter: String::new(),
                sort: Sort::default(),
            })],
            overlay: None,
            keymap,
            theme,
            cfg,
            settings: Settings::default(),
            now,
            size,
            counts: None,
            counts_pending: None,
            counts_stale: false,
            messages: notice
                .iter()
                .map(|(level, text)| Message {
                    at: now,
                    level: *level,
                    text: text.clone(),
                })
                .collect(),
            messages_dropped: 0,
            resolving: None,
            notice,
            running: Vec::new(),
            next_id: 1,
            quit: false,
            dirty: true,
            history: CommandHistory::default(),
            marks: Marks::default(),
            bulk: None,
        }
    }

    /// A fresh request id.
    pub(crate) fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// Rows a list shows (see [`layout::list_rows`]).
    pub fn list_rows(&self) -> u16 {
        layout::list_rows(self.size)
    }

    pub fn top(&self) -> &Screen {
        self.stack.last().unwrap_or(&Screen::Help { scroll: 0 })
    }

    /// Whether the top screen shows relative times (the clock ticks only then).
    pub fn shows_clock(&self) -> bool {
        !matches!(self.top(), Screen::Help { .. })
    }

    /// Keeps `notice` in the message log when it is new (a different notice than `before`).
    pub(crate) fn log_notice(&mut self, before: Option<&(Level, Vec<u8>)>) {
        let Some((level, text)) = &self.notice else {
            return;
        };
        if before == self.notice.as_ref() {
            return;
        }
        self.messages.push(Message {
            at: self.now,
            level: *level,
            text: text.clone(),
        });
        if self.messages.len() > MESSAGES_KEPT {
            let extra = self.messages.len() - MESSAGES_KEPT;
            self.messages.drain(..extra);
            self.messages_dropped += extra as u64;
        }
    }
}

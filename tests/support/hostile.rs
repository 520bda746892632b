//! The hostile corpus of untrusted identifiers and texts shared by the command and console
//! tests: every id here is written into a database and must come back exact (a printed command
//! run by `sh`) or be refused with a reason, never run code or look like another.

/// Run ids a caller of agentrt may choose. Each is also used as the stem of its approval id.
pub const IDS: &[&str] = &[
    "t-4711'$(touch X)'",
    "t-4711;touch${IFS}X",
    "t-4711`touch X`",
    "t $(touch X) \"q\" \\ %s %% %n ~ * ? [a] #c !!",
    "t-4711\u{1b}]0;pwned\u{7}\u{1b}[2J",
    "t\u{202e}1174-t",
    "\u{43e}rd_1004",
    "ord_10\u{1161}\u{11a8}04",
    "t\ttab\rcr",
    "t-\u{9b}2J\u{85}",
    "t\nnewline-inside",
    "\\x1b \\u{202e}",
    "'",
    "\u{1fae9}\u{1fae9}",
    // Untypable: the printed line must say so, not print a command.
    "ends-with-newline\n",
    "-rf",
    "nul\0byte",
];

/// A directory name for the database: quotes, a command substitution, a space, non-ASCII and
/// a byte that is not UTF-8.
pub const DIR: &[u8] = b"db 'q' $(touch X) `touch Y` \xc3\xa9 \xff";

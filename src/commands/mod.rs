//! The operator commands.

/// Entry point of the binary; returns the process exit code.
pub fn main_entry() -> i32 {
    eprintln!("countersign: no commands are built yet");
    2
}

//! Safe text: the one module through which every untrusted string passes before it is shown.

//! TEMPORARY (runtime branch): the store helper's error type, copied until branch `store` is
//! merged; the merge replaces this file with the real store.

mod error;
pub use error::*;

//! The interactive review console.

// Must NOT compile without `testing`: the operator's decision with a test hook inside its
// transaction.
pub use countersign::runtime::operator::decide_hooked;

// Must NOT compile, with or without `testing`: marking a lease lost from outside the runtime.
pub fn probe(lease: &countersign::runtime::driver::lease::Lease) {
    lease.mark_lost();
}

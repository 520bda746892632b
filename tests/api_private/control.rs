// Must compile against the library without the `testing` feature: the public API.
pub fn probe(path: &std::path::Path) -> Result<(), countersign::runtime::store::StoreError> {
    let store = countersign::runtime::store::Store::open(path)?;
    let _ = countersign::runtime::driver::lease::Lease::inactive("run", "owner").ok();
    drop(store);
    Ok(())
}

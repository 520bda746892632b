// Must NOT compile without `testing`: a raw transaction on the store.
pub fn probe(store: &countersign::runtime::store::Store) {
    let _ = store.write(|_tx| Ok::<(), countersign::runtime::store::StoreError>(()));
}

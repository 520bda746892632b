// Must NOT compile without `testing`: arbitrary SQL inside a store transaction.
pub fn probe(tx: &countersign::runtime::store::Tx<'_>) {
    let _ = tx.conn();
}

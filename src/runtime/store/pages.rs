//! placeholder
pub const MAX_PAGE_TEXT: i64 = 65536;
pub struct Page<T> {
    pub items: Vec<T>,
    pub total: i64,
}

//! The queue's orders (issue 21): by age (the queue's own order, oldest first), by tool, by
//! target and by amount. Target and amount are the consumer's facts (decision 0050), read by
//! the same lists of keys the decision page reads (`facts`). A row without the key sorts last
//! and the queue says so in its group column. Pure; the store sorts (`QueueOrder`).

use super::facts::{AMOUNT_KEYS, TARGET_KEYS};
use crate::runtime::store::QueueOrder;

/// How the queue is sorted and grouped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Sort {
    #[default]
    Age,
    Tool,
    Target,
    Amount,
}

impl Sort {
    /// Every order, in the order the sort key cycles through them.
    pub const ALL: [Sort; 4] = [Sort::Age, Sort::Tool, Sort::Target, Sort::Amount];

    /// The next order (the `sort` action cycles).
    pub fn next(self) -> Sort {
        let i = Sort::ALL.iter().position(|s| *s == self).unwrap_or(0);
        Sort::ALL[(i + 1) % Sort::ALL.len()]
    }

    /// What the queue's title says of it.
    pub fn label(self) -> &'static str {
        match self {
            Sort::Age => "oldest first",
            Sort::Tool => "by tool, A-Z",
            Sort::Target => "by target, A-Z",
            Sort::Amount => "by amount, largest first",
        }
    }

    /// The title of the group column (none in the queue's own order, and by tool, where the
    /// TOOL column is the group).
    pub fn column(self) -> Option<&'static str> {
        match self {
            Sort::Age | Sort::Tool => None,
            Sort::Target => Some("TARGET"),
            Sort::Amount => Some("AMOUNT"),
        }
    }

    /// The store's order for it.
    pub fn order(self) -> QueueOrder {
        let keys = |ks: &[&[u8]]| {
            ks.iter()
                .map(|k| String::from_utf8_lossy(k).into_owned())
                .collect()
        };
        match self {
            Sort::Age => QueueOrder::Age,
            Sort::Tool => QueueOrder::Tool,
            Sort::Target => QueueOrder::Member(keys(&TARGET_KEYS)),
            Sort::Amount => QueueOrder::Amount(keys(&AMOUNT_KEYS)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sort_key_cycles_through_every_order_and_back() {
        let mut s = Sort::default();
        let mut seen = vec![s];
        for _ in 0..Sort::ALL.len() {
            s = s.next();
            seen.push(s);
        }
        assert_eq!(
            seen,
            [Sort::Age, Sort::Tool, Sort::Target, Sort::Amount, Sort::Age]
        );
        assert_eq!(
            Sort::Target.order(),
            QueueOrder::Member(vec!["target".into(), "order".into()])
        );
    }
}

//! An order as the backend stores it: the record the tool contracts judge state against.
//! A file of its own, which imports nothing, so that the contracts (`tools.rs`) and the
//! backend that stores orders (`backend.rs`) never import each other.

/// An order's shipping state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OrderStatus {
    Processing,
    Shipped,
    Delivered,
    /// A status this build does not know (kept, never acted on).
    Other,
}

impl OrderStatus {
    pub(crate) fn parse(s: &str) -> OrderStatus {
        match s {
            "processing" => OrderStatus::Processing,
            "shipped" => OrderStatus::Shipped,
            "delivered" => OrderStatus::Delivered,
            _ => OrderStatus::Other,
        }
    }
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            OrderStatus::Processing => "processing",
            OrderStatus::Shipped => "shipped",
            OrderStatus::Delivered => "delivered",
            OrderStatus::Other => "other",
        }
    }
}

/// One order row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Order {
    pub id: String,
    pub customer: String,
    pub total_cents: i64,
    pub refunded_cents: i64,
    pub status: OrderStatus,
    pub email: String,
    pub address: String,
}

impl Order {
    /// What may still be refunded.
    pub fn refundable_cents(&self) -> i64 {
        (self.total_cents - self.refunded_cents).max(0)
    }
}

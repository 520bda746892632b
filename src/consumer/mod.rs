//! The example consumer: an order-support assistant whose tools refund orders.

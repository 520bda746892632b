//! The example consumer: an order-support assistant whose tools read orders, refund them,
//! change their shipping address and email their status. It shows what a consumer of the
//! runtime declares: typed tool contracts, a dispatcher that checks identity, arguments,
//! ownership, replay and state, and a consequence policy that decides what waits for a person.

pub mod adapter;
pub mod backend;
pub mod crash;
pub mod demo;
pub mod dispatch;
pub mod orders;
pub mod policy;
pub mod scenarios;
pub mod session;
pub mod tools;

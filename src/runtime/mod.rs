//! The embedded runtime: agentrt's run database and the guarantees that make decisions binding.

//! Shared helpers for the fault scenarios in `tests/`.

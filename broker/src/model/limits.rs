//! Every limit the broker enforces, named with its unit last, in one place.

//! Unit tests of the node's loops' small parts.

use super::*;

#[test]
fn an_episode_begins_once_and_ends_at_the_first_pass_without_it() {
    let a = TopicPartition::new("a", 0);
    let b = TopicPartition::new("b", 0);
    let mut episodes = Episodes::default();
    assert!(episodes.begins(&a));
    assert!(episodes.begins(&b));
    episodes.pass();
    // Found again: the same episodes go on.
    assert!(!episodes.begins(&a));
    assert!(!episodes.begins(&b));
    episodes.pass();
    // `b` is not found in this pass: its episode ends, and the next begins anew.
    assert!(!episodes.begins(&a));
    episodes.pass();
    assert!(!episodes.begins(&a));
    assert!(episodes.begins(&b));
}

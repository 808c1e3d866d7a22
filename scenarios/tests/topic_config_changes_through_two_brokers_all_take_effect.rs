//! Incremental changes of different settings of one topic, sent at the same instant through
//! two different brokers, all take effect: the controller applies each to the overrides it
//! holds, not to the copy the broker that took the request had, which lacks the other change.
//!
//! Three nodes; a topic `t`. Round one sets `retention.ms` through one broker and
//! `segment.ms` through another; round two appends `compact` to `cleanup.policy` through one
//! and sets `retention.bytes` through the other. After each round both requests must succeed
//! and the committed overrides, and every broker's copy of them, must hold every change.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use weir_scenarios::{ensure, for_each_seed};
use weir_sim::client::{Client, ClientError};
use weir_sim::workload::cluster::{Cluster, ClusterSpec};

/// How long a round's requests, and the metadata after them, may take.
const ROUND_BOUND: Duration = Duration::from_secs(30);

/// One change: a setting and its new value, or (for `cleanup.policy`) an item to append.
type Change = (&'static str, &'static str);

fn scenario(seed: u64) -> Result<(), String> {
    let spec = ClusterSpec::combined(3);
    let mut c = Cluster::new_settled(seed, spec)?;
    c.create_topic(0, "t", 1).map_err(|e| e.to_string())?;
    let known = |c: &Cluster| {
        (0..spec.nodes).all(|ix| c.broker(ix).is_some_and(|b| b.topic_config("t").is_some()))
    };
    ensure(c.run_until(ROUND_BOUND, known), || "not every broker knows the topic".to_owned())?;
    let first = (seed % 3) as usize;
    let second = (first + 1 + (seed / 3 % 2) as usize) % 3;
    let mut expected: BTreeMap<String, String> = c
        .committed_image()
        .and_then(|i| i.topic("t").map(|t| t.configs.clone()))
        .ok_or("no topic")?;
    let rounds: [[Change; 2]; 2] = [
        [("retention.ms", "5000"), ("segment.ms", "7000")],
        [("cleanup.policy", "compact"), ("retention.bytes", "1048576")],
    ];
    for (round, changes) in rounds.iter().enumerate() {
        let outcomes: Arc<Mutex<Vec<Result<(), ClientError>>>> = Arc::default();
        for (via, &(name, value)) in [first, second].into_iter().zip(changes) {
            let addr = c.addr(via);
            let out = Arc::clone(&outcomes);
            let _task = c.sim.spawn(c.client, "config-change", move |env| async move {
                let mut client = Client::new(env, addr, "operator");
                let outcome = match name {
                    "cleanup.policy" => {
                        client.append_topic_config("t", (name, value), ROUND_BOUND).await
                    }
                    _ => client.set_topic_config("t", (name, value), ROUND_BOUND).await,
                };
                out.lock().unwrap_or_else(|p| p.into_inner()).push(outcome);
            });
            let now = match name {
                "cleanup.policy" => "delete,compact",
                _ => value,
            };
            expected.insert(name.to_owned(), now.to_owned());
        }
        let answered = |_: &Cluster| outcomes.lock().map(|o| o.len() == 2).unwrap_or(false);
        ensure(c.run_until(ROUND_BOUND, answered), || format!("round {round}: not answered"))?;
        let answers: Vec<_> = outcomes.lock().map(|o| o.clone()).unwrap_or_default();
        ensure(answers.iter().all(Result::is_ok), || format!("round {round}: {answers:?}"))?;
        let committed =
            |c: &Cluster| c.committed_image().and_then(|i| i.topic("t").map(|t| t.configs.clone()));
        let all_in = |c: &Cluster| committed(c).as_ref() == Some(&expected);
        ensure(c.run_until(ROUND_BOUND, all_in), || {
            format!("round {round}: committed {:?}, not {expected:?}", committed(&c))
        })?;
        let copies_in = |c: &Cluster| {
            (0..spec.nodes).all(|ix| {
                c.broker(ix)
                    .and_then(|b| b.topic_config("t"))
                    .is_some_and(|cfg| cfg.overrides() == &expected)
            })
        };
        ensure(c.run_until(ROUND_BOUND, copies_in), || {
            format!("round {round}: a broker's copy lacks a change of {expected:?}")
        })?;
    }
    c.watch_verdict()
}

#[test]
fn topic_config_changes_through_two_brokers_all_take_effect() {
    for_each_seed("topic_config_changes_through_two_brokers_all_take_effect", 0..8, scenario);
}

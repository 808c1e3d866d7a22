//! Scenario: InitProducerId and FindCoordinator answer as Kafka's do where a producer would
//! notice, on a 3-node cluster.
//!
//! - A broker cut off from the controller cannot get a block of producer ids. Its answer is
//!   COORDINATOR_LOAD_IN_PROGRESS, which clients retry, as Kafka's: the Java producer answers
//!   COORDINATOR_NOT_AVAILABLE by looking up a transaction coordinator, which a producer
//!   without a transactional id has no key for. Requests waiting behind the call that failed
//!   fail with it: three at once are all answered within one call's timeout, not one timeout
//!   after another. Once the broker reaches the controller again, ids are given.
//! - Transactions are not offered, and a transactional producer is told so at once: a
//!   transactional id gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED, which clients take as fatal,
//!   from InitProducerId and from FindCoordinator (single and batched), instead of a retriable
//!   error a producer retries until its `max.block.ms`. A key type Kafka does not know is
//!   INVALID_REQUEST.
//! - A producer id without an epoch (or the reverse) is INVALID_REQUEST.

use std::time::Duration;

use kafka_protocol::messages::{
    FindCoordinatorRequest, InitProducerIdRequest, ProducerId, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use weir::producer_ids::ALLOCATE_TIMEOUT;
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::client::Client;
use weir_sim::workload::cluster::{Cluster, ClusterSpec};

/// COORDINATOR_LOAD_IN_PROGRESS.
const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
/// INVALID_REQUEST.
const INVALID_REQUEST: i16 = 42;
/// TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;
/// InitProducerId's version here.
const INIT_PRODUCER_ID: i16 = 4;
/// FindCoordinator with one key, and with a batch of keys.
const FIND_ONE: i16 = 3;
const FIND_MANY: i16 = 4;
const CALL_LIMIT: Duration = Duration::from_secs(60);

/// InitProducerId with `transactional_id`, `producer_id` and `epoch`: its error code.
async fn init(
    client: &mut Client,
    transactional_id: Option<&str>,
    producer_id: i64,
    epoch: i16,
) -> Result<i16, String> {
    let mut request = InitProducerIdRequest::default();
    request.transactional_id =
        transactional_id.map(|t| TransactionalId(StrBytes::from_string(t.to_owned())));
    request.transaction_timeout_ms = 60_000;
    request.producer_id = ProducerId(producer_id);
    request.producer_epoch = epoch;
    let answer = client.call(&request, INIT_PRODUCER_ID, CALL_LIMIT).await;
    answer.map(|a| a.error_code).map_err(|e| format!("InitProducerId: {e}"))
}

/// FindCoordinator of `key` of `key_type` at `version`: its error code.
async fn find(client: &mut Client, key_type: i8, version: i16) -> Result<i16, String> {
    let mut request = FindCoordinatorRequest::default();
    request.key_type = key_type;
    let key = StrBytes::from_static_str("a-transactional-id");
    if version < FIND_MANY {
        request.key = key;
    } else {
        request.coordinator_keys = vec![key];
    }
    let answer = client.call(&request, version, CALL_LIMIT).await;
    let answer = answer.map_err(|e| format!("FindCoordinator: {e}"))?;
    Ok(if version < FIND_MANY {
        answer.error_code
    } else {
        answer.coordinators.first().map_or(-1, |c| c.error_code)
    })
}

fn scenario(seed: u64) -> Result<(), String> {
    let mut c = Cluster::new_settled(seed, ClusterSpec::combined(3))?;
    let active = c.active_controller().ok_or("no active controller")?;
    let cut = (active + 1) % 3;
    let others: Vec<_> = (0..3).filter(|&ix| ix != cut).map(|ix| c.nodes[ix]).collect();
    c.sim.partition(&[c.nodes[cut]], &others);

    // Three producers at once at the broker cut off.
    let addr = c.addr(cut);
    let answers = c
        .client_call(Duration::from_secs(120), move |env| async move {
            let start = env.clock.now();
            let one = |name: &'static str| {
                let (env, clock) = (env.clone(), env.clock.clone());
                async move {
                    let mut client = Client::new(env, addr, name);
                    let code = init(&mut client, None, -1, -1).await;
                    (code, clock.now().saturating_duration_since(start))
                }
            };
            let (a, b, d) = tokio::join!(one("p1"), one("p2"), one("p3"));
            vec![a, b, d]
        })
        .ok_or("InitProducerId got no answers")?;
    for (code, took) in &answers {
        ensure(code.as_ref() == Ok(&COORDINATOR_LOAD_IN_PROGRESS), || {
            format!("InitProducerId without a controller: {answers:?}")
        })?;
        ensure(*took < ALLOCATE_TIMEOUT + Duration::from_secs(2), || {
            format!("InitProducerId answered after {took:?}: {answers:?}")
        })?;
    }

    c.sim.heal_all();
    let mut given = false;
    for _ in 0..30 {
        let code = c
            .client_call(CALL_LIMIT, move |env| async move {
                init(&mut Client::new(env, addr, "p4"), None, -1, -1).await
            })
            .ok_or("no answer")??;
        if code == 0 {
            given = true;
            break;
        }
        c.run_for(Duration::from_secs(1));
    }
    ensure(given, || "no producer id once the controller was reachable again".to_owned())?;

    // Transactions, half-named producers, and key types.
    let checks = c
        .client_call(CALL_LIMIT * 2, move |env| async move {
            let mut client = Client::new(env, addr, "checks");
            Ok::<_, String>([
                ("transactional id", init(&mut client, Some("tx"), -1, -1).await?),
                ("id without epoch", init(&mut client, None, 5, -1).await?),
                ("epoch without id", init(&mut client, None, -1, 3).await?),
                ("transaction key", find(&mut client, 1, FIND_ONE).await?),
                ("transaction keys", find(&mut client, 1, FIND_MANY).await?),
                ("unknown key type", find(&mut client, 9, FIND_MANY).await?),
            ])
        })
        .ok_or("no answers")??;
    let expected = [
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        INVALID_REQUEST,
        INVALID_REQUEST,
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        INVALID_REQUEST,
    ];
    for ((what, got), want) in checks.iter().zip(expected) {
        ensure(*got == want, || format!("{what}: {got}, not {want}"))?;
    }
    c.watch_verdict()
}

#[test]
fn init_producer_id_answers_as_kafka() {
    for_each_seed("init_producer_id_answers_as_kafka", 0..3, scenario);
}

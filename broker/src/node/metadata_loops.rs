//! The loops that keep a broker in step with the cluster's metadata: one opens and removes
//! partitions as the image changes, the other asks the controller for the ISR changes that this
//! broker's followers' progress calls for, and reports logs that are offline, damaged or out of
//! room.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use super::Broker;
use crate::controller::logic::ControllerError;
use crate::controller::membership::Membership;
use crate::controller::rpc::{LogReports, Request, Response};
use crate::fetcher;
use crate::log::error::Offline;
use crate::model::TopicPartition;
use crate::partition::Partition;
use crate::partition::replica::Role as ReplicaRole;
use crate::topics::OFFSETS_TOPIC;

/// How often a leader looks for ISR changes to ask for.
pub const ISR_CHECK_INTERVAL: Duration = Duration::from_millis(200);
/// How long an ISR change may take to commit and come back.
pub const ISR_CHANGE_TIMEOUT: Duration = Duration::from_secs(5);
/// Pause before reconciling again after a pass failed, or left a partition unopened.
pub const RECONCILE_RETRY: Duration = Duration::from_secs(1);

/// Partitions in a condition that is warned of once per episode: from the first pass of a loop
/// that finds a partition in it to the first pass that does not.
#[derive(Default)]
struct Episodes {
    /// In the condition at the last pass.
    before: BTreeSet<TopicPartition>,
    /// Found in it in this pass so far.
    now: BTreeSet<TopicPartition>,
}

impl Episodes {
    /// Notes `tp` found in the condition in this pass; whether its episode begins here.
    fn begins(&mut self, tp: &TopicPartition) -> bool {
        self.now.insert(tp.clone());
        !self.before.contains(tp)
    }

    /// Ends a pass: a partition not found in it has ended its episode.
    fn pass(&mut self) {
        self.before = std::mem::take(&mut self.now);
    }
}

/// Asks the controller, for every partition this broker leads, for the ISR changes its
/// followers' progress calls for (a lagging follower out, a caught-up one in), one change per
/// partition in flight; the committed change comes back through the image.
pub(super) async fn isr_loop(broker: Weak<Broker>, membership: Arc<Membership>) {
    // Warned of once each time: partitions reported out of room, and damaged ones handed over.
    let mut short = Episodes::default();
    let mut handing = Episodes::default();
    loop {
        let Some(b) = broker.upgrade() else { return };
        let clock = Arc::clone(&b.env.clock);
        let now = clock.now();
        let mut asks = Vec::new();
        let mut offline = Vec::new();
        let mut damaged = Vec::new();
        let mut full = Vec::new();
        let image = membership.image();
        let me = membership.node();
        // Whether another live in-sync replica could lead the partition.
        let others = |topic: &str, index: i32| {
            image
                .partition(topic, index)
                .is_some_and(|p| p.isr.iter().any(|&r| r != me && image.is_live(r)))
        };
        for partition in b.partitions() {
            let index = partition.tp.partition.0;
            if partition.log.offline().is_some_and(|o| o != Offline::Closed) {
                offline.push((partition.topic_id, index));
            } else if let Some(at) = partition.damage_while_leading()
                && others(&partition.tp.topic, index)
            {
                // Damage in the log led here: another in-sync replica's copy serves it.
                if handing.begins(&partition.tp) {
                    tracing::warn!(partition = %partition.tp, %at, "damaged log: handing over leadership");
                }
                offline.push((partition.topic_id, index));
            } else if partition.lasting_damage().is_some() {
                damaged.push((partition.topic_id, index));
            }
            if partition.log.refused_for_room() {
                // Writes are refused here for lack of room (disk space, or descriptors): the
                // controller hands them to another live in-sync replica, if there is one, as
                // Kafka's does for a failed log directory. This one leaves the ISR, and is let
                // back in once it no longer reports it.
                if short.begins(&partition.tp) {
                    tracing::warn!(partition = %partition.tp, "out of room for writes: reported to the controller");
                }
                full.push((partition.topic_id, index));
            }
            if let Some((epoch, proposal)) = partition.isr_proposal(now) {
                asks.push((partition, epoch, proposal));
            }
        }
        // A partition that cannot open here is offline too, where another in-sync replica
        // can lead it: reported with none, it would be left without a leader even once it
        // opens here.
        for (tp, topic_id) in b.catalog.unopened() {
            if others(&tp.topic, tp.partition.0) {
                offline.push((topic_id, tp.partition.0));
            }
        }
        membership.set_log_reports(LogReports { offline, damaged, full });
        short.pass();
        handing.pass();
        drop(b);
        for (partition, epoch, proposal) in asks {
            let request = Request::AlterPartition {
                broker_id: membership.node(),
                incarnation: membership.incarnation(),
                topic_id: partition.topic_id,
                partition: partition.tp.partition.0,
                leader_epoch: epoch.0,
                partition_epoch: proposal.partition_epoch,
                isr: proposal.isr.iter().copied().collect(),
                joining: proposal.joining.clone(),
            };
            tracing::info!(partition = %partition.tp, isr = ?proposal.isr, "asking for an ISR change");
            // The change stays in flight — a joining member still bounds the high watermark —
            // until the image shows it or something newer: a commit this broker has not applied
            // yet is as real as one it has (the controller may already elect from it). Only a
            // refusal on the controller's current state ends it early; an unanswered call is
            // asked again later.
            match membership.call(&request, ISR_CHANGE_TIMEOUT).await {
                Ok(Response::Done { .. }) => {}
                Ok(Response::Error { error: ControllerError::IneligibleReplica(why), .. }) => {
                    tracing::info!(partition = %partition.tp, "ISR change refused: {why}");
                    partition.isr_proposal_refused();
                }
                Ok(other) => {
                    tracing::info!(partition = %partition.tp, "ISR change not made: {other:?}")
                }
                Err(e) => tracing::info!(partition = %partition.tp, "ISR change failed: {e}"),
            }
        }
        clock.sleep(ISR_CHECK_INTERVAL).await;
    }
}

/// Follows the membership's image: opens and removes partitions, starts loading the group state
/// of offsets partitions as they open (see [`crate::groups::Groups::lead_partitions`]), and
/// records how far it got.
///
/// Nothing is reconciled before the image has caught up with the controller and holds this
/// run's registration ([`Membership::caught_up`]), as a Kafka broker publishes no image before
/// its metadata log has caught up. A restarted broker may first be handed an image older than
/// the one it acted on before (its local controller's, or a deposed controller's): one where
/// it still leads a partition whose ISR has since grown. Taking the lead there, it computed the
/// high watermark over the old, smaller ISR, moved it past what the grown ISR held, and served
/// and acknowledged records that a member of the grown ISR lacked: elected next, that member
/// wrote other records over them.
pub(super) async fn reconcile_loop(broker: Weak<Broker>, membership: Arc<Membership>) {
    // Whether the image has been safe to act on in this run; once it has, every later one is.
    let mut safe = false;
    let mut strays_removed = false;
    // Whether some partition failed to open in the last pass.
    let mut open_failed = false;
    loop {
        let notified = membership.changed.notified();
        let mut notified = std::pin::pin!(notified);
        notified.as_mut().enable();
        let Some(b) = broker.upgrade() else { return };
        let image = membership.image();
        b.groups.observe_topics(&image);
        // Asked of the image in hand: a newer one applied meanwhile must not vouch for it.
        let caught_up = membership.caught_up_in(&image);
        safe |= caught_up;
        if safe
            && (image.offset > b.reconciled.load(Ordering::Acquire)
                || !strays_removed
                || open_failed)
        {
            let remove_strays = !strays_removed && caught_up;
            match b.catalog.reconcile(&image, b.config.node_id, remove_strays).await {
                Ok(done) => {
                    open_failed = done.open_failed;
                    strays_removed |= remove_strays && !open_failed;
                    for (partition, leader, epoch) in done.to_follow {
                        let fetcher =
                            fetcher::follow(Weak::clone(&broker), partition, leader, epoch);
                        b.env.spawn("replica-fetcher", fetcher);
                    }
                    // After every pass, not only those that changed a role here: a pass that
                    // failed midway may have changed one (see `Groups::lead_partitions`, which
                    // does nothing where nothing changed).
                    if let Some(topic) = b.catalog.get(OFFSETS_TOPIC) {
                        let led: Vec<Arc<Partition>> = topic
                            .local_partitions()
                            .into_iter()
                            .filter(|p| matches!(p.role(), ReplicaRole::Leader { .. }))
                            .collect();
                        b.groups.lead_partitions(topic, led);
                    }
                    b.reconciled.fetch_max(image.offset, Ordering::AcqRel);
                    b.reconciled_changed.notify_waiters();
                    b.appended.notify_waiters();
                    if open_failed {
                        // The partitions that opened serve; the others are tried again soon.
                        let clock = Arc::clone(&b.env.clock);
                        drop(b);
                        clock.sleep(RECONCILE_RETRY).await;
                        continue;
                    }
                }
                Err(e) => {
                    tracing::error!("reconciling partitions with the metadata failed: {e}");
                    let clock = Arc::clone(&b.env.clock);
                    drop(b);
                    clock.sleep(RECONCILE_RETRY).await;
                    continue;
                }
            }
        }
        drop(b);
        notified.await;
    }
}

#[cfg(test)]
mod tests {
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
}

//! The catalog: the partitions this broker hosts, opened and closed to follow the committed
//! metadata image. Topics are created, changed and deleted by the controller; the catalog
//! only reconciles: it opens the partitions assigned to this node, adopts their leader
//! epochs and configurations, and removes the data of topics and partitions that are gone.
//!
//! Each partition folder holds a `partition.metadata` checkpoint with its topic's id, so a
//! folder left by a deleted topic is never mistaken for a new topic of the same name.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use crate::config::{BrokerConfig, TopicConfig};
use crate::controller::image::{MetadataImage, TopicImage};
use crate::io::Env;
use crate::log::checkpoint;
use crate::model::{LeaderEpoch, TopicId, TopicPartition};
use crate::partition::replica::{Committed, Transition};
use crate::partition::{Partition, PartitionOpenError};
use crate::replication::Assignment;

/// Most partitions one topic may have (a guard against absurd requests).
pub const TOPIC_PARTITIONS_MAX: i32 = 10_000;
/// The file in each partition folder naming its topic id.
pub const PARTITION_METADATA_FILE: &str = "partition.metadata";
const PARTITION_METADATA_KIND: u8 = 12;

/// A topic and the partitions of it this broker hosts.
pub struct Topic {
    /// The name.
    pub name: String,
    /// The stable id.
    pub id: TopicId,
    /// Its configuration.
    pub config: Mutex<TopicConfig>,
    /// The partitions hosted here, by index.
    pub partitions: RwLock<BTreeMap<i32, Arc<Partition>>>,
    /// How many partitions the topic has in the cluster.
    count: AtomicI32,
    /// Whether it is internal (`__consumer_offsets`).
    pub internal: bool,
}

impl Topic {
    /// The partition at `index`, if this broker hosts it.
    pub fn partition(&self, index: i32) -> Option<Arc<Partition>> {
        self.partitions.read().unwrap_or_else(|p| p.into_inner()).get(&index).cloned()
    }

    /// The partitions hosted here.
    pub fn local_partitions(&self) -> Vec<Arc<Partition>> {
        self.partitions.read().unwrap_or_else(|p| p.into_inner()).values().cloned().collect()
    }

    /// How many partitions the topic has in the cluster.
    pub fn partition_count(&self) -> i32 {
        self.count.load(Ordering::Acquire)
    }

    /// A copy of its configuration.
    pub fn config(&self) -> TopicConfig {
        self.config.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// Why the catalog could not host a partition.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// A partition could not be opened.
    #[error("opening {tp}: {source}")]
    Open {
        /// The partition.
        tp: TopicPartition,
        /// The cause.
        source: PartitionOpenError,
    },
    /// The disk failed.
    #[error("storage: {0}")]
    Io(#[from] std::io::Error),
}

/// What one reconciliation did.
#[derive(Default)]
pub struct Reconciled {
    /// Partitions opened.
    pub opened: Vec<Arc<Partition>>,
    /// Partitions this broker now follows in a new leader epoch: each needs a fetcher.
    pub to_follow: Vec<(Arc<Partition>, i32, LeaderEpoch)>,
    /// Whether some partition assigned here failed to open (see [`Catalog::unopened`]). The
    /// others were reconciled all the same; those are to be tried again.
    pub open_failed: bool,
}

/// The partitions of this broker.
pub struct Catalog {
    env: Env,
    config: BrokerConfig,
    topics: RwLock<BTreeMap<String, Arc<Topic>>>,
    /// Serialises reconciliation (each does I/O).
    changes: tokio::sync::Mutex<()>,
    appended: Arc<tokio::sync::Notify>,
    /// Partitions assigned here that the last reconciliation could not open.
    unopened: Mutex<Vec<(TopicPartition, TopicId)>>,
}

fn partition_dir(tp: &TopicPartition) -> PathBuf {
    PathBuf::from(tp.dir_name())
}

fn looks_like_partition(name: &str) -> bool {
    name.rsplit_once('-').is_some_and(|(_, p)| p.parse::<i32>().is_ok())
}

impl Catalog {
    /// An empty catalog; partitions open as the metadata image assigns them.
    pub fn new(env: Env, config: BrokerConfig, appended: Arc<tokio::sync::Notify>) -> Catalog {
        Catalog {
            env,
            config,
            topics: RwLock::new(BTreeMap::new()),
            changes: tokio::sync::Mutex::new(()),
            unopened: Mutex::new(Vec::new()),
            appended,
        }
    }

    /// Every topic with partitions here, by name.
    pub fn all(&self) -> Vec<Arc<Topic>> {
        self.topics.read().unwrap_or_else(|p| p.into_inner()).values().cloned().collect()
    }

    /// The topic called `name`.
    pub fn get(&self, name: &str) -> Option<Arc<Topic>> {
        self.topics.read().unwrap_or_else(|p| p.into_inner()).get(name).cloned()
    }

    /// The topic with id `id`.
    pub fn by_id(&self, id: TopicId) -> Option<Arc<Topic>> {
        self.topics.read().unwrap_or_else(|p| p.into_inner()).values().find(|t| t.id == id).cloned()
    }

    /// The partition `index` of topic `name`, if hosted here.
    pub fn partition(&self, name: &str, index: i32) -> Option<Arc<Partition>> {
        self.get(name)?.partition(index)
    }

    /// Every partition hosted here.
    pub fn partitions(&self) -> Vec<Arc<Partition>> {
        self.all().iter().flat_map(|t| t.local_partitions()).collect()
    }

    /// Brings the hosted partitions in line with `image` for node `node`: opens assigned
    /// partitions, adopts leader epochs and configurations, and removes the data of topics and
    /// partitions no longer assigned here, and gives each hosted partition its replication
    /// role. With `remove_strays` (the image is known complete), also removes partition folders
    /// that nothing in the image owns.
    pub async fn reconcile(
        &self,
        image: &MetadataImage,
        node: i32,
        remove_strays: bool,
    ) -> Result<Reconciled, CatalogError> {
        let _changes = self.changes.lock().await;
        // Topics gone from the image, or recreated under a new id.
        for topic in self.all() {
            if image.topic(&topic.name).is_none_or(|t| t.id != topic.id) {
                self.remove_topic(&topic).await?;
            }
        }
        let mut done = Reconciled::default();
        let mut unopened = Vec::new();
        let lag = std::time::Duration::from_millis(self.config.replica_lag_time_max_ms);
        let now = self.env.clock.now();
        for t in image.topics.values() {
            let mine: BTreeSet<i32> = t
                .partitions
                .values()
                .filter(|p| p.replicas.contains(&node))
                .map(|p| p.partition)
                .collect();
            let topic = match self.get(&t.name) {
                Some(topic) => topic,
                None if mine.is_empty() => continue,
                None => self.insert_topic(t),
            };
            topic.count.store(t.partitions.len() as i32, Ordering::Release);
            let config = self.topic_config(t);
            let config_changed = {
                let mut current = topic.config.lock().unwrap_or_else(|p| p.into_inner());
                let changed = current.overrides() != config.overrides();
                *current = config.clone();
                changed
            };
            for partition in topic.local_partitions() {
                let index = partition.tp.partition.0;
                if !mine.contains(&index) {
                    topic.partitions.write().unwrap_or_else(|p| p.into_inner()).remove(&index);
                    self.remove_partition(&partition).await?;
                } else if config_changed {
                    partition.log.set_config(config.log_config());
                }
            }
            for index in &mine {
                let partition = match topic.partition(*index) {
                    Some(p) => p,
                    None => {
                        // A partition that cannot open (a damaged file, a failing read) must
                        // not keep the others from opening and serving.
                        let p = match self.open_partition(&t.name, t.id, &config, *index).await {
                            Ok(p) => p,
                            Err(e) => {
                                tracing::error!("{e}; it is tried again, the others go on");
                                unopened.push((TopicPartition::new(&t.name, *index), t.id));
                                continue;
                            }
                        };
                        topic
                            .partitions
                            .write()
                            .unwrap_or_else(|p| p.into_inner())
                            .insert(*index, Arc::clone(&p));
                        done.opened.push(Arc::clone(&p));
                        p
                    }
                };
                let Some(record) = t.partitions.get(index) else { continue };
                let committed = Committed {
                    leader: record.leader,
                    leader_epoch: LeaderEpoch(record.leader_epoch),
                    assignment: Assignment {
                        replicas: &record.replicas,
                        isr: &record.isr,
                        partition_epoch: record.partition_epoch,
                        epoch_start: partition.log.log_end_offset(),
                    },
                };
                let min_isr = usize::try_from(config.min_insync_replicas()).unwrap_or(1);
                let transition = partition.apply_committed(node, committed, min_isr, lag, now);
                if transition != Transition::Unchanged {
                    tracing::info!(
                        node,
                        partition = %partition.tp,
                        ?transition,
                        log_end = partition.log.log_end_offset().0,
                        high_watermark = partition.high_watermark().0,
                        isr = ?record.isr,
                        "replica role"
                    );
                }
                match transition {
                    Transition::Unchanged => {}
                    Transition::BecameLeader(epoch) => {
                        // Followers asking where their epochs end need the new epoch in the
                        // cache before anything is written under it. Without room it is kept
                        // in memory, and the partition handed over where another in-sync
                        // replica can lead it; any other failure leaves the log offline
                        // (produce answers KAFKA_STORAGE_ERROR), not the broker.
                        if let Err(e) = partition.log.begin_epoch(epoch).await {
                            tracing::warn!(partition = %partition.tp, "recording leader epoch {epoch:?} failed: {e}");
                        }
                        partition.local_progress();
                    }
                    Transition::BecameFollower { leader, epoch } => {
                        done.to_follow.push((Arc::clone(&partition), leader, epoch));
                    }
                }
            }
        }
        done.open_failed = !unopened.is_empty();
        *self.unopened.lock().unwrap_or_else(|p| p.into_inner()) = unopened;
        // A folder that failed to open is no stray: the catalog does not hold it, but the
        // image assigns it here.
        if remove_strays && !done.open_failed {
            self.remove_strays().await?;
        }
        if !done.opened.is_empty() {
            self.env.disk.sync_dir(Path::new("")).await?;
        }
        Ok(done)
    }

    /// The partitions assigned here that the last reconciliation could not open, with their
    /// topic's id.
    pub fn unopened(&self) -> Vec<(TopicPartition, TopicId)> {
        self.unopened.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn topic_config(&self, t: &TopicImage) -> TopicConfig {
        let mut config = self.config.topic_config();
        if let Err(e) = config.replace(t.configs.clone()) {
            tracing::warn!(topic = %t.name, "ignoring invalid committed topic configs: {e}");
        }
        config
    }

    fn insert_topic(&self, t: &TopicImage) -> Arc<Topic> {
        let topic = Arc::new(Topic {
            name: t.name.clone(),
            id: t.id,
            config: Mutex::new(self.topic_config(t)),
            partitions: RwLock::new(BTreeMap::new()),
            count: AtomicI32::new(t.partitions.len() as i32),
            internal: crate::topics::is_internal(&t.name),
        });
        self.topics
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(t.name.clone(), Arc::clone(&topic));
        topic
    }

    async fn open_partition(
        &self,
        name: &str,
        id: TopicId,
        config: &TopicConfig,
        index: i32,
    ) -> Result<Arc<Partition>, CatalogError> {
        let tp = TopicPartition::new(name, index);
        let dir = partition_dir(&tp);
        let disk = &*self.env.disk;
        disk.create_dir(&dir).await?;
        let stored = checkpoint::read(disk, &dir, PARTITION_METADATA_FILE, PARTITION_METADATA_KIND)
            .await
            .ok()
            .flatten()
            .and_then(|(_, body)| <[u8; 16]>::try_from(body.as_ref()).ok());
        if stored.is_some_and(|stored| stored != id.0) {
            tracing::warn!(partition = %tp, "removing data of an older topic with the same name");
            disk.remove_dir_all(&dir).await?;
            disk.create_dir(&dir).await?;
        }
        if stored != Some(id.0) {
            let body = checkpoint::encode(PARTITION_METADATA_KIND, 1, &id.0);
            checkpoint::write_atomic(disk, &dir, PARTITION_METADATA_FILE, body).await?;
        }
        let partition = Partition::open(
            self.env.clone(),
            tp.clone(),
            id,
            dir,
            config.log_config(),
            Arc::clone(&self.appended),
        )
        .await
        .map_err(|source| CatalogError::Open { tp, source })?;
        Ok(Arc::new(partition))
    }

    async fn remove_topic(&self, topic: &Topic) -> Result<(), CatalogError> {
        self.topics.write().unwrap_or_else(|p| p.into_inner()).remove(&topic.name);
        for partition in topic.local_partitions() {
            self.remove_partition(&partition).await?;
        }
        tracing::info!(topic = %topic.name, "removed topic data");
        Ok(())
    }

    async fn remove_partition(&self, partition: &Partition) -> Result<(), CatalogError> {
        let _ = partition.log.close().await;
        self.env.disk.remove_dir_all(&partition_dir(&partition.tp)).await?;
        self.env.disk.sync_dir(Path::new("")).await?;
        self.appended.notify_waiters();
        Ok(())
    }

    /// Removes partition folders no hosted partition owns (left by a topic deleted while this
    /// broker was down, or by a crash during a removal).
    async fn remove_strays(&self) -> std::io::Result<()> {
        let owned: BTreeSet<String> = self.partitions().iter().map(|p| p.tp.dir_name()).collect();
        let root = PathBuf::new();
        let mut removed = false;
        for name in self.env.disk.list(&root).await? {
            if looks_like_partition(&name) && !owned.contains(&name) {
                tracing::warn!(folder = %name, "removing a partition folder nothing owns");
                self.env.disk.remove_dir_all(&PathBuf::from(&name)).await?;
                removed = true;
            }
        }
        if removed {
            self.env.disk.sync_dir(&root).await?;
        }
        Ok(())
    }
}

//! The catalog: every topic this broker hosts, with its partitions open. Creating, deleting,
//! growing and reconfiguring topics happen here, one at a time, each made durable in the topic
//! list before it is reported done.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};

use crate::config::{BrokerConfig, ConfigError, TopicConfig};
use crate::io::Env;
use crate::model::{TopicId, TopicPartition};
use crate::partition::Partition;
use crate::topics::{self, TopicNameError, TopicRecord};

/// Most partitions one topic may have (a guard against absurd requests).
pub const TOPIC_PARTITIONS_MAX: i32 = 10_000;

/// A topic and its open partitions.
pub struct Topic {
    /// The name.
    pub name: String,
    /// The stable id.
    pub id: TopicId,
    /// Its configuration.
    pub config: Mutex<TopicConfig>,
    /// Its partitions, by index.
    pub partitions: RwLock<Vec<Arc<Partition>>>,
    /// Whether it is internal (`__consumer_offsets`).
    pub internal: bool,
}

impl Topic {
    /// The partition at `index`, if it exists.
    pub fn partition(&self, index: i32) -> Option<Arc<Partition>> {
        let partitions = self.partitions.read().unwrap_or_else(|p| p.into_inner());
        usize::try_from(index).ok().and_then(|i| partitions.get(i)).cloned()
    }

    /// How many partitions it has.
    pub fn partition_count(&self) -> i32 {
        self.partitions.read().unwrap_or_else(|p| p.into_inner()).len() as i32
    }

    /// A copy of its configuration.
    pub fn config(&self) -> TopicConfig {
        self.config.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn record(&self) -> TopicRecord {
        TopicRecord {
            name: self.name.clone(),
            id: topics::id_to_hex(self.id),
            partitions: self.partition_count(),
            configs: self.config().overrides().clone(),
        }
    }
}

/// Why a topic operation was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// TOPIC_ALREADY_EXISTS.
    #[error("topic {0:?} already exists")]
    Exists(String),
    /// UNKNOWN_TOPIC_OR_PARTITION / UNKNOWN_TOPIC_ID.
    #[error("topic {0:?} does not exist")]
    Unknown(String),
    /// INVALID_TOPIC_EXCEPTION.
    #[error(transparent)]
    BadName(#[from] TopicNameError),
    /// INVALID_PARTITIONS.
    #[error("invalid partition count {0}: must be from 1 to {TOPIC_PARTITIONS_MAX} and not shrink")]
    BadPartitions(i32),
    /// INVALID_REPLICATION_FACTOR.
    #[error("replication factor {0} is not possible on a single broker")]
    BadReplication(i16),
    /// INVALID_CONFIG.
    #[error(transparent)]
    BadConfig(#[from] ConfigError),
    /// Internal topics cannot be deleted or changed by clients.
    #[error("topic {0:?} is internal")]
    Internal(String),
    /// KAFKA_STORAGE_ERROR.
    #[error("storage: {0}")]
    Storage(String),
}

/// All topics of this broker.
pub struct Catalog {
    env: Env,
    config: BrokerConfig,
    topics: RwLock<BTreeMap<String, Arc<Topic>>>,
    /// Serialises changes (each does I/O and rewrites the topic list).
    changes: tokio::sync::Mutex<()>,
    appended: Arc<tokio::sync::Notify>,
}

fn partition_dir(tp: &TopicPartition) -> PathBuf {
    PathBuf::from(tp.dir_name())
}

impl Catalog {
    /// Opens every topic in the topic list, removing orphaned partition folders.
    pub async fn open(
        env: Env,
        config: BrokerConfig,
        appended: Arc<tokio::sync::Notify>,
    ) -> Result<Catalog, CatalogError> {
        let storage = |e: std::io::Error| CatalogError::Storage(e.to_string());
        let records = topics::load(&*env.disk).await.map_err(storage)?;
        let catalog = Catalog {
            env: env.clone(),
            config,
            topics: RwLock::new(BTreeMap::new()),
            changes: tokio::sync::Mutex::new(()),
            appended,
        };
        for record in records {
            let id = topics::id_from_hex(&record.id).ok_or_else(|| {
                CatalogError::Storage(format!("bad id for topic {}", record.name))
            })?;
            let mut config = catalog.config.topic_config();
            config.replace(record.configs.clone())?;
            let topic = catalog.open_topic(&record.name, id, config, record.partitions).await?;
            catalog.insert(topic);
        }
        catalog.remove_orphans().await.map_err(storage)?;
        Ok(catalog)
    }

    async fn open_topic(
        &self,
        name: &str,
        id: TopicId,
        config: TopicConfig,
        partitions: i32,
    ) -> Result<Arc<Topic>, CatalogError> {
        let mut opened = Vec::new();
        for index in 0..partitions {
            opened.push(self.open_partition(name, id, &config, index).await?);
        }
        Ok(Arc::new(Topic {
            name: name.to_owned(),
            id,
            config: Mutex::new(config),
            partitions: RwLock::new(opened),
            internal: name.starts_with("__"),
        }))
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
        let partition = Partition::open(
            self.env.clone(),
            tp,
            id,
            dir,
            config.log_config(),
            Arc::clone(&self.appended),
        )
        .await
        .map_err(|e| CatalogError::Storage(e.to_string()))?;
        Ok(Arc::new(partition))
    }

    fn insert(&self, topic: Arc<Topic>) {
        self.topics.write().unwrap_or_else(|p| p.into_inner()).insert(topic.name.clone(), topic);
    }

    /// Removes partition folders no topic owns (left by a create or delete a crash cut short).
    async fn remove_orphans(&self) -> std::io::Result<()> {
        let owned: std::collections::BTreeSet<String> = self
            .all()
            .iter()
            .flat_map(|t| {
                (0..t.partition_count()).map(|i| TopicPartition::new(t.name.clone(), i).dir_name())
            })
            .collect();
        let root = PathBuf::new();
        for name in self.env.disk.list(&root).await? {
            let looks_like_partition =
                name.rsplit_once('-').is_some_and(|(_, p)| p.parse::<i32>().is_ok());
            if looks_like_partition && !owned.contains(&name) {
                tracing::warn!(folder = %name, "removing an orphaned partition folder");
                self.env.disk.remove_dir_all(&PathBuf::from(&name)).await?;
            }
        }
        self.env.disk.sync_dir(&root).await
    }

    /// Every topic, by name.
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

    /// The partition `index` of topic `name`.
    pub fn partition(&self, name: &str, index: i32) -> Option<Arc<Partition>> {
        self.get(name)?.partition(index)
    }

    async fn save(&self) -> Result<(), CatalogError> {
        let records = self.all().iter().map(|t| t.record()).collect();
        topics::save(&*self.env.disk, records)
            .await
            .map_err(|e| CatalogError::Storage(e.to_string()))
    }

    /// Creates a topic. `partitions`/`replication` of −1 take the broker's defaults. With
    /// `validate_only`, checks everything and creates nothing.
    pub async fn create(
        &self,
        name: &str,
        partitions: i32,
        replication: i16,
        configs: &[(String, String)],
        validate_only: bool,
    ) -> Result<Option<Arc<Topic>>, CatalogError> {
        topics::validate_name(name)?;
        let partitions = if partitions == -1 { self.config.num_partitions } else { partitions };
        if !(1..=TOPIC_PARTITIONS_MAX).contains(&partitions) {
            return Err(CatalogError::BadPartitions(partitions));
        }
        if !(replication == -1 || replication == 1) {
            return Err(CatalogError::BadReplication(replication));
        }
        let mut config = self.config.topic_config();
        config.apply(configs.iter().map(|(k, v)| (k.as_str(), Some(v.as_str()))))?;
        let _changes = self.changes.lock().await;
        if self.get(name).is_some() {
            return Err(CatalogError::Exists(name.to_owned()));
        }
        if validate_only {
            return Ok(None);
        }
        let mut id = [0u8; 16];
        self.env.entropy.fill(&mut id);
        let topic = self.open_topic(name, TopicId(id), config, partitions).await?;
        self.env
            .disk
            .sync_dir(&PathBuf::new())
            .await
            .map_err(|e| CatalogError::Storage(e.to_string()))?;
        self.insert(Arc::clone(&topic));
        self.save().await?;
        tracing::info!(topic = name, partitions, "created topic");
        Ok(Some(topic))
    }

    /// Deletes a topic and its data.
    pub async fn delete(&self, name: &str) -> Result<TopicId, CatalogError> {
        let _changes = self.changes.lock().await;
        let topic = self.get(name).ok_or_else(|| CatalogError::Unknown(name.to_owned()))?;
        if topic.internal {
            return Err(CatalogError::Internal(name.to_owned()));
        }
        self.topics.write().unwrap_or_else(|p| p.into_inner()).remove(name);
        self.save().await?;
        let partitions: Vec<Arc<Partition>> =
            topic.partitions.read().unwrap_or_else(|p| p.into_inner()).clone();
        for partition in partitions {
            let _ = partition.log.close().await;
            let dir = partition_dir(&partition.tp);
            self.env
                .disk
                .remove_dir_all(&dir)
                .await
                .map_err(|e| CatalogError::Storage(e.to_string()))?;
        }
        self.env
            .disk
            .sync_dir(&PathBuf::new())
            .await
            .map_err(|e| CatalogError::Storage(e.to_string()))?;
        self.appended.notify_waiters();
        tracing::info!(topic = name, "deleted topic");
        Ok(topic.id)
    }

    /// Grows a topic to `count` partitions.
    pub async fn create_partitions(
        &self,
        name: &str,
        count: i32,
        validate_only: bool,
    ) -> Result<(), CatalogError> {
        let _changes = self.changes.lock().await;
        let topic = self.get(name).ok_or_else(|| CatalogError::Unknown(name.to_owned()))?;
        let current = topic.partition_count();
        if count <= current || count > TOPIC_PARTITIONS_MAX {
            return Err(CatalogError::BadPartitions(count));
        }
        if validate_only {
            return Ok(());
        }
        let config = topic.config();
        for index in current..count {
            let partition = self.open_partition(name, topic.id, &config, index).await?;
            topic.partitions.write().unwrap_or_else(|p| p.into_inner()).push(partition);
        }
        self.save().await
    }

    /// Changes a topic's configuration: `incremental` applies `changes` (None deletes an
    /// override); otherwise the given set replaces every override (AlterConfigs).
    pub async fn alter_config(
        &self,
        name: &str,
        changes: &[(String, Option<String>)],
        incremental: bool,
        validate_only: bool,
    ) -> Result<(), CatalogError> {
        let _changes = self.changes.lock().await;
        let topic = self.get(name).ok_or_else(|| CatalogError::Unknown(name.to_owned()))?;
        let mut config = topic.config();
        if incremental {
            config.apply(changes.iter().map(|(k, v)| (k.as_str(), v.as_deref())))?;
        } else {
            let all =
                changes.iter().filter_map(|(k, v)| v.clone().map(|v| (k.clone(), v))).collect();
            config.replace(all)?;
        }
        if validate_only {
            return Ok(());
        }
        *topic.config.lock().unwrap_or_else(|p| p.into_inner()) = config.clone();
        for partition in topic.partitions.read().unwrap_or_else(|p| p.into_inner()).iter() {
            partition.log.set_config(config.log_config());
        }
        self.save().await
    }

    /// Creates the internal offsets topic if it is missing.
    pub async fn ensure_internal(
        &self,
        name: &str,
        partitions: i32,
        configs: &[(String, String)],
    ) -> Result<Arc<Topic>, CatalogError> {
        if let Some(topic) = self.get(name) {
            return Ok(topic);
        }
        match self.create(name, partitions, -1, configs, false).await? {
            Some(topic) => Ok(topic),
            None => self.get(name).ok_or_else(|| CatalogError::Unknown(name.to_owned())),
        }
    }
}

//! Names: which files and folders exist, as readers see them now (live) and as a power failure
//! would leave them (durable).
//!
//! The model is a real file system's, not a table of paths: every folder is a node with its own
//! live and durable entry lists, and `sync_dir` of a folder copies that folder's live list over
//! its durable one. A power failure then rebuilds the tree by walking durable lists from the
//! root, which gives the rules of `weir::io::disk` for free:
//! - a name is durable only once its folder was synced;
//! - whatever sits under a folder whose own name is not durable is unreachable, hence lost;
//! - a folder removed and re-created under the same name is a new folder, not the old one back;
//! - a rename across folders made durable in one folder only leaves both names (only the
//!   destination synced: the file is reachable twice, like a hard link) or neither (only the
//!   source synced), as an unjournalled file system can.
//!
//! Files are shared [`FileNode`]s (an inode): both namespaces and every open handle point at the
//! same one, so a power failure decides the fate of each inode exactly once.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Component, Path};
use std::sync::{Arc, Mutex};

use super::inode::Inode;
use crate::world::lock;

/// A folder's number in the [`Namespace`] arena.
type FolderId = u64;

/// The root folder, which always exists.
const ROOT_FOLDER: FolderId = 0;

/// An inode: a file's identity and contents, whatever names it has.
#[derive(Debug)]
pub(crate) struct FileNode {
    /// Creation number, unique per disk: fixes the order in which a power failure visits files.
    pub(crate) id: u64,
    /// The contents.
    pub(crate) inode: Mutex<Inode>,
}

#[derive(Clone, Debug)]
enum Entry {
    File(Arc<FileNode>),
    Folder(FolderId),
}

impl Entry {
    fn same(&self, other: &Entry) -> bool {
        match (self, other) {
            (Entry::File(a), Entry::File(b)) => Arc::ptr_eq(a, b),
            (Entry::Folder(a), Entry::Folder(b)) => a == b,
            _ => false,
        }
    }
}

#[derive(Debug, Default)]
struct Folder {
    live: Live,
    durable: BTreeMap<String, Entry>,
}

/// A folder's live entries, remembering which names changed since the folder was last synced,
/// so that `sync_dir` costs what changed rather than the size of the folder.
#[derive(Debug, Default)]
struct Live {
    entries: BTreeMap<String, Entry>,
    dirty: BTreeSet<String>,
}

impl std::ops::Deref for Live {
    type Target = BTreeMap<String, Entry>;
    fn deref(&self) -> &Self::Target {
        &self.entries
    }
}

impl Live {
    fn insert(&mut self, name: String, entry: Entry) -> Option<Entry> {
        self.dirty.insert(name.clone());
        self.entries.insert(name, entry)
    }

    fn remove(&mut self, name: &str) -> Option<Entry> {
        self.dirty.insert(name.to_owned());
        self.entries.remove(name)
    }

    /// Empties the folder (every name changes).
    fn take_all(&mut self) -> BTreeMap<String, Entry> {
        self.dirty.extend(self.entries.keys().cloned());
        std::mem::take(&mut self.entries)
    }

    /// Becomes exactly `durable` (after a power failure): nothing is dirty any more.
    fn reset_to(&mut self, durable: &BTreeMap<String, Entry>) {
        self.entries.clone_from(durable);
        self.dirty.clear();
    }
}

/// A folder sync under way: the folder, and its changed names as they were when it began.
#[derive(Debug)]
pub(crate) struct DirSyncMark {
    folder: FolderId,
    changes: Vec<(String, Option<Entry>)>,
}

/// All names on one disk.
#[derive(Debug)]
pub(crate) struct Namespace {
    folders: BTreeMap<FolderId, Folder>,
    next_folder: FolderId,
    next_file: u64,
}

impl Default for Namespace {
    fn default() -> Self {
        Namespace {
            folders: BTreeMap::from([(ROOT_FOLDER, Folder::default())]),
            next_folder: ROOT_FOLDER + 1,
            next_file: 1,
        }
    }
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, format!("{} does not exist", path.display()))
}

fn error(kind: io::ErrorKind, path: &Path, what: &str) -> io::Error {
    io::Error::new(kind, format!("{}: {what}", path.display()))
}

/// The names along `path` (already checked: relative, no `..`).
fn names(path: &Path) -> impl Iterator<Item = io::Result<&str>> {
    path.components().filter_map(move |c| match c {
        Component::Normal(name) => Some(
            name.to_str()
                .ok_or_else(|| error(io::ErrorKind::InvalidInput, path, "name is not UTF-8")),
        ),
        _ => None,
    })
}

/// `path`'s folder part and last name; the root has none.
fn split(path: &Path) -> io::Result<(&Path, &str)> {
    let name = path.file_name().and_then(|n| n.to_str());
    match (path.parent(), name) {
        (Some(parent), Some(name)) => Ok((parent, name)),
        _ => Err(error(io::ErrorKind::InvalidInput, path, "not a file name")),
    }
}

impl Namespace {
    fn folder(&self, id: FolderId) -> &Folder {
        self.folders.get(&id).expect("every linked folder id is in the arena")
    }

    fn folder_mut(&mut self, id: FolderId) -> &mut Folder {
        self.folders.get_mut(&id).expect("every linked folder id is in the arena")
    }

    /// The live entry at `path`; `None` for a missing name. The root is a folder.
    fn lookup(&self, path: &Path) -> io::Result<Option<Entry>> {
        self.walk(path, |folder, name| folder.live.get(name))
    }

    /// The entry at `path` as a power failure would leave it: reached through durable names
    /// only. `None` for a missing name.
    fn lookup_durable(&self, path: &Path) -> io::Result<Option<Entry>> {
        self.walk(path, |folder, name| folder.durable.get(name))
    }

    /// The entry at `path`, each name looked up in its folder by `entry`.
    fn walk<'a>(
        &'a self,
        path: &Path,
        entry: impl Fn(&'a Folder, &str) -> Option<&'a Entry>,
    ) -> io::Result<Option<Entry>> {
        let mut current = Entry::Folder(ROOT_FOLDER);
        for name in names(path) {
            let name = name?;
            let Entry::Folder(id) = current else {
                return Err(error(io::ErrorKind::NotADirectory, path, "a parent is a file"));
            };
            match entry(self.folder(id), name) {
                Some(found) => current = found.clone(),
                None => return Ok(None),
            }
        }
        Ok(Some(current))
    }

    /// The file a power failure would leave at `path`.
    pub(crate) fn open_durable(&self, path: &Path) -> io::Result<Arc<FileNode>> {
        match self.lookup_durable(path)? {
            Some(Entry::File(node)) => Ok(node),
            Some(Entry::Folder(_)) => Err(error(io::ErrorKind::IsADirectory, path, "is a folder")),
            None => Err(not_found(path)),
        }
    }

    /// The names a power failure would leave in the folder at `path`, sorted.
    pub(crate) fn list_durable(&self, path: &Path) -> io::Result<Vec<String>> {
        match self.lookup_durable(path)? {
            Some(Entry::Folder(id)) => Ok(self.folder(id).durable.keys().cloned().collect()),
            Some(Entry::File(_)) => Err(error(io::ErrorKind::NotADirectory, path, "is a file")),
            None => Err(not_found(path)),
        }
    }

    /// The live folder at `path`.
    fn folder_at(&self, path: &Path) -> io::Result<FolderId> {
        match self.lookup(path)? {
            Some(Entry::Folder(id)) => Ok(id),
            Some(Entry::File(_)) => Err(error(io::ErrorKind::NotADirectory, path, "is a file")),
            None => Err(not_found(path)),
        }
    }

    /// The folder holding `path`'s last name, and that name.
    fn parent_of<'p>(&self, path: &'p Path) -> io::Result<(FolderId, &'p str)> {
        let (parent, name) = split(path)?;
        Ok((self.folder_at(parent)?, name))
    }

    /// Creates a file, or truncates the one at `path` to zero (an operation on its inode).
    pub(crate) fn create_file(&mut self, path: &Path) -> io::Result<Arc<FileNode>> {
        let (parent, name) = self.parent_of(path)?;
        match self.folder(parent).live.get(name) {
            Some(Entry::File(node)) => {
                let node = Arc::clone(node);
                lock(&node.inode).truncate(0);
                Ok(node)
            }
            Some(Entry::Folder(_)) => Err(error(io::ErrorKind::IsADirectory, path, "is a folder")),
            None => {
                let node = Arc::new(FileNode { id: self.next_file, inode: Mutex::default() });
                self.next_file += 1;
                self.folder_mut(parent)
                    .live
                    .insert(name.to_owned(), Entry::File(Arc::clone(&node)));
                Ok(node)
            }
        }
    }

    /// The file at `path`.
    pub(crate) fn open(&self, path: &Path) -> io::Result<Arc<FileNode>> {
        match self.lookup(path)? {
            Some(Entry::File(node)) => Ok(node),
            Some(Entry::Folder(_)) => Err(error(io::ErrorKind::IsADirectory, path, "is a folder")),
            None => Err(not_found(path)),
        }
    }

    /// Moves the entry at `from` to `to`, replacing a file there (or an empty folder, when
    /// moving a folder), like `rename(2)`.
    pub(crate) fn rename(&mut self, from: &Path, to: &Path) -> io::Result<()> {
        let (from_parent, from_name) = self.parent_of(from)?;
        let (to_parent, to_name) = self.parent_of(to)?;
        let moved = self.folder(from_parent).live.get(from_name).cloned();
        let Some(moved) = moved else {
            return Err(not_found(from));
        };
        if from == to {
            return Ok(());
        }
        let replaced = self.folder(to_parent).live.get(to_name).cloned();
        match (&moved, &replaced) {
            (Entry::Folder(id), _) if self.live_subtree(*id).contains(&to_parent) => {
                return Err(error(io::ErrorKind::InvalidInput, to, "is inside the moved folder"));
            }
            (Entry::File(_), Some(Entry::Folder(_))) => {
                return Err(error(io::ErrorKind::IsADirectory, to, "is a folder"));
            }
            (Entry::Folder(_), Some(Entry::File(_))) => {
                return Err(error(io::ErrorKind::NotADirectory, to, "is a file"));
            }
            (Entry::Folder(_), Some(Entry::Folder(id))) if !self.folder(*id).live.is_empty() => {
                return Err(error(io::ErrorKind::DirectoryNotEmpty, to, "is not empty"));
            }
            _ => {}
        }
        self.folder_mut(from_parent).live.remove(from_name);
        self.folder_mut(to_parent).live.insert(to_name.to_owned(), moved);
        if matches!(replaced, Some(Entry::Folder(_))) {
            self.collect_garbage();
        }
        Ok(())
    }

    /// Unlinks the file at `path`; its inode lives on in open handles and durable names.
    pub(crate) fn remove(&mut self, path: &Path) -> io::Result<()> {
        let (parent, name) = self.parent_of(path)?;
        match self.folder(parent).live.get(name) {
            Some(Entry::File(_)) => {
                self.folder_mut(parent).live.remove(name);
                Ok(())
            }
            Some(Entry::Folder(_)) => Err(error(io::ErrorKind::IsADirectory, path, "is a folder")),
            None => Err(not_found(path)),
        }
    }

    /// Creates the folder at `path` and its missing parents.
    pub(crate) fn create_dir_all(&mut self, path: &Path) -> io::Result<()> {
        let mut current = ROOT_FOLDER;
        let all: Vec<&str> = names(path).collect::<io::Result<_>>()?;
        for (i, name) in all.iter().enumerate() {
            current = match self.folder(current).live.get(*name) {
                Some(Entry::Folder(id)) => *id,
                Some(Entry::File(_)) if i + 1 == all.len() => {
                    return Err(error(io::ErrorKind::AlreadyExists, path, "is a file"));
                }
                Some(Entry::File(_)) => {
                    return Err(error(io::ErrorKind::NotADirectory, path, "a parent is a file"));
                }
                None => {
                    let id = self.next_folder;
                    self.next_folder += 1;
                    self.folders.insert(id, Folder::default());
                    self.folder_mut(current).live.insert((*name).to_owned(), Entry::Folder(id));
                    id
                }
            };
        }
        Ok(())
    }

    /// Unlinks the folder at `path` and everything under it.
    pub(crate) fn remove_dir_all(&mut self, path: &Path) -> io::Result<()> {
        let (parent, name) = self.parent_of(path)?;
        let id = match self.folder(parent).live.get(name) {
            Some(Entry::Folder(id)) => *id,
            Some(Entry::File(_)) => {
                return Err(error(io::ErrorKind::NotADirectory, path, "is a file"));
            }
            None => return Err(not_found(path)),
        };
        self.folder_mut(parent).live.remove(name);
        let mut unlinked = vec![id];
        while let Some(id) = unlinked.pop() {
            let entries = self.folder_mut(id).live.take_all();
            unlinked.extend(entries.values().filter_map(|e| match e {
                Entry::Folder(child) => Some(*child),
                Entry::File(_) => None,
            }));
        }
        self.collect_garbage();
        Ok(())
    }

    /// Fails unless a live folder exists at `path`.
    pub(crate) fn check_folder(&self, path: &Path) -> io::Result<()> {
        self.folder_at(path).map(drop)
    }

    /// The live names directly inside the folder at `path`, sorted.
    pub(crate) fn list(&self, path: &Path) -> io::Result<Vec<String>> {
        let id = self.folder_at(path)?;
        Ok(self.folder(id).live.keys().cloned().collect())
    }

    /// Makes the folder's live entries its durable ones.
    #[cfg(test)]
    pub(crate) fn sync(&mut self, path: &Path) -> io::Result<()> {
        let mark = self.sync_mark(path)?;
        self.sync_to(mark);
        Ok(())
    }

    /// What a `sync_dir` of the folder at `path` starting now must make durable: its names
    /// changed so far, as they are now.
    pub(crate) fn sync_mark(&self, path: &Path) -> io::Result<DirSyncMark> {
        let id = self.folder_at(path)?;
        let folder = self.folder(id);
        let changes = folder
            .live
            .dirty
            .iter()
            .map(|name| (name.clone(), folder.live.get(name).cloned()))
            .collect();
        Ok(DirSyncMark { folder: id, changes })
    }

    /// A `sync_dir` ending: the changes in `mark` become durable. A name changed again while
    /// the sync ran stays to be synced (a real sync may or may not carry the later change, so
    /// nothing may count on it); a folder removed meanwhile has nothing left to sync.
    pub(crate) fn sync_to(&mut self, mark: DirSyncMark) {
        let Some(folder) = self.folders.get_mut(&mark.folder) else {
            return;
        };
        let mut lost_folder = false;
        for (name, entry) in mark.changes {
            let unchanged = match (&entry, folder.live.get(&name)) {
                (Some(then), Some(now)) => then.same(now),
                (None, None) => true,
                _ => false,
            };
            if unchanged {
                folder.live.dirty.remove(&name);
            }
            let old = match entry {
                Some(entry) => folder.durable.insert(name.clone(), entry),
                None => folder.durable.remove(&name),
            };
            let now = folder.durable.get(&name);
            lost_folder |=
                matches!(&old, Some(old @ Entry::Folder(_)) if !now.is_some_and(|e| e.same(old)));
        }
        if lost_folder {
            self.collect_garbage();
        }
    }

    /// Every inode a power failure keeps a name for, each once, in creation order.
    pub(crate) fn durable_files(&self) -> Vec<Arc<FileNode>> {
        let mut files = BTreeMap::new();
        for id in self.reachable(false) {
            for entry in self.folder(id).durable.values() {
                if let Entry::File(node) = entry {
                    files.entry(node.id).or_insert_with(|| Arc::clone(node));
                }
            }
        }
        files.into_values().collect()
    }

    /// A power failure: the live tree becomes the durable one, and folders no durable name
    /// leads to are forgotten.
    pub(crate) fn revert_to_durable(&mut self) {
        let reachable = self.reachable(false);
        self.folders.retain(|id, _| reachable.contains(id));
        for folder in self.folders.values_mut() {
            let durable = folder.durable.clone();
            folder.live.reset_to(&durable);
        }
    }

    /// The disk was replaced: every name is gone, durable or not. File and folder numbers go
    /// on from where they were, so no new file takes an old one's number.
    pub(crate) fn wipe(&mut self) {
        let (next_folder, next_file) = (self.next_folder, self.next_file);
        *self = Namespace::default();
        self.next_folder = next_folder;
        self.next_file = next_file;
    }

    /// Bytes held by the distinct files the live tree names. (Unlinked files still open are not
    /// counted: a simplification, as the kernel frees them only on the last close.)
    pub(crate) fn live_bytes(&self) -> u64 {
        let mut seen = BTreeSet::new();
        let mut total = 0;
        for id in self.live_subtree(ROOT_FOLDER) {
            for entry in self.folder(id).live.values() {
                if let Entry::File(node) = entry
                    && seen.insert(node.id)
                {
                    total += lock(&node.inode).len();
                }
            }
        }
        total
    }

    /// Folders reachable from the root through durable entries (and live ones too if
    /// `also_live`).
    fn reachable(&self, also_live: bool) -> BTreeSet<FolderId> {
        let mut seen = BTreeSet::from([ROOT_FOLDER]);
        let mut todo = vec![ROOT_FOLDER];
        while let Some(id) = todo.pop() {
            let folder = self.folder(id);
            let live = folder.live.values().filter(|_| also_live);
            for entry in folder.durable.values().chain(live) {
                if let Entry::Folder(child) = entry
                    && seen.insert(*child)
                {
                    todo.push(*child);
                }
            }
        }
        seen
    }

    /// `top` and every folder under it through live entries. (A folder may have two names
    /// after a power failure — see the module documentation — so this guards against cycles.)
    fn live_subtree(&self, top: FolderId) -> BTreeSet<FolderId> {
        let mut seen = BTreeSet::from([top]);
        let mut todo = vec![top];
        while let Some(id) = todo.pop() {
            for entry in self.folder(id).live.values() {
                if let Entry::Folder(child) = entry
                    && seen.insert(*child)
                {
                    todo.push(*child);
                }
            }
        }
        seen
    }

    /// Drops folders that neither namespace can reach any more.
    fn collect_garbage(&mut self) {
        let reachable = self.reachable(true);
        self.folders.retain(|id, _| reachable.contains(id));
    }

    /// How many folders the arena holds (for tests).
    #[cfg(test)]
    fn folder_count(&self) -> usize {
        self.folders.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> &Path {
        Path::new(s)
    }

    fn kind<T>(r: io::Result<T>) -> Option<io::ErrorKind> {
        r.err().map(|e| e.kind())
    }

    #[test]
    fn behaves_like_a_file_system() {
        let mut ns = Namespace::default();
        assert_eq!(kind(ns.create_file(p("a/f"))), Some(io::ErrorKind::NotFound));
        ns.create_dir_all(p("a/b")).expect("mkdir");
        ns.create_dir_all(p("a/b")).expect("mkdir again");
        ns.create_file(p("a/f")).expect("create");
        ns.create_file(p("a/e")).expect("create");
        assert_eq!(ns.list(p("a")).ok(), Some(vec!["b".into(), "e".into(), "f".into()]));
        assert_eq!(ns.list(p("")).ok(), Some(vec!["a".into()]));
        assert_eq!(kind(ns.list(p("a/f"))), Some(io::ErrorKind::NotADirectory));
        assert_eq!(kind(ns.create_dir_all(p("a/f"))), Some(io::ErrorKind::AlreadyExists));
        assert_eq!(kind(ns.create_dir_all(p("a/f/g"))), Some(io::ErrorKind::NotADirectory));
        assert_eq!(kind(ns.remove(p("a/b"))), Some(io::ErrorKind::IsADirectory));
        assert_eq!(kind(ns.rename(p("a/f"), p("a/b"))), Some(io::ErrorKind::IsADirectory));
        assert_eq!(kind(ns.rename(p("a"), p("a/b/c"))), Some(io::ErrorKind::InvalidInput));
        assert_eq!(kind(ns.remove_dir_all(p(""))), Some(io::ErrorKind::InvalidInput));
        ns.rename(p("a/f"), p("a/e")).expect("rename replaces");
        assert_eq!(ns.list(p("a")).ok(), Some(vec!["b".into(), "e".into()]));
        ns.rename(p("a/b"), p("c")).expect("move a folder");
        ns.create_dir_all(p("e")).expect("mkdir");
        ns.rename(p("e"), p("c/b")).expect("move a folder into a moved one");
        assert_eq!(kind(ns.rename(p("c"), p("c/b/c"))), Some(io::ErrorKind::InvalidInput));
        assert_eq!(ns.list(p("")).ok(), Some(vec!["a".into(), "c".into()]));
        ns.remove_dir_all(p("a")).expect("rm -r");
        assert_eq!(kind(ns.open(p("a/e"))), Some(io::ErrorKind::NotFound));
    }

    #[test]
    fn only_synced_folders_survive_power_failure() {
        let mut ns = Namespace::default();
        ns.create_dir_all(p("a/b")).expect("mkdir");
        ns.create_file(p("a/b/f")).expect("create");
        ns.sync(p("a/b")).expect("sync");
        ns.sync(p("a")).expect("sync");
        // The root was never synced: nothing is reachable.
        assert!(ns.durable_files().is_empty());
        ns.sync(p("")).expect("sync");
        assert_eq!(ns.durable_files().len(), 1);
        ns.remove_dir_all(p("a")).expect("rm -r");
        ns.create_dir_all(p("a")).expect("a new folder a");
        ns.sync(p("")).expect("sync");
        ns.revert_to_durable();
        assert_eq!(ns.list(p("a")).ok(), Some(Vec::new()), "the old a/b is not back");
        assert_eq!(ns.folder_count(), 2);
    }

    #[test]
    fn a_folder_sync_carries_only_the_changes_made_before_it_began() {
        let mut ns = Namespace::default();
        ns.create_file(p("old")).expect("create");
        let mark = ns.sync_mark(p("")).expect("a mark");
        // Made while the sync runs.
        ns.create_file(p("new")).expect("create");
        ns.rename(p("old"), p("moved")).expect("rename");
        ns.sync_to(mark);
        ns.revert_to_durable();
        assert_eq!(ns.list(p("")).ok(), Some(vec!["old".into()]));
        // The later changes are still to be synced, not forgotten.
        ns.create_file(p("new")).expect("create again");
        ns.rename(p("old"), p("moved")).expect("rename again");
        let mark = ns.sync_mark(p("")).expect("a mark");
        ns.sync_to(mark);
        ns.revert_to_durable();
        assert_eq!(ns.list(p("")).ok(), Some(vec!["moved".into(), "new".into()]));
    }

    #[test]
    fn a_name_changed_during_a_sync_stays_to_be_synced() {
        let mut ns = Namespace::default();
        ns.create_file(p("f")).expect("create");
        let mark = ns.sync_mark(p("")).expect("a mark");
        ns.remove(p("f")).expect("remove while the sync runs");
        ns.sync_to(mark);
        // The next sync carries the removal.
        ns.sync(p("")).expect("sync");
        ns.revert_to_durable();
        assert_eq!(ns.list(p("")).ok(), Some(Vec::new()));
    }

    #[test]
    fn a_folder_with_two_names_cannot_be_moved_into_itself() {
        let mut ns = Namespace::default();
        ns.create_dir_all(p("a")).expect("mkdir");
        ns.create_dir_all(p("b")).expect("mkdir");
        ns.sync(p("")).expect("sync");
        ns.rename(p("b"), p("a/b")).expect("move b into a");
        ns.sync(p("a")).expect("sync a only");
        ns.revert_to_durable();
        assert_eq!(ns.list(p("")).ok(), Some(vec!["a".into(), "b".into()]));
        assert_eq!(ns.list(p("a")).ok(), Some(vec!["b".into()]));
        // b and a/b are one folder: moving a into it would make a cycle.
        assert_eq!(kind(ns.rename(p("a"), p("b/x"))), Some(io::ErrorKind::InvalidInput));
        assert_eq!(ns.live_bytes(), 0);
    }

    #[test]
    fn cross_folder_rename_synced_at_destination_keeps_both_names() {
        let mut ns = Namespace::default();
        ns.create_dir_all(p("x")).expect("mkdir");
        ns.create_dir_all(p("y")).expect("mkdir");
        ns.create_file(p("x/f")).expect("create");
        for folder in ["", "x", "y"] {
            ns.sync(p(folder)).expect("sync");
        }
        ns.rename(p("x/f"), p("y/f")).expect("rename");
        ns.sync(p("y")).expect("sync");
        ns.revert_to_durable();
        let (a, b) = (ns.open(p("x/f")).expect("old name"), ns.open(p("y/f")).expect("new"));
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(ns.durable_files().len(), 1);
    }
}

//! Project source in the object store: file indexes, code manifests, blobs and patches.
//!
//! Agents read a tree's file index instead of walking the repository, and the apps side reads
//! blobs by id, so these objects mirror what git holds under fixed keys:
//!
//! - `source/<project>/<tree>/index.json`: the file index, `{"tree", "files": [{path, blob, size}]}`
//! - `source/<project>/<tree>/code.json`: the code manifest, `{path: blob}`
//! - `source/<project>/blobs/<blob>`: each blob once; a file over 1 MiB is listed but not stored
//! - `source/<project>/patches/changesets/<cs>.patch`, `source/<project>/patches/candidates/<cand>.patch`
//!
//! Patches are cut at 512 KiB at a line boundary. Whether a patch was cut and its full size go
//! into a sidecar object `<key>.meta.json`, because object_store 0.12's `LocalFileSystem` refuses
//! object attributes (`put_opts` answers `NotImplemented` for any attribute). One place for the
//! metadata on every backend beats attributes on S3 and a sidecar locally.
//!
//! Nothing here expires; deleting the project deletes its whole `source/<project>/` prefix.

use crate::{FileEntry, GitError, GitService};
use belay_domain::repo::{PATCH_LIMIT_BYTES, RepoNameError, candidate_fork, canonical_repo, cut_patch};
use futures::{StreamExt, TryStreamExt};
use object_store::ObjectStore;
use object_store::path::Path as Key;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use thiserror::Error;

/// Files larger than this are listed in the manifests but their blob is not stored.
pub const BLOB_STORE_LIMIT_BYTES: u64 = 1024 * 1024;

/// Blobs read from git and uploaded per round; bounds memory to about this many blobs of 1 MiB.
const BLOB_BATCH: usize = 64;
const CONCURRENT_REQUESTS: usize = 16;

#[derive(Debug, Error)]
pub enum SourceObjectsError {
    #[error(transparent)]
    InvalidRowId(#[from] RepoNameError),
    #[error("`{value}` is not a valid {what}")]
    InvalidId { what: &'static str, value: String },
    #[error("object store: {op} {key}")]
    Store {
        op: &'static str,
        key: String,
        #[source]
        source: object_store::Error,
    },
    #[error("{key} does not hold valid JSON")]
    Json {
        key: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("{key} does not hold UTF-8 text")]
    NotText { key: String },
    #[error(transparent)]
    Git(#[from] GitError),
}

impl SourceObjectsError {
    /// Store outages and git disk trouble may pass; bad ids and corrupt objects will not.
    pub fn is_retryable(&self) -> bool {
        match self {
            SourceObjectsError::Store { source, .. } => !matches!(
                source,
                object_store::Error::InvalidPath { .. }
                    | object_store::Error::NotImplemented
                    | object_store::Error::NotSupported { .. }
            ),
            SourceObjectsError::Git(e) => e.is_retryable(),
            _ => false,
        }
    }
}

type Result<T, E = SourceObjectsError> = std::result::Result<T, E>;

/// `index.json`: every file of a tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileIndex {
    pub tree: String,
    pub files: Vec<FileEntry>,
}

/// [`FileIndex`] as written, borrowing its files.
#[derive(Serialize)]
struct FileIndexRef<'a> {
    tree: &'a str,
    files: &'a [FileEntry],
}

/// `code.json` (path to blob) of files sorted by path, serialized as the map it is.
struct CodeManifest<'a>(&'a [FileEntry]);

impl Serialize for CodeManifest<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|f| (f.path.as_str(), f.blob.as_str())))
    }
}

/// What writing one tree did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TreeWritten {
    pub index_key: String,
    pub code_key: String,
    /// Blobs uploaded now.
    pub blobs_stored: usize,
    /// Blobs an earlier tree already stored.
    pub blobs_present: usize,
    /// Blobs over [`BLOB_STORE_LIMIT_BYTES`], listed but not stored.
    pub blobs_too_large: usize,
    /// Blobs whose presence in the object store was checked (those the base tree's index did not
    /// already list).
    #[serde(default)]
    pub blobs_checked: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PatchKind {
    ChangeSet,
    Candidate,
}

/// The sidecar `<patch key>.meta.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PatchMeta {
    pub truncated: bool,
    /// Bytes of the whole patch before any cut.
    pub full_size: usize,
    /// Bytes stored.
    pub stored_size: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredPatch {
    /// The patch key (the ChangeSet's `patchRef`).
    pub key: String,
    pub meta: PatchMeta,
}

/// Writes and deletes `source/` objects.
#[derive(Debug, Clone)]
pub struct SourceObjects {
    store: Arc<dyn ObjectStore>,
}

impl SourceObjects {
    pub fn new(store: Arc<dyn ObjectStore>) -> Self {
        Self { store }
    }

    pub fn index_key(project: &str, tree: &str) -> Result<String> {
        Ok(format!(
            "{}/{}/index.json",
            prefix(project)?,
            object_id(tree, "tree id")?
        ))
    }

    pub fn code_key(project: &str, tree: &str) -> Result<String> {
        Ok(format!(
            "{}/{}/code.json",
            prefix(project)?,
            object_id(tree, "tree id")?
        ))
    }

    pub fn blob_key(project: &str, blob: &str) -> Result<String> {
        Ok(format!("{}/blobs/{}", prefix(project)?, object_id(blob, "blob id")?))
    }

    pub fn patch_key(project: &str, kind: PatchKind, id: &str) -> Result<String> {
        let project = prefix(project)?;
        Ok(match kind {
            PatchKind::ChangeSet => format!("{project}/patches/changesets/{}.patch", change_set_id(id)?),
            PatchKind::Candidate => {
                candidate_fork(id)?;
                format!("{project}/patches/candidates/{id}.patch")
            }
        })
    }

    /// Writes the blobs, code manifest and file index of `tree`, whose `files` come from
    /// [`GitService::file_index`] on `repo`. The index goes last, so its presence means the rest
    /// is there; writing a tree again only re-writes the two manifests.
    #[tracing::instrument(skip_all, fields(project.id = %project, tree = %tree), err)]
    pub async fn write_tree(
        &self,
        git: &GitService,
        repo: &str,
        project: &str,
        tree: &str,
        files: &[FileEntry],
        base: Option<&str>,
    ) -> Result<TreeWritten> {
        let known = match base.filter(|b| *b != tree) {
            Some(base) => self.read_index(project, base).await?,
            None => None,
        };
        self.write_tree_over(git, repo, project, tree, files, known.as_ref())
            .await
    }

    /// [`SourceObjects::write_tree`] given the stored file index of the base tree (`known`)
    /// already read: every blob it lists is stored, so only the others are checked.
    pub async fn write_tree_over(
        &self,
        git: &GitService,
        repo: &str,
        project: &str,
        tree: &str,
        files: &[FileEntry],
        known: Option<&FileIndex>,
    ) -> Result<TreeWritten> {
        let index_key = Self::index_key(project, tree)?;
        let code_key = Self::code_key(project, tree)?;
        let mut written = TreeWritten {
            index_key,
            code_key,
            blobs_stored: 0,
            blobs_present: 0,
            blobs_too_large: 0,
            blobs_checked: 0,
        };
        // A stored index is written after every blob it lists (up to the limit): a base tree's
        // blobs are there already, and only the others are checked.
        let stored: HashSet<&str> = known
            .filter(|k| k.tree != tree)
            .iter()
            .flat_map(|k| &k.files)
            .filter(|f| f.size <= BLOB_STORE_LIMIT_BYTES)
            .map(|f| f.blob.as_str())
            .collect();
        let mut seen = HashSet::with_capacity(files.len());
        let mut blobs = Vec::new();
        for f in files {
            if f.size > BLOB_STORE_LIMIT_BYTES {
                written.blobs_too_large += 1;
            } else if seen.insert(f.blob.as_str()) {
                if stored.contains(f.blob.as_str()) {
                    written.blobs_present += 1;
                } else {
                    blobs.push(f.blob.as_str());
                }
            }
        }
        blobs.sort_unstable();
        written.blobs_checked = blobs.len();
        for batch in blobs.chunks(BLOB_BATCH) {
            // The futures are collected first: a closure held across an await would make this
            // future's Send-ness unprovable for callers that need Send (Temporal activities).
            let checks: Vec<_> = batch.iter().map(|b| self.exists(project, b)).collect();
            let present: Vec<bool> = futures::stream::iter(checks)
                .buffered(CONCURRENT_REQUESTS)
                .try_collect()
                .await?;
            let missing: Vec<String> = batch
                .iter()
                .zip(&present)
                .filter(|(_, p)| !**p)
                .map(|(b, _)| (*b).to_owned())
                .collect();
            written.blobs_present += batch.len() - missing.len();
            if missing.is_empty() {
                continue;
            }
            let contents = git.read_blobs(repo, missing.clone()).await?;
            let puts: Vec<_> = missing
                .iter()
                .zip(contents)
                .map(|(blob, data)| async move { self.put(&Self::blob_key(project, blob)?, data.into()).await })
                .collect();
            futures::stream::iter(puts)
                .buffer_unordered(CONCURRENT_REQUESTS)
                .try_collect::<Vec<()>>()
                .await?;
            written.blobs_stored += missing.len();
        }

        // `files` from `file_index` are sorted by path already: the manifest is written from them
        // in that order (a map's order), without building one.
        if files.windows(2).all(|w| w[0].path < w[1].path) {
            self.put_json(&written.code_key, &CodeManifest(files)).await?;
        } else {
            let code: BTreeMap<&str, &str> = files.iter().map(|f| (f.path.as_str(), f.blob.as_str())).collect();
            self.put_json(&written.code_key, &code).await?;
        }
        self.put_json(&written.index_key, &FileIndexRef { tree, files }).await?;
        Ok(written)
    }

    /// Reads a tree's file index, if it was written.
    pub async fn read_index(&self, project: &str, tree: &str) -> Result<Option<FileIndex>> {
        self.get_json(&Self::index_key(project, tree)?).await
    }

    /// Stores a ChangeSet's patch (its `patchRef`), cut at 512 KiB.
    pub async fn put_change_set_patch(&self, project: &str, change_set: &str, patch: &str) -> Result<StoredPatch> {
        self.put_patch(project, PatchKind::ChangeSet, change_set, patch).await
    }

    /// Stores a Candidate's patch, cut at 512 KiB.
    pub async fn put_candidate_patch(&self, project: &str, candidate: &str, patch: &str) -> Result<StoredPatch> {
        self.put_patch(project, PatchKind::Candidate, candidate, patch).await
    }

    /// Stores a patch cut at [`PATCH_LIMIT_BYTES`] and its sidecar. The sidecar goes first, so a
    /// patch is never seen without its metadata.
    #[tracing::instrument(skip_all, fields(project.id = %project, patch.id = %id), err)]
    pub async fn put_patch(&self, project: &str, kind: PatchKind, id: &str, patch: &str) -> Result<StoredPatch> {
        let key = Self::patch_key(project, kind, id)?;
        let (text, truncated, full_size) = cut_patch(patch, PATCH_LIMIT_BYTES);
        let meta = PatchMeta {
            truncated,
            full_size,
            stored_size: text.len(),
        };
        self.put_json(&meta_key(&key), &meta).await?;
        self.put(&key, text.into_bytes().into()).await?;
        Ok(StoredPatch { key, meta })
    }

    /// Reads a stored patch and its metadata.
    pub async fn read_patch(&self, project: &str, kind: PatchKind, id: &str) -> Result<Option<(String, PatchMeta)>> {
        let key = Self::patch_key(project, kind, id)?;
        let Some(meta) = self.get_json::<PatchMeta>(&meta_key(&key)).await? else {
            return Ok(None);
        };
        let Some(bytes) = self.get(&key).await? else {
            return Ok(None);
        };
        let text = String::from_utf8(bytes.to_vec()).map_err(|_| SourceObjectsError::NotText { key })?;
        Ok(Some((text, meta)))
    }

    /// Deletes everything under `source/<project>/` and returns how many objects went. Only this
    /// project's prefix is listed; object_store prefixes match whole segments, so `proj_a` never
    /// reaches `proj_ab`.
    #[tracing::instrument(skip_all, fields(project.id = %project), err)]
    pub async fn delete_project_sources(&self, project: &str) -> Result<usize> {
        let prefix = Key::from(prefix(project)?);
        let locations = self.store.list(Some(&prefix)).map_ok(|meta| meta.location).boxed();
        let mut results = self.store.delete_stream(locations);
        let mut deleted = 0;
        while let Some(result) = results.next().await {
            match result {
                Ok(_) => deleted += 1,
                // Deleted meanwhile by someone else: what we wanted.
                Err(object_store::Error::NotFound { .. }) => {}
                Err(source) => {
                    return Err(SourceObjectsError::Store {
                        op: "delete",
                        key: prefix.to_string(),
                        source,
                    });
                }
            }
        }
        Ok(deleted)
    }

    async fn exists(&self, project: &str, blob: &str) -> Result<bool> {
        let key = Self::blob_key(project, blob)?;
        match self.store.head(&Key::from(key.as_str())).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(source) => Err(SourceObjectsError::Store {
                op: "head",
                key,
                source,
            }),
        }
    }

    async fn put(&self, key: &str, payload: object_store::PutPayload) -> Result<()> {
        self.store
            .put(&Key::from(key), payload)
            .await
            .map(drop)
            .map_err(|source| SourceObjectsError::Store {
                op: "put",
                key: key.to_owned(),
                source,
            })
    }

    async fn put_json<T: Serialize + ?Sized>(&self, key: &str, value: &T) -> Result<()> {
        let bytes = serde_json::to_vec(value).map_err(|source| SourceObjectsError::Json {
            key: key.to_owned(),
            source,
        })?;
        self.put(key, bytes.into()).await
    }

    async fn get(&self, key: &str) -> Result<Option<bytes::Bytes>> {
        let store_err = |source| SourceObjectsError::Store {
            op: "get",
            key: key.to_owned(),
            source,
        };
        match self.store.get(&Key::from(key)).await {
            Ok(r) => Ok(Some(r.bytes().await.map_err(store_err)?)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(store_err(e)),
        }
    }

    async fn get_json<T: for<'de> Deserialize<'de>>(&self, key: &str) -> Result<Option<T>> {
        let Some(bytes) = self.get(key).await? else {
            return Ok(None);
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|source| SourceObjectsError::Json {
                key: key.to_owned(),
                source,
            })
    }
}

fn prefix(project: &str) -> Result<String> {
    Ok(format!("source/{}", canonical_repo(project)?))
}

fn meta_key(patch_key: &str) -> String {
    format!("{patch_key}.meta.json")
}

/// A hex object id (SHA-1 or SHA-256), the only thing allowed as a tree or blob key segment.
fn object_id<'a>(id: &'a str, what: &'static str) -> Result<&'a str> {
    let ok = matches!(id.len(), 40 | 64) && id.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    ok.then_some(id).ok_or_else(|| SourceObjectsError::InvalidId {
        what,
        value: id.to_owned(),
    })
}

fn change_set_id(id: &str) -> Result<&str> {
    let ok = !id.is_empty()
        && id.len() <= 80
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
    ok.then_some(id).ok_or_else(|| SourceObjectsError::InvalidId {
        what: "ChangeSet id",
        value: id.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::local::LocalFileSystem;

    const PROJECT: &str = "proj_0a1b2c";

    struct Fixture {
        _dir: tempfile::TempDir,
        store_dir: std::path::PathBuf,
        git: GitService,
        objects: SourceObjects,
    }

    fn fixture() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let store_dir = dir.path().join("objects");
        std::fs::create_dir_all(&store_dir).unwrap();
        let store = LocalFileSystem::new_with_prefix(&store_dir).unwrap();
        Fixture {
            git: GitService::new(dir.path().join("git/belay")),
            objects: SourceObjects::new(Arc::new(store)),
            store_dir,
            _dir: dir,
        }
    }

    fn read(f: &Fixture, key: &str) -> Option<Vec<u8>> {
        std::fs::read(f.store_dir.join(key)).ok()
    }

    async fn tree_of(f: &Fixture, commit: &str) -> String {
        let path = f.git.repo_path(PROJECT).unwrap();
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(path)
            .args(["rev-parse", &format!("{commit}^{{tree}}")])
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }

    #[tokio::test]
    async fn a_tree_is_written_under_its_exact_keys_with_each_blob_stored_once() {
        let f = fixture();
        let p = f.git.provision(PROJECT).await.unwrap();
        let big = vec![b'x'; BLOB_STORE_LIMIT_BYTES as usize + 1];
        let files = vec![
            ("src/a.rs".into(), Some(b"same\n".to_vec())),
            ("src/b.rs".into(), Some(b"same\n".to_vec())),
            ("assets/big.bin".into(), Some(big)),
        ];
        let commit = f.git.commit_files(PROJECT, &p.commit, files, "files").await.unwrap();
        let tree = tree_of(&f, &commit).await;
        let index = f.git.file_index(PROJECT, &commit).await.unwrap();
        assert_eq!(index.len(), 4);

        let w = f
            .objects
            .write_tree(&f.git, PROJECT, PROJECT, &tree, &index, None)
            .await
            .unwrap();
        assert_eq!(w.index_key, format!("source/{PROJECT}/{tree}/index.json"));
        assert_eq!(w.code_key, format!("source/{PROJECT}/{tree}/code.json"));
        assert_eq!((w.blobs_stored, w.blobs_present, w.blobs_too_large), (2, 0, 1), "{w:?}");

        let code: BTreeMap<String, String> = serde_json::from_slice(&read(&f, &w.code_key).unwrap()).unwrap();
        assert_eq!(code.len(), 4, "the big file is listed: {code:?}");
        assert_eq!(code["src/a.rs"], code["src/b.rs"]);
        let blob_key = |path: &str| format!("source/{PROJECT}/blobs/{}", code[path]);
        assert_eq!(read(&f, &blob_key("src/a.rs")).unwrap(), b"same\n");
        assert_eq!(read(&f, &blob_key(".gitignore")).unwrap(), crate::GITIGNORE.as_bytes());
        assert!(
            read(&f, &blob_key("assets/big.bin")).is_none(),
            "a file over 1 MiB is not stored"
        );
        let stored_index = f.objects.read_index(PROJECT, &tree).await.unwrap().unwrap();
        assert_eq!(
            stored_index,
            FileIndex {
                tree: tree.clone(),
                files: index.clone()
            }
        );
        // The manifest is a map by path whatever order the files come in: the same bytes.
        let written = read(&f, &w.code_key).unwrap();
        let mut reversed = index.clone();
        reversed.reverse();
        f.objects
            .write_tree(&f.git, PROJECT, PROJECT, &tree, &reversed, None)
            .await
            .unwrap();
        assert_eq!(read(&f, &w.code_key).unwrap(), written);
        f.objects
            .write_tree(&f.git, PROJECT, PROJECT, &tree, &index, None)
            .await
            .unwrap();

        let next = f
            .git
            .commit_files(
                PROJECT,
                &commit,
                vec![("src/c.rs".into(), Some(b"new\n".to_vec()))],
                "c",
            )
            .await
            .unwrap();
        let next_tree = tree_of(&f, &next).await;
        let next_index = f.git.file_index(PROJECT, &next).await.unwrap();
        let again = f
            .objects
            .write_tree(&f.git, PROJECT, PROJECT, &next_tree, &next_index, None)
            .await
            .unwrap();
        assert_eq!(
            (again.blobs_stored, again.blobs_present, again.blobs_checked),
            (1, 2, 3),
            "only the new blob is copied; without a base every blob is checked"
        );
    }

    #[tokio::test]
    async fn with_its_base_tree_a_sync_checks_only_the_blobs_the_base_index_does_not_list() {
        let f = fixture();
        let p = f.git.provision(PROJECT).await.unwrap();
        let base = f
            .git
            .commit_files(
                PROJECT,
                &p.commit,
                vec![
                    ("src/a.rs".into(), Some(b"a\n".to_vec())),
                    ("src/b.rs".into(), Some(b"b\n".to_vec())),
                ],
                "base",
            )
            .await
            .unwrap();
        let base_tree = tree_of(&f, &base).await;
        let base_index = f.git.file_index(PROJECT, &base).await.unwrap();
        let first = f
            .objects
            .write_tree(
                &f.git,
                PROJECT,
                PROJECT,
                &base_tree,
                &base_index,
                Some("0000000000000000000000000000000000000000"),
            )
            .await
            .unwrap();
        assert_eq!(
            (first.blobs_stored, first.blobs_checked),
            (3, 3),
            "a base without a stored index vouches for nothing"
        );

        let next = f
            .git
            .commit_files(
                PROJECT,
                &base,
                vec![
                    ("src/b.rs".into(), Some(b"b2\n".to_vec())),
                    ("src/c.rs".into(), Some(b"c\n".to_vec())),
                ],
                "next",
            )
            .await
            .unwrap();
        let next_tree = tree_of(&f, &next).await;
        let next_index = f.git.file_index(PROJECT, &next).await.unwrap();
        let w = f
            .objects
            .write_tree(&f.git, PROJECT, PROJECT, &next_tree, &next_index, Some(&base_tree))
            .await
            .unwrap();
        assert_eq!(
            (w.blobs_stored, w.blobs_present, w.blobs_checked),
            (2, 2, 2),
            "the two unchanged blobs are known from the base's index; the two new ones are checked and stored"
        );
        let code: BTreeMap<String, String> = serde_json::from_slice(&read(&f, &w.code_key).unwrap()).unwrap();
        for path in ["src/a.rs", "src/b.rs", "src/c.rs", ".gitignore"] {
            assert!(
                read(&f, &format!("source/{PROJECT}/blobs/{}", code[path])).is_some(),
                "{path}'s blob is stored"
            );
        }
        assert_eq!(
            read(&f, &format!("source/{PROJECT}/blobs/{}", code["src/b.rs"])).unwrap(),
            b"b2\n"
        );
    }

    #[tokio::test]
    async fn a_patch_within_the_limit_is_stored_whole_with_its_metadata() {
        let f = fixture();
        let patch = "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n";
        let stored = f.objects.put_change_set_patch(PROJECT, "cs_01", patch).await.unwrap();
        assert_eq!(stored.key, format!("source/{PROJECT}/patches/changesets/cs_01.patch"));
        assert_eq!(
            stored.meta,
            PatchMeta {
                truncated: false,
                full_size: patch.len(),
                stored_size: patch.len()
            }
        );
        assert_eq!(read(&f, &stored.key).unwrap(), patch.as_bytes());
        let meta: PatchMeta = serde_json::from_slice(&read(&f, &format!("{}.meta.json", stored.key)).unwrap()).unwrap();
        assert_eq!(meta, stored.meta);
        let (text, meta) = f
            .objects
            .read_patch(PROJECT, PatchKind::ChangeSet, "cs_01")
            .await
            .unwrap()
            .unwrap();
        assert_eq!((text.as_str(), meta), (patch, stored.meta));
    }

    #[tokio::test]
    async fn a_patch_past_512_kib_is_cut_at_a_line_and_says_so() {
        let f = fixture();
        let patch = "+0123456789abcdef\n".repeat(40_000);
        let stored = f.objects.put_candidate_patch(PROJECT, "cand_77", &patch).await.unwrap();
        assert_eq!(stored.key, format!("source/{PROJECT}/patches/candidates/cand_77.patch"));
        assert!(stored.meta.truncated);
        assert_eq!(stored.meta.full_size, patch.len());
        let body = read(&f, &stored.key).unwrap();
        assert_eq!(body.len(), stored.meta.stored_size);
        assert!(body.len() <= PATCH_LIMIT_BYTES && body.ends_with(b"\n") && patch.as_bytes().starts_with(&body));
    }

    #[tokio::test]
    async fn deleting_a_projects_sources_leaves_other_projects_alone() {
        let f = fixture();
        let other = "proj_0a1b2c3d";
        for project in [PROJECT, other] {
            f.objects.put_change_set_patch(project, "cs_1", "x\n").await.unwrap();
            f.objects.put_candidate_patch(project, "cand_1", "y\n").await.unwrap();
        }
        assert_eq!(f.objects.delete_project_sources(PROJECT).await.unwrap(), 4);
        assert!(
            f.objects
                .read_patch(PROJECT, PatchKind::ChangeSet, "cs_1")
                .await
                .unwrap()
                .is_none()
        );
        assert!(
            f.objects
                .read_patch(other, PatchKind::ChangeSet, "cs_1")
                .await
                .unwrap()
                .is_some()
        );
        assert!(
            f.objects
                .read_patch(other, PatchKind::Candidate, "cand_1")
                .await
                .unwrap()
                .is_some()
        );
        assert_eq!(
            f.objects.delete_project_sources(PROJECT).await.unwrap(),
            0,
            "deleting again finds nothing"
        );
    }

    #[tokio::test]
    async fn keys_are_built_only_from_valid_ids() {
        let f = fixture();
        assert!(matches!(
            f.objects.put_change_set_patch("proj_../x", "cs_1", "x").await,
            Err(SourceObjectsError::InvalidRowId(_))
        ));
        assert!(matches!(
            f.objects.put_change_set_patch(PROJECT, "../cs", "x").await,
            Err(SourceObjectsError::InvalidId { .. })
        ));
        assert!(matches!(
            f.objects.put_candidate_patch(PROJECT, "run_1", "x").await,
            Err(SourceObjectsError::InvalidRowId(_))
        ));
        assert!(SourceObjects::blob_key(PROJECT, "HEAD").is_err());
        assert!(SourceObjects::index_key(PROJECT, &"a".repeat(40)).is_ok());
    }
}

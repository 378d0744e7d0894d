//! The git service: bare repositories of one namespace, in process with gix.
//!
//! Canonical repositories hold each project's `main`; forks (task workspaces, Candidates, edit
//! sessions) borrow canonical's objects through `objects/info/alternates` and keep their own
//! `main`. The alternates graph is a star: every fork points at canonical and nothing else, so
//! deleting a fork can never break another one. Objects a fork needs from another fork are copied
//! (`copy_objects`), never borrowed.
//!
//! gix is blocking, so every public method is async and runs its gix work on
//! `tokio::task::spawn_blocking`; callers need no wrapping. `Repository` is opened per call: a
//! fresh open is cheap next to the work, and it sees refs other processes (`git receive-pack`
//! behind smart HTTP) moved meanwhile.
//!
//! A repository named `n` lives in `<root>/n.git`. Creation happens in `<root>/.n.git.tmp` and is
//! renamed into place, so a crash leaves a repository either complete or absent. Nothing here ever
//! lists the namespace: every path is derived from a name.

mod compose;
pub mod source_objects;

use belay_domain::diff::{DiffLimits, DiffLine, FileDiff, FileStatus, Hunk, LineKind, cut_hunks};
use belay_domain::repo::{RepoKind, RepoNameError, canonical_repo, repo_kind};
use gix::ObjectId;
use gix::bstr::ByteSlice;
use gix::objs::tree::{EntryKind, EntryMode};
use gix::refs::Target;
use gix::refs::transaction::PreviousValue;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use thiserror::Error;

/// The one branch the service manages.
pub const MAIN_REF: &str = "refs/heads/main";

/// The only file of generation S0.
pub const GITIGNORE: &str = "\
# Dependencies
node_modules/
.pnp
.pnp.js

# Build output
dist/
build/
out/
coverage/
*.tsbuildinfo

# Environment and secrets
.env
.env.*
!.env.example

# Logs and editor litter
*.log
.DS_Store
Thumbs.db
";

const SIGNATURE_NAME: &str = "belay";
const SIGNATURE_EMAIL: &str = "belay@localhost";
const BINARY_SNIFF_BYTES: usize = 8000;
const OBJECT_CACHE_BYTES: usize = 32 * 1024 * 1024;

#[derive(Debug, Error)]
pub enum GitError {
    #[error("`{0}` is not a repository name")]
    InvalidName(String),
    #[error(transparent)]
    InvalidId(#[from] RepoNameError),
    #[error("`{0}` cannot be a fork: forks are ws-, cand- or edit- repositories")]
    NotAForkName(String),
    #[error("`{0}` is not an object id")]
    InvalidObjectId(String),
    #[error("repository {0} does not exist")]
    NotFound(String),
    #[error("repository {repo} already exists with main at {main}")]
    AlreadyExists { repo: String, main: String },
    #[error("repository {0} has no main branch")]
    NoMain(String),
    #[error("repository {repo} borrows objects from more than one place; forks must borrow from canonical only")]
    NotAStar { repo: String },
    #[error("{repo} has no commit {commit}")]
    MissingCommit { repo: String, commit: String },
    #[error("{repo}: {new} does not descend from {expected}; main only moves forward")]
    NotFastForward {
        repo: String,
        expected: String,
        new: String,
    },
    #[error("{op} for {repo}")]
    Io {
        op: &'static str,
        repo: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{op} in {repo}")]
    Gix {
        op: &'static str,
        repo: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("the blocking git task failed")]
    Join(#[from] tokio::task::JoinError),
}

impl GitError {
    /// Whether a later attempt may succeed: disk and lock trouble may pass; bad names, missing
    /// commits and policy refusals will not.
    pub fn is_retryable(&self) -> bool {
        matches!(self, GitError::Io { .. } | GitError::Gix { .. } | GitError::Join(_))
    }
}

type Result<T, E = GitError> = std::result::Result<T, E>;

/// A provisioned canonical repository at generation S0.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provisioned {
    pub repo: String,
    pub commit: String,
    pub tree: String,
}

/// A fork and where its `main` starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForkInfo {
    pub repo: String,
    pub source: String,
    pub main: String,
    /// Objects copied from a source fork (zero when forking canonical).
    pub objects_copied: usize,
}

/// One file of a tree: its path, blob id and size in bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    pub path: String,
    pub blob: String,
    pub size: u64,
}

/// The composed commit after merging every tip.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Merged {
    pub commit: String,
    pub tree: String,
}

/// The first tip that did not merge, and the paths in conflict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conflict {
    pub label: String,
    pub paths: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum MergeOutcome {
    Merged(Merged),
    Conflict(Conflict),
}

pub use belay_domain::repo::Tip;

/// What [`GitService::fork_stacked`] made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum StackedFork {
    /// The fork's `main` is `start`: `base` (canonical `main` when forked) plus the merges;
    /// `tree` is `start`'s tree.
    Ready { base: String, start: String, tree: String },
    /// A stacked tip did not merge.
    Conflict { label: String, paths: Vec<String> },
}

/// The answer of a compare-and-swap of `main`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum CasOutcome {
    /// `main` moved from the expected commit to the new one.
    Moved,
    /// `main` already is the new commit (a retry of a swap that landed).
    AlreadyAt,
    /// `main` is somewhere else; nothing moved.
    Mismatch { actual: String },
}

/// A file change for [`GitService::commit_files`]: new contents, or `None` to delete.
pub type FileWrite = (String, Option<Vec<u8>>);

/// Bare repositories under `root` (`<data>/git/<namespace>`).
#[derive(Debug, Clone)]
pub struct GitService {
    root: PathBuf,
}

impl GitService {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where repository `name` lives on disk.
    pub fn repo_path(&self, name: &str) -> Result<PathBuf> {
        check_name(name)?;
        Ok(self.root.join(format!("{name}.git")))
    }

    /// Creates the canonical repository of `project_id`: `main` holding one commit with only
    /// `.gitignore`. Calling it again on a repository still at that state returns the same answer.
    pub async fn provision(&self, project_id: &str) -> Result<Provisioned> {
        let name = canonical_repo(project_id)?;
        self.blocking(move |root| provision(root, &name)).await
    }

    /// Forks `canonical` as `fork` and merges the stacked ChangeSet tips into the fork's `main`
    /// (each tip `(label, fork it lives in, commit)`, in order), copying the objects each tip
    /// needs so the new fork borrows only from canonical.
    ///
    /// The fork is composed in a staging directory and moved into place with its `main` at the
    /// merged commit, so a fork that exists is a finished one: a retry finds it and, when its
    /// `main` holds canonical's, answers the start it holds; a retry after a crash part-way
    /// starts over. A conflict leaves no fork. One blocking task opens each repository once.
    pub async fn fork_stacked(&self, canonical: &str, fork: &str, tips: &[Tip]) -> Result<StackedFork> {
        let (canonical, fork, tips) = (canonical.to_owned(), fork.to_owned(), tips.to_vec());
        self.blocking(move |root| fork_stacked(root, &canonical, &fork, &tips))
            .await
    }

    /// Creates `fork` from `source`'s `main`. The fork borrows canonical's objects even when
    /// `source` is itself a fork; objects only the source fork has are copied.
    pub async fn fork(&self, source: &str, fork: &str) -> Result<ForkInfo> {
        let (source, fork) = (source.to_owned(), fork.to_owned());
        self.blocking(move |root| create_fork(root, &source, &fork)).await
    }

    /// Deletes repository `name`; false when there was none.
    pub async fn delete_repo(&self, name: &str) -> Result<bool> {
        let name = name.to_owned();
        self.blocking(move |root| delete_repo(root, &name)).await
    }

    /// The commit `main` points at, if there is a `main`.
    pub async fn head(&self, repo: &str) -> Result<Option<String>> {
        let repo = repo.to_owned();
        self.blocking(move |root| {
            let r = open(root, &repo)?;
            Ok(main_of(&r, &repo)?.map(|id| id.to_string()))
        })
        .await
    }

    /// Whether `main` holds `commit`: it is `main` or one of its ancestors. The sweep asks this
    /// of canonical before deleting a promoted Candidate's fork.
    pub async fn main_contains(&self, repo: &str, commit: &str) -> Result<bool> {
        let (repo, commit) = (repo.to_owned(), commit.to_owned());
        self.blocking(move |root| {
            let r = open(root, &repo)?;
            let id = parse_id(&commit)?;
            let Some(main) = main_of(&r, &repo)? else {
                return Ok(false);
            };
            if main == id {
                return Ok(true);
            }
            if !r.has_object(id) {
                return Ok(false);
            }
            Ok(r.merge_base(main, id)
                .gix("find merge base", &repo)?
                .map(|b| b.detach())
                == Some(id))
        })
        .await
    }

    /// Every file of `commit`'s tree (submodules left out), sorted by path.
    pub async fn file_index(&self, repo: &str, commit: &str) -> Result<Vec<FileEntry>> {
        self.file_index_knowing(repo, commit, None).await
    }

    /// [`GitService::file_index`] taking the size of each blob listed in `known` (the stored file
    /// index of a tree this one grew from) instead of reading its object header: only the blobs
    /// it does not list are looked up.
    pub async fn file_index_knowing(
        &self,
        repo: &str,
        commit: &str,
        known: Option<Arc<source_objects::FileIndex>>,
    ) -> Result<Vec<FileEntry>> {
        let (repo, commit) = (repo.to_owned(), commit.to_owned());
        self.blocking(move |root| {
            let sizes: HashMap<&str, u64> = known
                .iter()
                .flat_map(|k| &k.files)
                .map(|f| (f.blob.as_str(), f.size))
                .collect();
            file_index(root, &repo, &commit, &sizes)
        })
        .await
    }

    /// The contents of `blobs`, in order.
    pub async fn read_blobs(&self, repo: &str, blobs: Vec<String>) -> Result<Vec<Vec<u8>>> {
        let repo = repo.to_owned();
        self.blocking(move |root| {
            let r = open(root, &repo)?;
            blobs
                .iter()
                .map(|b| Ok(r.find_object(parse_id(b)?).gix("read blob", &repo)?.detach().data))
                .collect()
        })
        .await
    }

    /// Writes a commit on `parent` with `files` changed; moves no ref. Paths use `/`.
    pub async fn commit_files(&self, repo: &str, parent: &str, files: Vec<FileWrite>, message: &str) -> Result<String> {
        let (repo, parent, message) = (repo.to_owned(), parent.to_owned(), message.to_owned());
        self.blocking(move |root| commit_files(root, &repo, &parent, &files, &message))
            .await
    }

    /// Merges `tips` into `base` in order, one merge commit per tip (`Merge <label>`), and stops
    /// at the first conflict. Tips `base` already contains are skipped. Moves no ref; the tips'
    /// objects must already be in `repo` (see [`GitService::copy_objects`]).
    pub async fn merge_into(&self, repo: &str, base: &str, tips: &[(String, String)]) -> Result<MergeOutcome> {
        let (repo, base, tips) = (repo.to_owned(), base.to_owned(), tips.to_vec());
        self.blocking(move |root| merge_into(root, &repo, &base, &tips)).await
    }

    /// Copies into `to_repo` every object reachable from `tip` that it lacks, walking no further
    /// than `base`. Returns how many objects were written.
    pub async fn copy_objects(&self, from_repo: &str, to_repo: &str, tip: &str, base: Option<&str>) -> Result<usize> {
        let (from, to, tip, base) = (
            from_repo.to_owned(),
            to_repo.to_owned(),
            tip.to_owned(),
            base.map(str::to_owned),
        );
        self.blocking(move |root| {
            let src = open(root, &from)?;
            let dst = open(root, &to)?;
            let hidden = base.as_deref().map(parse_id).transpose()?;
            copy_missing(&src, &dst, parse_id(&tip)?, hidden, &to)
        })
        .await
    }

    /// The change from `old` to `new` as a patch `git apply` accepts: paths sorted, added,
    /// deleted and mode-changed files, binary files as `GIT binary patch`, no rename detection.
    pub async fn unified_diff(&self, repo: &str, old: &str, new: &str) -> Result<String> {
        let (repo, old, new) = (repo.to_owned(), old.to_owned(), new.to_owned());
        self.blocking(move |root| unified_diff(root, &repo, &old, &new)).await
    }

    /// The change from `old` to `new` file by file, for a person to read: each file's status
    /// (renames detected), its hunks with both sides' line numbers, within `limits`. The second
    /// value says whether the bound left anything out.
    pub async fn file_diffs(
        &self,
        repo: &str,
        old: &str,
        new: &str,
        limits: DiffLimits,
    ) -> Result<(Vec<FileDiff>, bool)> {
        let (repo, old, new) = (repo.to_owned(), old.to_owned(), new.to_owned());
        self.blocking(move |root| file_diffs(root, &repo, &old, &new, &limits))
            .await
    }

    /// Whether repository `name` exists and holds commit `commit`.
    pub async fn has_commit(&self, name: &str, commit: &str) -> Result<bool> {
        let (name, commit) = (name.to_owned(), commit.to_owned());
        self.blocking(move |root| {
            let id = parse_id(&commit)?;
            match open(root, &name) {
                Ok(repo) => Ok(require_commit(&repo, &name, id).is_ok()),
                Err(GitError::NotFound(_)) => Ok(false),
                Err(e) => Err(e),
            }
        })
        .await
    }

    /// Turns on the reflog of repository `name` (see [`keep_reflog`]); repositories provisioned
    /// before it have none.
    pub async fn keep_reflog(&self, name: &str) -> Result<()> {
        let name = name.to_owned();
        self.blocking(move |root| {
            check_name(&name)?;
            keep_reflog(&path_of(root, &name), &name)
        })
        .await
    }

    /// Moves `main` from `expected` to `new`, fast-forward only, atomically against concurrent
    /// writers (gix and git share the ref lock files).
    pub async fn cas_main(&self, repo: &str, expected: &str, new: &str) -> Result<CasOutcome> {
        let (repo, expected, new) = (repo.to_owned(), expected.to_owned(), new.to_owned());
        self.blocking(move |root| cas_main(root, &repo, &expected, &new)).await
    }

    async fn blocking<T: Send + 'static>(&self, f: impl FnOnce(&Path) -> Result<T> + Send + 'static) -> Result<T> {
        let root = self.root.clone();
        tokio::task::spawn_blocking(move || f(&root)).await?
    }
}

trait GixContext<T> {
    fn gix(self, op: &'static str, repo: &str) -> Result<T>;
}

impl<T, E: Into<Box<dyn std::error::Error + Send + Sync>>> GixContext<T> for std::result::Result<T, E> {
    fn gix(self, op: &'static str, repo: &str) -> Result<T> {
        self.map_err(|e| GitError::Gix {
            op,
            repo: repo.to_owned(),
            source: e.into(),
        })
    }
}

fn io_err<'a>(op: &'static str, repo: &'a str) -> impl FnOnce(std::io::Error) -> GitError + 'a {
    move |source| GitError::Io {
        op,
        repo: repo.to_owned(),
        source,
    }
}

fn check_name(name: &str) -> Result<RepoKind> {
    repo_kind(name).ok_or_else(|| GitError::InvalidName(name.to_owned()))
}

fn path_of(root: &Path, name: &str) -> PathBuf {
    root.join(format!("{name}.git"))
}

fn staging_path_of(root: &Path, name: &str) -> PathBuf {
    root.join(format!(".{name}.git.tmp"))
}

fn parse_id(hex: &str) -> Result<ObjectId> {
    ObjectId::from_hex(hex.as_bytes()).map_err(|_| GitError::InvalidObjectId(hex.to_owned()))
}

fn open_path(path: &Path, name: &str) -> Result<gix::Repository> {
    let mut repo = gix::open_opts(path, gix::open::Options::isolated()).gix("open repository", name)?;
    repo.object_cache_size_if_unset(OBJECT_CACHE_BYTES);
    // Who moves a ref, for its reflog line: without an identity gix writes no reflog.
    let _identified = repo.committer_or_set_fallback("belay", "belay@localhost").is_ok();
    Ok(repo)
}

fn open(root: &Path, name: &str) -> Result<gix::Repository> {
    check_name(name)?;
    let path = path_of(root, name);
    if !path.join("HEAD").is_file() {
        return Err(GitError::NotFound(name.to_owned()));
    }
    open_path(&path, name)
}

fn main_of(repo: &gix::Repository, name: &str) -> Result<Option<ObjectId>> {
    let Some(mut r) = repo.try_find_reference(MAIN_REF).gix("read main", name)? else {
        return Ok(None);
    };
    Ok(Some(r.peel_to_id().gix("peel main", name)?.detach()))
}

fn require_commit(repo: &gix::Repository, name: &str, id: ObjectId) -> Result<()> {
    match repo.try_find_object(id).gix("look up commit", name)? {
        Some(o) if o.kind == gix::objs::Kind::Commit => Ok(()),
        _ => Err(GitError::MissingCommit {
            repo: name.to_owned(),
            commit: id.to_string(),
        }),
    }
}

fn commit(repo: &gix::Repository, name: &str, message: &str, tree: ObjectId, parents: &[ObjectId]) -> Result<ObjectId> {
    let signature = gix::actor::Signature {
        name: SIGNATURE_NAME.into(),
        email: SIGNATURE_EMAIL.into(),
        time: gix::date::Time::now_utc(),
    };
    let mut time = gix::date::parse::TimeBuf::default();
    let s = signature.to_ref(&mut time);
    Ok(repo
        .new_commit_as(s, s, message, tree, parents.iter().copied())
        .gix("write commit", name)?
        .id)
}

fn s0_tree(repo: &gix::Repository, name: &str) -> Result<ObjectId> {
    let blob = repo
        .write_blob(GITIGNORE.as_bytes())
        .gix("write .gitignore", name)?
        .detach();
    let mut editor = repo
        .edit_tree(ObjectId::empty_tree(repo.object_hash()))
        .gix("edit tree", name)?;
    editor
        .upsert(".gitignore", EntryKind::Blob, blob)
        .gix("edit tree", name)?;
    Ok(editor.write().gix("write tree", name)?.detach())
}

fn provision(root: &Path, name: &str) -> Result<Provisioned> {
    std::fs::create_dir_all(root).map_err(io_err("create the namespace directory", name))?;
    let path = path_of(root, name);
    if path.exists() {
        let repo = open_path(&path, name)?;
        let tree = s0_tree(&repo, name)?;
        let Some(main) = main_of(&repo, name)? else {
            return Err(GitError::NoMain(name.to_owned()));
        };
        let c = repo.find_commit(main).gix("read main", name)?;
        let at_s0 = c.parent_ids().next().is_none() && c.tree_id().gix("read main", name)?.detach() == tree;
        if !at_s0 {
            return Err(GitError::AlreadyExists {
                repo: name.to_owned(),
                main: main.to_string(),
            });
        }
        return Ok(Provisioned {
            repo: name.to_owned(),
            commit: main.to_string(),
            tree: tree.to_string(),
        });
    }
    let staging = fresh_staging(root, name)?;
    drop(gix::init_bare(&staging).gix("init bare repository", name)?);
    keep_reflog(&staging, name)?;
    let repo = open_path(&staging, name)?;
    let tree = s0_tree(&repo, name)?;
    let c = commit(&repo, name, "S0: .gitignore", tree, &[])?;
    repo.reference(MAIN_REF, c, PreviousValue::MustNotExist, "belay: provision")
        .gix("create main", name)?;
    drop(repo);
    std::fs::rename(&staging, &path).map_err(io_err("move the repository into place", name))?;
    tracing::info!(repo = name, commit = %c, "provisioned canonical repository");
    Ok(Provisioned {
        repo: name.to_owned(),
        commit: c.to_string(),
        tree: tree.to_string(),
    })
}

/// Makes every move of the repository's refs leave a reflog line (bare repositories keep none by
/// default), so canonical `main`'s history of moves can be read back and checked: each one a
/// fast-forward. Idempotent.
fn keep_reflog(path: &Path, name: &str) -> Result<()> {
    let config = path.join("config");
    let text = std::fs::read_to_string(&config).map_err(io_err("read config", name))?;
    // `init` writes `logallrefupdates = false` for a bare repository: turn that line on, or add one.
    let mut on = false;
    let mut lines: Vec<String> = text
        .lines()
        .map(|l| {
            let key = l.trim().to_ascii_lowercase();
            if key.starts_with("logallrefupdates") {
                on = true;
                "\tlogallrefupdates = true".to_owned()
            } else {
                l.to_owned()
            }
        })
        .collect();
    if !on {
        lines.push("[core]".to_owned());
        lines.push("\tlogallrefupdates = true".to_owned());
    }
    let updated = format!("{}\n", lines.join("\n"));
    if updated == text {
        return Ok(());
    }
    // Written aside and renamed into place, so a concurrent reader never sees half a file.
    let aside = path.join("config.belay-new");
    std::fs::write(&aside, updated).map_err(io_err("write config", name))?;
    std::fs::rename(&aside, &config).map_err(io_err("write config", name))
}

fn fresh_staging(root: &Path, name: &str) -> Result<PathBuf> {
    let staging = staging_path_of(root, name);
    if staging.exists() {
        std::fs::remove_dir_all(&staging).map_err(io_err("clear a leftover staging directory", name))?;
    }
    Ok(staging)
}

/// The alternates line a fork of `source` gets: canonical's objects, relative to the fork's
/// `objects` directory (every repository sits at the same depth, so one relative line fits all,
/// and it survives moving the data directory).
fn canonical_alternate(source_path: &Path, source: &str) -> Result<String> {
    let file = source_path.join("objects/info/alternates");
    match std::fs::read_to_string(&file) {
        Ok(text) => {
            let lines: Vec<&str> = text
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
                .collect();
            match lines[..] {
                [only] => Ok(only.to_owned()),
                [] => Ok(format!("../../{source}.git/objects")),
                _ => Err(GitError::NotAStar {
                    repo: source.to_owned(),
                }),
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(format!("../../{source}.git/objects")),
        Err(e) => Err(io_err("read alternates", source)(e)),
    }
}

fn fork_stacked(root: &Path, canonical: &str, fork: &str, tips: &[Tip]) -> Result<StackedFork> {
    let (_, base, alternate) = fork_source(root, canonical, fork)?;
    let path = path_of(root, fork);
    if path.exists() {
        // A retry after the fork was moved into place: the start it holds stands.
        let existing = open_path(&path, fork)?;
        let main = main_of(&existing, fork)?;
        let holds_base = match main {
            Some(m) => {
                m == base
                    || existing
                        .merge_base(m, base)
                        .gix("find merge base", fork)?
                        .map(|b| b.detach())
                        == Some(base)
            }
            None => false,
        };
        return match main {
            Some(m) if holds_base && canonical_alternate(&path, fork)? == alternate => Ok(StackedFork::Ready {
                base: base.to_string(),
                start: m.to_string(),
                tree: commit_tree(&existing, fork, m)?.to_string(),
            }),
            other => Err(already_exists(fork, other)),
        };
    }
    let (staging, dst) = staged_fork(root, fork, &alternate)?;
    let mut copied = 0;
    for tip in tips {
        let src = open(root, &tip.fork)?;
        copied += copy_missing(&src, &dst, parse_id(&tip.commit)?, Some(base), fork)?;
    }
    let labelled: Vec<(String, String)> = tips.iter().map(|t| (t.label.clone(), t.commit.clone())).collect();
    let merged = match merge_in(&dst, fork, base, &labelled)? {
        MergeOutcome::Merged(m) => m,
        MergeOutcome::Conflict(c) => {
            drop(dst);
            std::fs::remove_dir_all(&staging).map_err(io_err("remove a staging directory", fork))?;
            return Ok(StackedFork::Conflict {
                label: c.label,
                paths: c.paths,
            });
        }
    };
    let start = parse_id(&merged.commit)?;
    dst.reference(
        MAIN_REF,
        start,
        PreviousValue::MustNotExist,
        format!("belay: fork of {canonical} with {} stacked", tips.len()),
    )
    .gix("create main", fork)?;
    drop(dst);
    std::fs::rename(&staging, &path).map_err(io_err("move the repository into place", fork))?;
    tracing::info!(repo = fork, source = canonical, base = %base, start = %start, objects_copied = copied, "forked and composed repository");
    Ok(StackedFork::Ready {
        base: base.to_string(),
        start: merged.commit,
        tree: merged.tree,
    })
}

/// A new bare repository for `fork` in its staging directory, borrowing through `alternate`;
/// it is moved into place when it is complete.
fn staged_fork(root: &Path, fork: &str, alternate: &str) -> Result<(PathBuf, gix::Repository)> {
    let staging = fresh_staging(root, fork)?;
    drop(gix::init_bare(&staging).gix("init bare repository", fork)?);
    // Written before the first open, so the object database sees the alternate from the start.
    std::fs::write(staging.join("objects/info/alternates"), format!("{alternate}\n"))
        .map_err(io_err("write alternates", fork))?;
    let dst = open_path(&staging, fork)?;
    Ok((staging, dst))
}

fn already_exists(fork: &str, main: Option<ObjectId>) -> GitError {
    GitError::AlreadyExists {
        repo: fork.to_owned(),
        main: main.map_or_else(|| "nothing".to_owned(), |m| m.to_string()),
    }
}

fn commit_tree(repo: &gix::Repository, name: &str, commit: ObjectId) -> Result<ObjectId> {
    Ok(repo
        .find_commit(commit)
        .gix("read commit", name)?
        .tree_id()
        .gix("read commit", name)?
        .detach())
}

/// What forking `source` as `fork` starts from: the source repository, its `main` and the
/// alternates line the fork gets. Canonical is no fork name.
fn fork_source(root: &Path, source: &str, fork: &str) -> Result<(gix::Repository, ObjectId, String)> {
    if matches!(check_name(fork)?, RepoKind::Canonical) {
        return Err(GitError::NotAForkName(fork.to_owned()));
    }
    let src = open(root, source)?;
    let main = main_of(&src, source)?.ok_or_else(|| GitError::NoMain(source.to_owned()))?;
    let alternate = canonical_alternate(&path_of(root, source), source)?;
    Ok((src, main, alternate))
}

fn create_fork(root: &Path, source: &str, fork: &str) -> Result<ForkInfo> {
    let (src, source_main, alternate) = fork_source(root, source, fork)?;
    let path = path_of(root, fork);
    if path.exists() {
        let existing = open_path(&path, fork)?;
        let main = main_of(&existing, fork)?;
        let same_alternate = canonical_alternate(&path, fork)? == alternate;
        return match main {
            Some(m) if m == source_main && same_alternate => Ok(ForkInfo {
                repo: fork.to_owned(),
                source: source.to_owned(),
                main: m.to_string(),
                objects_copied: 0,
            }),
            other => Err(already_exists(fork, other)),
        };
    }
    let (staging, dst) = staged_fork(root, fork, &alternate)?;
    let objects_copied = if dst.has_object(source_main) {
        0
    } else {
        // The source is a fork with commits canonical lacks: copy them, stopping at canonical main.
        let canonical = canonical_name(&alternate);
        let hidden = match canonical.as_deref().map(|c| open(root, c)) {
            Some(Ok(c)) => main_of(&c, canonical.as_deref().unwrap_or_default())?,
            _ => None,
        };
        copy_missing(&src, &dst, source_main, hidden, fork)?
    };
    dst.reference(
        MAIN_REF,
        source_main,
        PreviousValue::MustNotExist,
        format!("belay: fork of {source}"),
    )
    .gix("create main", fork)?;
    drop(dst);
    std::fs::rename(&staging, &path).map_err(io_err("move the repository into place", fork))?;
    tracing::info!(repo = fork, source, main = %source_main, objects_copied, "forked repository");
    Ok(ForkInfo {
        repo: fork.to_owned(),
        source: source.to_owned(),
        main: source_main.to_string(),
        objects_copied,
    })
}

/// The canonical repository named by an alternates line we wrote (`../../<name>.git/objects`).
fn canonical_name(alternate: &str) -> Option<String> {
    let name = alternate.strip_prefix("../../")?.strip_suffix(".git/objects")?;
    matches!(repo_kind(name), Some(RepoKind::Canonical)).then(|| name.to_owned())
}

fn delete_repo(root: &Path, name: &str) -> Result<bool> {
    check_name(name)?;
    let staging = staging_path_of(root, name);
    if staging.exists() {
        std::fs::remove_dir_all(&staging).map_err(io_err("delete a staging directory", name))?;
    }
    let path = path_of(root, name);
    match std::fs::remove_dir_all(&path) {
        Ok(()) => {
            tracing::info!(repo = name, "deleted repository");
            Ok(true)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(io_err("delete repository", name)(e)),
    }
}

fn file_index(root: &Path, name: &str, commit: &str, known: &HashMap<&str, u64>) -> Result<Vec<FileEntry>> {
    let repo = open(root, name)?;
    let id = parse_id(commit)?;
    require_commit(&repo, name, id)?;
    let tree = repo
        .find_commit(id)
        .gix("read commit", name)?
        .tree()
        .gix("read tree", name)?;
    let mut files = Vec::new();
    for e in tree.traverse().breadthfirst.files().gix("walk tree", name)? {
        if e.mode.is_tree() || e.mode.is_commit() {
            continue;
        }
        let blob = e.oid.to_string();
        let size = match known.get(blob.as_str()) {
            Some(size) => *size,
            None => repo.find_header(e.oid).gix("read object header", name)?.size(),
        };
        files.push(FileEntry {
            path: e.filepath.to_string(),
            blob,
            size,
        });
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

fn commit_files(root: &Path, name: &str, parent: &str, files: &[FileWrite], message: &str) -> Result<String> {
    let repo = open(root, name)?;
    let parent = parse_id(parent)?;
    require_commit(&repo, name, parent)?;
    let base_tree = repo
        .find_commit(parent)
        .gix("read commit", name)?
        .tree_id()
        .gix("read commit", name)?
        .detach();
    let mut editor = repo.edit_tree(base_tree).gix("edit tree", name)?;
    for (path, contents) in files {
        match contents {
            Some(bytes) => {
                let blob = repo.write_blob(bytes).gix("write blob", name)?.detach();
                editor
                    .upsert(path.as_str(), EntryKind::Blob, blob)
                    .gix("edit tree", name)?;
            }
            None => {
                editor.remove(path.as_str()).gix("edit tree", name)?;
            }
        }
    }
    let tree = editor.write().gix("write tree", name)?.detach();
    Ok(commit(&repo, name, message, tree, &[parent])?.to_string())
}

fn merge_into(root: &Path, name: &str, base: &str, tips: &[(String, String)]) -> Result<MergeOutcome> {
    merge_in(&open(root, name)?, name, parse_id(base)?, tips)
}

fn merge_in(repo: &gix::Repository, name: &str, base: ObjectId, tips: &[(String, String)]) -> Result<MergeOutcome> {
    let mut current = base;
    require_commit(repo, name, current)?;
    for (label, tip) in tips {
        let tip = parse_id(tip)?;
        require_commit(repo, name, tip)?;
        let contained = tip == current
            || repo
                .merge_base(current, tip)
                .gix("find merge base", name)?
                .map(|id| id.detach())
                == Some(tip);
        if contained {
            continue;
        }
        let labels = gix::merge::blob::builtin_driver::text::Labels {
            ancestor: None,
            current: Some("candidate".into()),
            other: Some(label.as_str().into()),
        };
        let options = repo.tree_merge_options().gix("read merge options", name)?.into();
        let mut out = repo.merge_commits(current, tip, labels, options).gix("merge", name)?;
        let how = gix::merge::tree::TreatAsUnresolved::git();
        if out.tree_merge.has_unresolved_conflicts(how) {
            let mut paths: Vec<String> = out
                .tree_merge
                .conflicts
                .iter()
                .filter(|c| c.is_unresolved(how))
                .flat_map(|c| {
                    let (ours, theirs) = c.changes_in_resolution();
                    [ours.location().to_string(), theirs.location().to_string()]
                })
                .collect();
            paths.sort();
            paths.dedup();
            return Ok(MergeOutcome::Conflict(Conflict {
                label: label.clone(),
                paths,
            }));
        }
        let tree = out.tree_merge.tree.write().gix("write merged tree", name)?.detach();
        current = commit(repo, name, &format!("Merge {label}"), tree, &[current, tip])?;
    }
    let tree = commit_tree(repo, name, current)?;
    Ok(MergeOutcome::Merged(Merged {
        commit: current.to_string(),
        tree: tree.to_string(),
    }))
}

/// Copies what `dst` lacks of the history from `tip` down to (not into) `hidden`.
///
/// Objects are written children first, so a copy cut short never leaves a tree or commit whose
/// contents are missing; that is what lets `has_object` prune a whole subtree on the next run.
fn copy_missing(
    src: &gix::Repository,
    dst: &gix::Repository,
    tip: ObjectId,
    hidden: Option<ObjectId>,
    name: &str,
) -> Result<usize> {
    use gix::objs::Write as _;
    require_commit(src, "source", tip)?;
    let walk = src
        .rev_walk([tip])
        .with_hidden(hidden)
        .all()
        .gix("walk history", name)?;
    let commits: Vec<ObjectId> = walk
        .map(|i| i.map(|i| i.id))
        .collect::<std::result::Result<_, _>>()
        .gix("walk history", name)?;
    enum Step {
        Visit(ObjectId),
        Write(gix::objs::Kind, Vec<u8>),
    }
    let mut stack: Vec<Step> = commits.into_iter().map(Step::Visit).collect();
    let mut expanded: HashSet<ObjectId> = HashSet::new();
    let mut written = 0;
    while let Some(step) = stack.pop() {
        match step {
            Step::Write(kind, data) => {
                dst.objects.write_buf(kind, &data).gix("write object", name)?;
                written += 1;
            }
            Step::Visit(id) => {
                if dst.has_object(id) || !expanded.insert(id) {
                    continue;
                }
                let obj = src.find_object(id).gix("read object", name)?;
                let kind = obj.kind;
                let mut children = Vec::new();
                match kind {
                    gix::objs::Kind::Commit => {
                        children.push(obj.clone().into_commit().tree_id().gix("read commit", name)?.detach());
                    }
                    gix::objs::Kind::Tree => {
                        for e in obj.clone().into_tree().iter() {
                            let e = e.gix("read tree", name)?;
                            if !e.mode().is_commit() {
                                children.push(e.object_id());
                            }
                        }
                    }
                    _ => {}
                }
                stack.push(Step::Write(kind, obj.detach().data));
                stack.extend(children.into_iter().map(Step::Visit));
            }
        }
    }
    Ok(written)
}

fn cas_main(root: &Path, name: &str, expected: &str, new: &str) -> Result<CasOutcome> {
    let repo = open(root, name)?;
    let (expected, new) = (parse_id(expected)?, parse_id(new)?);
    require_commit(&repo, name, new)?;
    let current = main_of(&repo, name)?.ok_or_else(|| GitError::NoMain(name.to_owned()))?;
    if current == new {
        return Ok(CasOutcome::AlreadyAt);
    }
    if current != expected {
        return Ok(CasOutcome::Mismatch {
            actual: current.to_string(),
        });
    }
    let fast_forward = repo
        .merge_base(expected, new)
        .gix("find merge base", name)?
        .map(|id| id.detach())
        == Some(expected);
    if !fast_forward {
        return Err(GitError::NotFastForward {
            repo: name.to_owned(),
            expected: expected.to_string(),
            new: new.to_string(),
        });
    }
    let swapped = repo.reference(
        MAIN_REF,
        new,
        PreviousValue::MustExistAndMatch(Target::Object(expected)),
        "belay: fast-forward main",
    );
    match swapped {
        Ok(_) => Ok(CasOutcome::Moved),
        Err(e) => match main_of(&repo, name)? {
            // Someone else moved main between our read and the swap: a lost race is an answer.
            Some(actual) if actual == new => Ok(CasOutcome::AlreadyAt),
            Some(actual) if actual != expected => Ok(CasOutcome::Mismatch {
                actual: actual.to_string(),
            }),
            _ => Err(e).gix("move main", name),
        },
    }
}

// ---- unified diff ----

/// One side of a file change.
#[derive(Clone, Copy)]
struct Side {
    mode: EntryMode,
    id: ObjectId,
}

struct FileChange {
    path: Vec<u8>,
    old: Option<Side>,
    new: Option<Side>,
}

fn unified_diff(root: &Path, name: &str, old: &str, new: &str) -> Result<String> {
    let repo = open(root, name)?;
    let (old, new) = (parse_id(old)?, parse_id(new)?);
    require_commit(&repo, name, old)?;
    require_commit(&repo, name, new)?;
    let old_tree = repo
        .find_commit(old)
        .gix("read commit", name)?
        .tree()
        .gix("read tree", name)?;
    let new_tree = repo
        .find_commit(new)
        .gix("read commit", name)?
        .tree()
        .gix("read tree", name)?;
    let mut options = gix::diff::Options::default();
    options.track_path().track_rewrites(None);
    let changes = repo
        .diff_tree_to_tree(Some(&old_tree), Some(&new_tree), Some(options))
        .gix("diff trees", name)?;

    let mut files = Vec::new();
    for change in changes {
        use gix::object::tree::diff::ChangeDetached as C;
        let (path, old, new) = match change {
            C::Addition {
                location,
                entry_mode,
                id,
                ..
            } => (location, None, Some(Side { mode: entry_mode, id })),
            C::Deletion {
                location,
                entry_mode,
                id,
                ..
            } => (location, Some(Side { mode: entry_mode, id }), None),
            C::Modification {
                location,
                previous_entry_mode,
                previous_id,
                entry_mode,
                id,
            } => (
                location,
                Some(Side {
                    mode: previous_entry_mode,
                    id: previous_id,
                }),
                Some(Side { mode: entry_mode, id }),
            ),
            C::Rewrite { .. } => unreachable!("rewrite tracking is off"),
        };
        let old = old.filter(|s| !s.mode.is_tree());
        let new = new.filter(|s| !s.mode.is_tree());
        let path: Vec<u8> = path.into();
        match (old, new) {
            (None, None) => {}
            // A file that became a symlink or a submodule (or back) is a deletion and an addition.
            (Some(o), Some(n)) if kind_class(o.mode) != kind_class(n.mode) => {
                files.push(FileChange {
                    path: path.clone(),
                    old: Some(o),
                    new: None,
                });
                files.push(FileChange {
                    path,
                    old: None,
                    new: Some(n),
                });
            }
            (old, new) => files.push(FileChange { path, old, new }),
        }
    }
    // git orders by full path; a stable sort keeps a deletion before an addition of one path.
    files.sort_by(|a, b| a.path.cmp(&b.path));

    let mut out = String::new();
    for file in &files {
        render_file(&repo, name, file, &mut out)?;
    }
    Ok(out)
}

/// One file of [`file_diffs`] before its lines are read: where it was and where it is.
struct ReadableChange {
    path: Vec<u8>,
    old_path: Option<Vec<u8>>,
    old: Option<Side>,
    new: Option<Side>,
}

fn file_diffs(root: &Path, name: &str, old: &str, new: &str, limits: &DiffLimits) -> Result<(Vec<FileDiff>, bool)> {
    let repo = open(root, name)?;
    let (old, new) = (parse_id(old)?, parse_id(new)?);
    require_commit(&repo, name, old)?;
    require_commit(&repo, name, new)?;
    let tree_of = |id: ObjectId| -> Result<gix::Tree<'_>> {
        repo.find_commit(id)
            .gix("read commit", name)?
            .tree()
            .gix("read tree", name)
    };
    let (old_tree, new_tree) = (tree_of(old)?, tree_of(new)?);
    let mut options = gix::diff::Options::default();
    options
        .track_path()
        .track_rewrites(Some(gix::diff::Rewrites::default()));
    let changes = repo
        .diff_tree_to_tree(Some(&old_tree), Some(&new_tree), Some(options))
        .gix("diff trees", name)?;

    let mut files = Vec::new();
    for change in changes {
        use gix::object::tree::diff::ChangeDetached as C;
        let (path, old_path, old, new) = match change {
            C::Addition {
                location,
                entry_mode,
                id,
                ..
            } => (location, None, None, Some(Side { mode: entry_mode, id })),
            C::Deletion {
                location,
                entry_mode,
                id,
                ..
            } => (location, None, Some(Side { mode: entry_mode, id }), None),
            C::Modification {
                location,
                previous_entry_mode,
                previous_id,
                entry_mode,
                id,
            } => (
                location,
                None,
                Some(Side {
                    mode: previous_entry_mode,
                    id: previous_id,
                }),
                Some(Side { mode: entry_mode, id }),
            ),
            C::Rewrite {
                source_location,
                source_entry_mode,
                source_id,
                entry_mode,
                id,
                location,
                copy,
                ..
            } => {
                let new = Some(Side { mode: entry_mode, id });
                if copy {
                    (location, None, None, new)
                } else {
                    let old = Some(Side {
                        mode: source_entry_mode,
                        id: source_id,
                    });
                    (location, Some(Vec::from(source_location)), old, new)
                }
            }
        };
        let old = old.filter(|s| !s.mode.is_tree());
        let new = new.filter(|s| !s.mode.is_tree());
        let path: Vec<u8> = path.into();
        match (old, new) {
            (None, None) => {}
            (Some(o), Some(n)) if old_path.is_none() && kind_class(o.mode) != kind_class(n.mode) => {
                files.push(ReadableChange {
                    path: path.clone(),
                    old_path: None,
                    old: Some(o),
                    new: None,
                });
                files.push(ReadableChange {
                    path,
                    old_path: None,
                    old: None,
                    new: Some(n),
                });
            }
            (old, new) => files.push(ReadableChange {
                path,
                old_path,
                old,
                new,
            }),
        }
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));

    let mut remaining = limits.max_lines;
    let mut any_truncated = false;
    let mut out = Vec::with_capacity(files.len());
    for (i, file) in files.iter().enumerate() {
        let status = match (&file.old_path, file.old, file.new) {
            (Some(_), _, _) => FileStatus::Renamed,
            (None, None, _) => FileStatus::Added,
            (None, _, None) => FileStatus::Deleted,
            (None, Some(_), Some(_)) => FileStatus::Modified,
        };
        let mut diff = FileDiff {
            path: String::from_utf8_lossy(&file.path).into_owned(),
            old_path: file.old_path.as_ref().map(|p| String::from_utf8_lossy(p).into_owned()),
            status,
            binary: false,
            additions: None,
            deletions: None,
            hunks: Vec::new(),
            truncated: false,
            citations: Vec::new(),
        };
        let size = |side: Option<Side>| -> Result<u64> {
            match side {
                Some(s) if !s.mode.is_commit() => Ok(repo.find_header(s.id).gix("read blob header", name)?.size()),
                _ => Ok(0),
            }
        };
        let within = i < limits.max_files as usize && remaining > 0;
        if !within || size(file.old)? > limits.max_blob_bytes || size(file.new)? > limits.max_blob_bytes {
            diff.truncated = true;
            any_truncated = true;
            out.push(diff);
            continue;
        }
        let before = side_data(&repo, name, file.old)?;
        let after = side_data(&repo, name, file.new)?;
        if is_binary(&before) || is_binary(&after) {
            diff.binary = true;
            out.push(diff);
            continue;
        }
        let hunks = read_hunks(&before, &after);
        let count = |k: LineKind| -> u32 {
            let n = hunks.iter().flat_map(|h| &h.lines).filter(|l| l.kind == k).count();
            u32::try_from(n).unwrap_or(u32::MAX)
        };
        diff.additions = Some(count(LineKind::Added));
        diff.deletions = Some(count(LineKind::Removed));
        let (kept, truncated) = cut_hunks(hunks, limits, &mut remaining);
        diff.hunks = kept;
        diff.truncated = truncated;
        any_truncated |= truncated;
        out.push(diff);
    }
    Ok((out, any_truncated))
}

fn read_hunks(before: &[u8], after: &[u8]) -> Vec<Hunk> {
    use gix::diff::blob::{
        Algorithm, InternedInput, UnifiedDiff, diff_with_slider_heuristics, unified_diff::ContextSize,
    };
    let input = InternedInput::new(before, after);
    let diff = diff_with_slider_heuristics(Algorithm::Histogram, &input);
    UnifiedDiff::new(&diff, &input, ReadHunks(Vec::new()), ContextSize::symmetrical(3))
        .consume()
        .unwrap_or_default()
}

/// Collects hunks with each line's number on both sides: a context line moves both counters,
/// a removed line the old one, an added line the new one.
struct ReadHunks(Vec<Hunk>);

impl gix::diff::blob::unified_diff::ConsumeHunk for ReadHunks {
    type Out = Vec<Hunk>;

    fn consume_hunk(
        &mut self,
        h: gix::diff::blob::unified_diff::HunkHeader,
        lines: &[(gix::diff::blob::unified_diff::DiffLineKind, &[u8])],
    ) -> std::io::Result<()> {
        use gix::diff::blob::unified_diff::DiffLineKind as K;
        let (mut old, mut new) = (h.before_hunk_start, h.after_hunk_start);
        let mut out = Vec::with_capacity(lines.len());
        for (kind, line) in lines {
            let text = String::from_utf8_lossy(line);
            let text = text.strip_suffix('\n').unwrap_or(&text);
            let text = text.strip_suffix('\r').unwrap_or(text).to_owned();
            let (kind, old_line, new_line) = match kind {
                K::Context => (LineKind::Context, Some(old), Some(new)),
                K::Remove => (LineKind::Removed, Some(old), None),
                K::Add => (LineKind::Added, None, Some(new)),
            };
            if old_line.is_some() {
                old += 1;
            }
            if new_line.is_some() {
                new += 1;
            }
            out.push(DiffLine {
                kind,
                old_line,
                new_line,
                text,
                cited_by: Vec::new(),
            });
        }
        // As git writes it: an empty side starts at the line before (`-0,0`).
        let start = |s: u32, n: u32| if n == 0 { s.saturating_sub(1) } else { s };
        self.0.push(Hunk {
            old_start: start(h.before_hunk_start, h.before_hunk_len),
            old_lines: h.before_hunk_len,
            new_start: start(h.after_hunk_start, h.after_hunk_len),
            new_lines: h.after_hunk_len,
            lines: out,
        });
        Ok(())
    }

    fn finish(self) -> Vec<Hunk> {
        self.0
    }
}

fn kind_class(mode: EntryMode) -> u8 {
    if mode.is_commit() {
        2
    } else if mode.is_link() {
        1
    } else {
        0
    }
}

fn mode_str(mode: EntryMode) -> String {
    format!("{:o}", mode.value())
}

fn side_data(repo: &gix::Repository, name: &str, side: Option<Side>) -> Result<Vec<u8>> {
    match side {
        None => Ok(Vec::new()),
        Some(s) if s.mode.is_commit() => Ok(format!("Subproject commit {}\n", s.id).into_bytes()),
        Some(s) => Ok(repo.find_object(s.id).gix("read blob", name)?.detach().data),
    }
}

/// Text is what renders as UTF-8 lines; anything with a NUL near the start, or not UTF-8, goes
/// out as a binary patch so the patch itself stays UTF-8 and still applies.
fn is_binary(data: &[u8]) -> bool {
    data[..data.len().min(BINARY_SNIFF_BYTES)].contains(&0) || std::str::from_utf8(data).is_err()
}

fn render_file(repo: &gix::Repository, name: &str, file: &FileChange, out: &mut String) -> Result<()> {
    let a = quote_path("a/", &file.path);
    let b = quote_path("b/", &file.path);
    let _ = writeln!(out, "diff --git {a} {b}");
    let zero = ObjectId::null(repo.object_hash());
    let (old_id, new_id) = (file.old.map_or(zero, |s| s.id), file.new.map_or(zero, |s| s.id));
    match (file.old, file.new) {
        (None, Some(n)) => {
            let _ = writeln!(out, "new file mode {}", mode_str(n.mode));
        }
        (Some(o), None) => {
            let _ = writeln!(out, "deleted file mode {}", mode_str(o.mode));
        }
        (Some(o), Some(n)) if o.mode.value() != n.mode.value() => {
            let _ = writeln!(out, "old mode {}\nnew mode {}", mode_str(o.mode), mode_str(n.mode));
        }
        _ => {}
    }
    if old_id == new_id {
        return Ok(()); // a mode change only
    }
    match (file.old, file.new) {
        (Some(o), Some(n)) if o.mode.value() == n.mode.value() => {
            let _ = writeln!(out, "index {old_id}..{new_id} {}", mode_str(n.mode));
        }
        _ => {
            let _ = writeln!(out, "index {old_id}..{new_id}");
        }
    }
    let before = side_data(repo, name, file.old)?;
    let after = side_data(repo, name, file.new)?;
    if is_binary(&before) || is_binary(&after) {
        out.push_str("GIT binary patch\n");
        binary_literal(&after, out);
        binary_literal(&before, out);
        return Ok(());
    }
    let hunks = text_hunks(&before, &after);
    if hunks.is_empty() {
        return Ok(()); // an empty file added or deleted: git writes no ---/+++ lines
    }
    // Like git, end a name holding a space with a tab, so `git apply` knows where it stops.
    let tab = |name: String| if name.contains(' ') { format!("{name}\t") } else { name };
    let minus = if file.old.is_some() {
        tab(a)
    } else {
        "/dev/null".to_owned()
    };
    let plus = if file.new.is_some() {
        tab(b)
    } else {
        "/dev/null".to_owned()
    };
    let _ = writeln!(out, "--- {minus}\n+++ {plus}");
    out.push_str(&hunks);
    Ok(())
}

fn text_hunks(before: &[u8], after: &[u8]) -> String {
    use gix::diff::blob::{
        Algorithm, InternedInput, UnifiedDiff, diff_with_slider_heuristics, unified_diff::ContextSize,
    };
    let input = InternedInput::new(before, after);
    let diff = diff_with_slider_heuristics(Algorithm::Histogram, &input);
    UnifiedDiff::new(&diff, &input, GitHunks(String::new()), ContextSize::symmetrical(3))
        .consume()
        .expect("writing hunks into a String cannot fail")
}

/// Renders hunks the way git does: `-0,0` for an empty side, no `,1`, and an explicit
/// `\ No newline at end of file` (gix's stock consumer differs on all three).
struct GitHunks(String);

impl gix::diff::blob::unified_diff::ConsumeHunk for GitHunks {
    type Out = String;

    fn consume_hunk(
        &mut self,
        h: gix::diff::blob::unified_diff::HunkHeader,
        lines: &[(gix::diff::blob::unified_diff::DiffLineKind, &[u8])],
    ) -> std::io::Result<()> {
        let range = |start: u32, len: u32| match len {
            0 => format!("{},0", start.saturating_sub(1)),
            1 => format!("{start}"),
            n => format!("{start},{n}"),
        };
        let _ = writeln!(
            self.0,
            "@@ -{} +{} @@",
            range(h.before_hunk_start, h.before_hunk_len),
            range(h.after_hunk_start, h.after_hunk_len)
        );
        for (kind, line) in lines {
            self.0.push(kind.to_prefix());
            // Both sides were checked to be UTF-8 and lines split at '\n', so this is lossless.
            self.0.push_str(&String::from_utf8_lossy(line));
            if !line.ends_with(b"\n") {
                self.0.push_str("\n\\ No newline at end of file\n");
            }
        }
        Ok(())
    }

    fn finish(self) -> String {
        self.0
    }
}

const BASE85: &[u8; 85] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~";

/// One `literal` hunk of a `GIT binary patch`: zlib-deflated data in git's base85 lines of at
/// most 52 bytes, each prefixed with its length (`A`=1 … `Z`=26, `a`=27 … `z`=52).
fn binary_literal(data: &[u8], out: &mut String) {
    let mut z = gix::zlib::stream::deflate::Write::new(Vec::new(), gix::zlib::Compression::DEFAULT);
    z.write_all(data)
        .and_then(|()| z.flush())
        .expect("deflating into a Vec cannot fail");
    let deflated = z.into_inner();
    let _ = writeln!(out, "literal {}", data.len());
    for line in deflated.chunks(52) {
        let n = line.len() as u8;
        out.push(if n <= 26 {
            (b'A' + n - 1) as char
        } else {
            (b'a' + n - 27) as char
        });
        for group in line.chunks(4) {
            let mut word = [0u8; 4];
            word[..group.len()].copy_from_slice(group);
            let mut acc = u32::from_be_bytes(word);
            let mut chars = [0u8; 5];
            for c in chars.iter_mut().rev() {
                *c = BASE85[(acc % 85) as usize];
                acc /= 85;
            }
            out.extend(chars.iter().map(|&c| c as char));
        }
        out.push('\n');
    }
    out.push('\n');
}

/// `prefix` + `path`, C-quoted the way git quotes unusual paths (`core.quotePath`).
fn quote_path(prefix: &str, path: &[u8]) -> String {
    let needs_quotes = path
        .iter()
        .any(|&b| b < 0x20 || b == 0x7f || b == b'"' || b == b'\\' || b >= 0x80);
    if !needs_quotes {
        return format!("{prefix}{}", path.as_bstr());
    }
    let mut s = String::from("\"");
    s.push_str(prefix);
    for &b in path {
        match b {
            b'\x07' => s.push_str("\\a"),
            b'\x08' => s.push_str("\\b"),
            b'\t' => s.push_str("\\t"),
            b'\n' => s.push_str("\\n"),
            b'\x0b' => s.push_str("\\v"),
            b'\x0c' => s.push_str("\\f"),
            b'\r' => s.push_str("\\r"),
            b'"' => s.push_str("\\\""),
            b'\\' => s.push_str("\\\\"),
            b if !(0x20..0x7f).contains(&b) => {
                let _ = write!(s, "\\{b:03o}");
            }
            b => s.push(b as char),
        }
    }
    s.push('"');
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    const PROJECT: &str = "proj_0a1b2c";

    /// Runs the real git CLI, isolated from the machine's configuration, and returns stdout.
    fn git(dir: &Path, args: &[&str]) -> String {
        git_with_input(dir, args, None)
    }

    fn git_with_input(dir: &Path, args: &[&str], input: Option<&[u8]>) -> String {
        let mut cmd = Command::new("git");
        cmd.current_dir(dir)
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@t")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t")
            .stdin(if input.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("git runs");
        if let Some(input) = input {
            child.stdin.take().unwrap().write_all(input).unwrap();
        }
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "git {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    fn fsck(svc: &GitService, repo: &str) {
        git(&svc.repo_path(repo).unwrap(), &["fsck", "--strict", "--no-dangling"]);
    }

    fn service() -> (tempfile::TempDir, GitService) {
        let dir = tempfile::tempdir().unwrap();
        let svc = GitService::new(dir.path().join("git/belay"));
        (dir, svc)
    }

    fn merged(outcome: MergeOutcome) -> Merged {
        match outcome {
            MergeOutcome::Merged(m) => m,
            MergeOutcome::Conflict(c) => panic!("unexpected conflict {c:?}"),
        }
    }

    /// Adds one commit of `files` generated files on top of canonical main with `git fast-import`,
    /// which packs them: the fastest honest way to a big repository.
    fn grow_canonical(svc: &GitService, files: usize) -> String {
        let path = svc.repo_path(PROJECT).unwrap();
        let mut script = Vec::new();
        let _ = writeln!(
            script,
            "commit refs/heads/main\ncommitter t <t@t> 1700000000 +0000\ndata 4\ngrow\nfrom refs/heads/main^0"
        );
        for i in 0..files {
            let body = format!("// file {i}\npub fn f{i}() -> usize {{ {i} }}\n");
            let _ = write!(
                script,
                "M 100644 inline src/m{}/f{i}.rs\ndata {}\n{body}\n",
                i / 500,
                body.len()
            );
        }
        git_with_input(&path, &["fast-import", "--quiet"], Some(&script));
        git(&path, &["rev-parse", "refs/heads/main"]).trim().to_owned()
    }

    #[tokio::test]
    async fn provisioning_makes_one_gitignore_commit_on_main_that_fsck_accepts() {
        let (_d, svc) = service();
        let p = svc.provision(PROJECT).await.unwrap();
        let path = svc.repo_path(PROJECT).unwrap();
        assert_eq!(git(&path, &["symbolic-ref", "HEAD"]).trim(), MAIN_REF);
        assert_eq!(git(&path, &["rev-parse", "main"]).trim(), p.commit);
        assert_eq!(git(&path, &["ls-tree", "--name-only", "main"]).trim(), ".gitignore");
        assert_eq!(git(&path, &["show", "main:.gitignore"]), GITIGNORE);
        assert_eq!(git(&path, &["rev-list", "--count", "main"]).trim(), "1");
        fsck(&svc, PROJECT);
        assert_eq!(
            svc.provision(PROJECT).await.unwrap(),
            p,
            "provisioning again is a no-op"
        );
        assert!(matches!(svc.provision("proj_../x").await, Err(GitError::InvalidId(_))));
    }

    #[tokio::test]
    async fn a_provisioned_repository_that_moved_on_is_not_provisioned_again() {
        let (_d, svc) = service();
        let p = svc.provision(PROJECT).await.unwrap();
        let next = svc
            .commit_files(PROJECT, &p.commit, vec![("a.txt".into(), Some(b"a\n".to_vec()))], "a")
            .await
            .unwrap();
        assert_eq!(
            svc.cas_main(PROJECT, &p.commit, &next).await.unwrap(),
            CasOutcome::Moved
        );
        assert!(matches!(
            svc.provision(PROJECT).await,
            Err(GitError::AlreadyExists { .. })
        ));
    }

    #[tokio::test]
    async fn a_fork_copies_no_objects_whether_canonical_has_ten_or_fifty_thousand_files() {
        for files in [10, 50_000] {
            let (_d, svc) = service();
            svc.provision(PROJECT).await.unwrap();
            let main = grow_canonical(&svc, files);
            let fork = svc.fork(PROJECT, "ws-1").await.unwrap();
            assert_eq!(fork.main, main);
            assert_eq!(fork.objects_copied, 0);
            let alternates =
                std::fs::read_to_string(svc.repo_path("ws-1").unwrap().join("objects/info/alternates")).unwrap();
            assert_eq!(alternates, format!("../../{PROJECT}.git/objects\n"));
            assert_eq!(svc.file_index("ws-1", &main).await.unwrap().len(), files + 1);
            fsck(&svc, "ws-1");

            // Forking writes a ref and an alternates file, whatever the size, so it takes the
            // same time for both (`belay bench source` measures it against `git clone --bare`).
        }
    }

    #[tokio::test]
    async fn composing_three_change_sets_on_fifty_thousand_files_gives_the_tree_git_merge_tree_gives() {
        let (_d, svc) = service();
        svc.provision(PROJECT).await.unwrap();
        let base = grow_canonical(&svc, 50_000);
        let mut tips = Vec::new();
        for t in 0..3 {
            let files = vec![
                (
                    format!("src/m{}/f{}.rs", t * 10, t * 5000),
                    Some(format!("// changed by t{t}\n").into_bytes()),
                ),
                (format!("src/new/t{t}.rs"), Some(b"pub fn new() {}\n".to_vec())),
            ];
            tips.push((
                format!("t{t}"),
                svc.commit_files(PROJECT, &base, files, "change").await.unwrap(),
            ));
        }
        let m = merged(svc.merge_into(PROJECT, &base, &tips).await.unwrap());

        let path = svc.repo_path(PROJECT).unwrap();
        let mut current = base.clone();
        for (_, tip) in &tips {
            let tree = git(&path, &["merge-tree", "--write-tree", &current, tip])
                .trim()
                .to_owned();
            current = git(&path, &["commit-tree", &tree, "-p", &current, "-p", tip, "-m", "merge"])
                .trim()
                .to_owned();
        }
        assert_eq!(
            git(&path, &["rev-parse", &format!("{current}^{{tree}}")]).trim(),
            m.tree
        );
    }

    #[tokio::test]
    async fn a_stacked_fork_appears_only_composed_and_a_retry_answers_the_start_it_holds() {
        let (_d, svc) = service();
        let p = svc.provision(PROJECT).await.unwrap();
        let lines: String = (1..=20).map(|i| format!("line {i}\n")).collect();
        let edit = |from: &str, to: &str| Some(lines.replace(from, to).into_bytes());
        let base = svc
            .commit_files(
                PROJECT,
                &p.commit,
                vec![("notes.txt".into(), Some(lines.clone().into_bytes()))],
                "base",
            )
            .await
            .unwrap();
        svc.cas_main(PROJECT, &p.commit, &base).await.unwrap();
        // Each ChangeSet in a workspace fork of its own, as agents publish them.
        let mut tips = Vec::new();
        for (label, from, to) in [("t1", "line 2\n", "line two\n"), ("t2", "line 19\n", "line nineteen\n")] {
            let ws = format!("ws-{label}");
            svc.fork(PROJECT, &ws).await.unwrap();
            let commit = svc
                .commit_files(&ws, &base, vec![("notes.txt".into(), edit(from, to))], label)
                .await
                .unwrap();
            tips.push(Tip {
                label: label.into(),
                fork: ws,
                commit,
            });
        }

        // A crash part-way left a staging directory: the compose starts over.
        let staging = svc.root().join(".cand-1.git.tmp");
        std::fs::create_dir_all(staging.join("objects")).unwrap();
        std::fs::write(staging.join("HEAD"), "garbage").unwrap();
        let StackedFork::Ready {
            base: forked_at,
            start,
            tree,
        } = svc.fork_stacked(PROJECT, "cand-1", &tips).await.unwrap()
        else {
            panic!("the two ChangeSets touch different lines");
        };
        assert_eq!(forked_at, base);
        assert!(!staging.exists());
        assert_eq!(svc.head("cand-1").await.unwrap().as_deref(), Some(start.as_str()));
        assert_eq!(svc.tree_of("cand-1", &start).await.unwrap(), tree);
        let path = svc.repo_path("cand-1").unwrap();
        let text = git(&path, &["show", &format!("{start}:notes.txt")]);
        assert!(
            text.contains("line two\n") && text.contains("line nineteen\n"),
            "{text}"
        );
        assert_eq!(
            git(&path, &["log", "--format=%s", &start, "-2"]),
            "Merge t2\nMerge t1\n"
        );
        // The fork borrows only from canonical: its own objects hold what the tips added.
        assert_eq!(
            std::fs::read_to_string(path.join("objects/info/alternates"))
                .unwrap()
                .trim(),
            format!("../../{PROJECT}.git/objects")
        );
        fsck(&svc, "cand-1");

        // A retry (the activity's answer was lost) answers what the fork holds.
        assert_eq!(
            svc.fork_stacked(PROJECT, "cand-1", &tips).await.unwrap(),
            StackedFork::Ready {
                base: base.clone(),
                start: start.clone(),
                tree
            }
        );

        // A conflict leaves neither a fork nor a staging directory.
        let ws = "ws-t3".to_owned();
        svc.fork(PROJECT, &ws).await.unwrap();
        let t3 = svc
            .commit_files(
                &ws,
                &base,
                vec![("notes.txt".into(), edit("line 2\n", "line deux\n"))],
                "t3",
            )
            .await
            .unwrap();
        tips.push(Tip {
            label: "t3".into(),
            fork: ws,
            commit: t3,
        });
        assert_eq!(
            svc.fork_stacked(PROJECT, "cand-2", &tips).await.unwrap(),
            StackedFork::Conflict {
                label: "t3".into(),
                paths: vec!["notes.txt".into()]
            }
        );
        assert!(!svc.repo_path("cand-2").unwrap().exists());
        assert!(!svc.root().join(".cand-2.git.tmp").exists());
        // Canonical is no fork name.
        assert!(matches!(
            svc.fork_stacked(PROJECT, PROJECT, &tips).await,
            Err(GitError::NotAForkName(_))
        ));
    }

    #[tokio::test]
    async fn a_fork_of_a_fork_borrows_from_canonical_and_copies_what_only_the_source_fork_has() {
        let (_d, svc) = service();
        let p = svc.provision(PROJECT).await.unwrap();
        svc.fork(PROJECT, "ws-1").await.unwrap();
        let work = svc
            .commit_files(
                "ws-1",
                &p.commit,
                vec![("src/a.rs".into(), Some(b"fn a() {}\n".to_vec()))],
                "t1",
            )
            .await
            .unwrap();
        svc.cas_main("ws-1", &p.commit, &work).await.unwrap();

        let edit = svc.fork("ws-1", "edit-9f").await.unwrap();
        assert_eq!(edit.main, work);
        assert_eq!(edit.objects_copied, 4, "commit, root tree, src tree and blob: {edit:?}");
        let alternates =
            std::fs::read_to_string(svc.repo_path("edit-9f").unwrap().join("objects/info/alternates")).unwrap();
        assert_eq!(alternates, format!("../../{PROJECT}.git/objects\n"));
        assert!(svc.delete_repo("ws-1").await.unwrap());
        fsck(&svc, "edit-9f");
        assert_eq!(
            git(&svc.repo_path("edit-9f").unwrap(), &["show", "main:src/a.rs"]),
            "fn a() {}\n"
        );
        assert!(matches!(
            svc.fork(PROJECT, "proj_ff").await,
            Err(GitError::NotAForkName(_))
        ));
        assert!(matches!(svc.fork("ws-404", "cand-1").await, Err(GitError::NotFound(_))));
    }

    #[tokio::test]
    async fn deleting_a_workspace_fork_leaves_a_candidate_that_copied_its_objects_intact() {
        let (_d, svc) = service();
        let p = svc.provision(PROJECT).await.unwrap();
        svc.fork(PROJECT, "ws-1").await.unwrap();
        let files = (0..20)
            .map(|i| (format!("src/f{i}.rs"), Some(format!("fn f{i}() {{}}\n").into_bytes())))
            .collect();
        let tip = svc.commit_files("ws-1", &p.commit, files, "t1").await.unwrap();
        assert_eq!(svc.cas_main("ws-1", &p.commit, &tip).await.unwrap(), CasOutcome::Moved);

        svc.fork(PROJECT, "cand-1").await.unwrap();
        let copied = svc.copy_objects("ws-1", "cand-1", &tip, Some(&p.commit)).await.unwrap();
        assert_eq!(copied, 1 + 2 + 20, "commit, two trees, twenty blobs");
        assert_eq!(
            svc.copy_objects("ws-1", "cand-1", &tip, Some(&p.commit)).await.unwrap(),
            0,
            "copying again finds nothing missing"
        );
        let m = merged(
            svc.merge_into("cand-1", &p.commit, &[("t1".into(), tip.clone())])
                .await
                .unwrap(),
        );
        assert_eq!(
            svc.cas_main("cand-1", &p.commit, &m.commit).await.unwrap(),
            CasOutcome::Moved
        );

        assert!(svc.delete_repo("ws-1").await.unwrap());
        assert!(
            !svc.delete_repo("ws-1").await.unwrap(),
            "deleting twice is not an error"
        );
        assert!(!svc.repo_path("ws-1").unwrap().exists());
        fsck(&svc, "cand-1");
        let cand = svc.repo_path("cand-1").unwrap();
        assert_eq!(git(&cand, &["show", "main:src/f7.rs"]), "fn f7() {}\n");
        assert_eq!(svc.file_index("cand-1", &m.commit).await.unwrap().len(), 21);
        assert_eq!(git(&cand, &["rev-parse", "main^2"]).trim(), tip);
    }

    #[tokio::test]
    async fn a_file_index_knowing_the_base_sizes_equals_the_full_one_and_reads_only_new_headers() {
        let (_d, svc) = service();
        let p = svc.provision(PROJECT).await.unwrap();
        let files = (0..30)
            .map(|i| (format!("src/f{i}.rs"), Some(vec![b'x'; i + 1])))
            .collect();
        let base = svc.commit_files(PROJECT, &p.commit, files, "base").await.unwrap();
        let next = svc
            .commit_files(
                PROJECT,
                &base,
                vec![
                    ("src/f3.rs".into(), Some(b"changed\n".to_vec())),
                    ("src/new.rs".into(), Some(vec![b'y'; 100])),
                    ("src/f4.rs".into(), None),
                ],
                "next",
            )
            .await
            .unwrap();
        let full = svc.file_index(PROJECT, &next).await.unwrap();
        let known = source_objects::FileIndex {
            tree: String::new(),
            files: svc.file_index(PROJECT, &base).await.unwrap(),
        };
        assert_eq!(
            svc.file_index_knowing(PROJECT, &next, Some(Arc::new(known.clone())))
                .await
                .unwrap(),
            full
        );
        let size = |path: &str| full.iter().find(|f| f.path == path).map(|f| f.size);
        assert_eq!(
            (size("src/f3.rs"), size("src/new.rs"), size("src/f4.rs")),
            (Some(8), Some(100), None)
        );
        // A listed blob's size is taken from the index, not read again.
        let mut told = known;
        let f9 = told.files.iter_mut().find(|f| f.path == "src/f9.rs").unwrap();
        f9.size = 999;
        let index = svc
            .file_index_knowing(PROJECT, &next, Some(Arc::new(told)))
            .await
            .unwrap();
        assert_eq!(index.iter().find(|f| f.path == "src/f9.rs").unwrap().size, 999);
    }

    #[tokio::test]
    async fn two_changes_to_different_lines_merge_and_a_third_to_the_same_line_conflicts() {
        let (_d, svc) = service();
        let p = svc.provision(PROJECT).await.unwrap();
        let lines: String = (1..=20).map(|i| format!("line {i}\n")).collect();
        let base = svc
            .commit_files(
                PROJECT,
                &p.commit,
                vec![("notes.txt".into(), Some(lines.clone().into_bytes()))],
                "base",
            )
            .await
            .unwrap();
        let edit = |from: &str, to: &str| Some(lines.replace(from, to).into_bytes());
        let t1 = svc
            .commit_files(
                PROJECT,
                &base,
                vec![("notes.txt".into(), edit("line 2\n", "line two\n"))],
                "t1",
            )
            .await
            .unwrap();
        let t2 = svc
            .commit_files(
                PROJECT,
                &base,
                vec![
                    ("notes.txt".into(), edit("line 19\n", "line nineteen\n")),
                    ("new.txt".into(), Some(b"n\n".to_vec())),
                ],
                "t2",
            )
            .await
            .unwrap();
        let t3 = svc
            .commit_files(
                PROJECT,
                &base,
                vec![("notes.txt".into(), edit("line 2\n", "line deux\n"))],
                "t3",
            )
            .await
            .unwrap();

        let m = merged(
            svc.merge_into(PROJECT, &base, &[("t1".into(), t1.clone()), ("t2".into(), t2.clone())])
                .await
                .unwrap(),
        );
        let path = svc.repo_path(PROJECT).unwrap();
        let text = git(&path, &["show", &format!("{}:notes.txt", m.commit)]);
        assert!(
            text.contains("line two\n") && text.contains("line nineteen\n"),
            "{text}"
        );
        assert_eq!(
            git(&path, &["log", "--format=%s", &m.commit, "-2"]),
            "Merge t2\nMerge t1\n"
        );
        assert_eq!(
            git(&path, &["merge-tree", "--write-tree", &t1, &t2]).trim(),
            m.tree,
            "same tree as git's own merge"
        );

        let outcome = svc
            .merge_into(PROJECT, &base, &[("t1".into(), t1.clone()), ("t3".into(), t3)])
            .await
            .unwrap();
        assert_eq!(
            outcome,
            MergeOutcome::Conflict(Conflict {
                label: "t3".into(),
                paths: vec!["notes.txt".into()]
            })
        );

        let again = merged(svc.merge_into(PROJECT, &m.commit, &[("t1".into(), t1)]).await.unwrap());
        assert_eq!(again.commit, m.commit, "a tip already merged is skipped");
    }

    /// A path and its new kind and contents, or `None` to remove it.
    type Entry<'a> = (&'a str, Option<(EntryKind, &'a [u8])>);

    /// Writes a commit on `parent` with `entries` set or removed.
    fn commit_kinds(svc: &GitService, repo: &str, parent: &str, entries: &[Entry<'_>]) -> String {
        let r = open(svc.root(), repo).unwrap();
        let parent = parse_id(parent).unwrap();
        let tree = r.find_commit(parent).unwrap().tree_id().unwrap().detach();
        let mut editor = r.edit_tree(tree).unwrap();
        for (path, entry) in entries {
            match entry {
                Some((kind, data)) => {
                    let blob = r.write_blob(data).unwrap().detach();
                    editor.upsert(*path, *kind, blob).unwrap();
                }
                None => {
                    editor.remove(*path).unwrap();
                }
            }
        }
        let tree = editor.write().unwrap().detach();
        commit(&r, repo, "edit", tree, &[parent]).unwrap().to_string()
    }

    fn checkout(svc: &GitService, repo: &str, commit: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        git(
            dir.path(),
            &["clone", "--quiet", svc.repo_path(repo).unwrap().to_str().unwrap(), "w"],
        );
        git(&dir.path().join("w"), &["checkout", "--quiet", "--detach", commit]);
        dir
    }

    #[tokio::test]
    async fn a_text_diff_matches_git_diff_apart_from_function_names() {
        let (_d, svc) = service();
        let p = svc.provision(PROJECT).await.unwrap();
        let long: String = (1..=40).map(|i| format!("row {i}\n")).collect();
        let base = commit_kinds(
            &svc,
            PROJECT,
            &p.commit,
            &[
                ("z/deep/a.txt", Some((EntryKind::Blob, long.as_bytes()))),
                ("gone.txt", Some((EntryKind::Blob, b"bye\n"))),
                ("empty-gone", Some((EntryKind::Blob, b""))),
                ("tail.txt", Some((EntryKind::Blob, b"no newline"))),
                ("spaced name.txt", Some((EntryKind::Blob, b"1\n"))),
            ],
        );
        let edited = long
            .replace("row 3\n", "row three\n")
            .replace("row 30\n", "")
            .replace("row 40\n", "row 40\nrow 41\n");
        let new = commit_kinds(
            &svc,
            PROJECT,
            &base,
            &[
                ("z/deep/a.txt", Some((EntryKind::Blob, edited.as_bytes()))),
                ("gone.txt", None),
                ("empty-gone", None),
                ("empty-new", Some((EntryKind::Blob, b""))),
                ("tail.txt", Some((EntryKind::Blob, b"no newline\nstill none"))),
                ("b.txt", Some((EntryKind::Blob, b"added\n"))),
                ("spaced name.txt", Some((EntryKind::Blob, b"2\n"))),
                ("caf\u{e9}.txt", Some((EntryKind::Blob, b"accent\n"))),
            ],
        );
        let ours = svc.unified_diff(PROJECT, &base, &new).await.unwrap();
        let theirs = git(
            &svc.repo_path(PROJECT).unwrap(),
            &["diff", "--no-renames", "--full-index", &base, &new],
        );
        let strip = |s: &str| {
            s.lines()
                .map(|l| match l.strip_prefix("@@ ") {
                    // Drop git's function-name text after the closing `@@`.
                    Some(r) => format!("@@ {}@@", &r[..r.find("@@").unwrap()]),
                    None => l.to_owned(),
                })
                .collect::<Vec<_>>()
                .join("\n")
        };
        assert_eq!(strip(&ours), strip(&theirs));
    }

    #[tokio::test]
    async fn the_diff_from_base_to_a_composed_commit_applies_and_reproduces_its_tree() {
        let (_d, svc) = service();
        let p = svc.provision(PROJECT).await.unwrap();
        let png: Vec<u8> = (0..3000u32).map(|i| (i * 7 % 251) as u8).collect();
        let base = commit_kinds(
            &svc,
            PROJECT,
            &p.commit,
            &[
                ("src/lib.rs", Some((EntryKind::Blob, b"pub fn a() {}\n"))),
                ("logo.png", Some((EntryKind::Blob, &png))),
                ("run.sh", Some((EntryKind::Blob, b"#!/bin/sh\necho hi\n"))),
                ("old.bin", Some((EntryKind::Blob, b"\0\x01\x02"))),
                ("latin1.txt", Some((EntryKind::Blob, b"caf\xe9\n"))),
            ],
        );
        let mut png2 = png.clone();
        png2[100] ^= 0xff;
        let t1 = commit_kinds(
            &svc,
            PROJECT,
            &base,
            &[
                ("src/lib.rs", Some((EntryKind::Blob, b"pub fn a() {}\npub fn b() {}"))),
                ("logo.png", Some((EntryKind::Blob, &png2))),
                ("old.bin", None),
            ],
        );
        let t2 = commit_kinds(
            &svc,
            PROJECT,
            &base,
            &[
                ("run.sh", Some((EntryKind::BlobExecutable, b"#!/bin/sh\necho hi\n"))),
                ("link", Some((EntryKind::Link, b"src/lib.rs"))),
                ("new.bin", Some((EntryKind::Blob, b"\0\0\0new"))),
                ("latin1.txt", Some((EntryKind::Blob, b"caf\xe9 au lait\n"))),
                ("docs/guide.md", Some((EntryKind::Blob, b"# Guide\n"))),
            ],
        );
        let m = merged(
            svc.merge_into(PROJECT, &base, &[("t1".into(), t1), ("t2".into(), t2)])
                .await
                .unwrap(),
        );
        let patch = svc.unified_diff(PROJECT, &base, &m.commit).await.unwrap();
        assert!(
            patch.contains("GIT binary patch") && patch.contains("old mode 100644\nnew mode 100755"),
            "{patch}"
        );

        let dir = checkout(&svc, PROJECT, &base);
        let work = dir.path().join("w");
        std::fs::write(dir.path().join("p.patch"), &patch).unwrap();
        git(&work, &["apply", "--check", "../p.patch"]);
        git(&work, &["apply", "--index", "../p.patch"]);
        assert_eq!(git(&work, &["write-tree"]).trim(), m.tree);
    }

    #[tokio::test]
    async fn file_diffs_give_each_files_status_and_both_sides_line_numbers_as_git_does() {
        let (_d, svc) = service();
        let p = svc.provision(PROJECT).await.unwrap();
        let ten: String = (1..=10).map(|i| format!("line {i}\n")).collect();
        let moved = "export const name = \"a file long enough to be found again after its move\";\n";
        let base = commit_kinds(
            &svc,
            PROJECT,
            &p.commit,
            &[
                ("src/a.ts", Some((EntryKind::Blob, ten.as_bytes()))),
                ("old/name.ts", Some((EntryKind::Blob, moved.as_bytes()))),
                ("gone.txt", Some((EntryKind::Blob, b"bye\n"))),
                ("pic.bin", Some((EntryKind::Blob, b"\0\x01"))),
            ],
        );
        let changed = ten.replace("line 5\n", "line five\nline five and a half\n");
        let new = commit_kinds(
            &svc,
            PROJECT,
            &base,
            &[
                ("src/a.ts", Some((EntryKind::Blob, changed.as_bytes()))),
                ("old/name.ts", None),
                ("lib/name.ts", Some((EntryKind::Blob, moved.as_bytes()))),
                ("gone.txt", None),
                ("src/new.ts", Some((EntryKind::Blob, b"one\ntwo\n"))),
                ("pic.bin", Some((EntryKind::Blob, b"\0\x02"))),
            ],
        );
        let (files, truncated) = svc.file_diffs(PROJECT, &base, &new, DiffLimits::DEFAULT).await.unwrap();
        assert!(!truncated);
        let listed: Vec<_> = files
            .iter()
            .map(|f| (f.path.as_str(), f.status, f.old_path.as_deref()))
            .collect();
        assert_eq!(
            listed,
            vec![
                ("gone.txt", FileStatus::Deleted, None),
                ("lib/name.ts", FileStatus::Renamed, Some("old/name.ts")),
                ("pic.bin", FileStatus::Modified, None),
                ("src/a.ts", FileStatus::Modified, None),
                ("src/new.ts", FileStatus::Added, None),
            ]
        );
        let a = &files[3];
        assert_eq!((a.additions, a.deletions), (Some(2), Some(1)));
        let h = &a.hunks[0];
        let lines: Vec<_> = h
            .lines
            .iter()
            .map(|l| (l.kind, l.old_line, l.new_line, l.text.as_str()))
            .collect();
        assert_eq!(
            lines,
            vec![
                (LineKind::Context, Some(2), Some(2), "line 2"),
                (LineKind::Context, Some(3), Some(3), "line 3"),
                (LineKind::Context, Some(4), Some(4), "line 4"),
                (LineKind::Removed, Some(5), None, "line 5"),
                (LineKind::Added, None, Some(5), "line five"),
                (LineKind::Added, None, Some(6), "line five and a half"),
                (LineKind::Context, Some(6), Some(7), "line 6"),
                (LineKind::Context, Some(7), Some(8), "line 7"),
                (LineKind::Context, Some(8), Some(9), "line 8"),
            ]
        );
        assert!(files[2].binary && files[2].hunks.is_empty());
        assert!(files[1].hunks.is_empty(), "a pure rename has no lines");
        let added = &files[4].hunks[0];
        assert_eq!(
            added.lines.iter().map(|l| l.new_line).collect::<Vec<_>>(),
            vec![Some(1), Some(2)]
        );

        // Every hunk header is the one git writes for the same two commits.
        let headers = |f: &FileDiff| -> Vec<String> {
            let r = |s: u32, n: u32| if n == 1 { format!("{s}") } else { format!("{s},{n}") };
            f.hunks
                .iter()
                .map(|h| {
                    format!(
                        "@@ -{} +{} @@",
                        r(h.old_start, h.old_lines),
                        r(h.new_start, h.new_lines)
                    )
                })
                .collect()
        };
        let ours: Vec<String> = files.iter().flat_map(headers).collect();
        let theirs: Vec<String> = git(&svc.repo_path(PROJECT).unwrap(), &["diff", "-M", &base, &new])
            .lines()
            .filter(|l| l.starts_with("@@"))
            .map(|l| l.split(" @@").next().unwrap().to_owned() + " @@")
            .collect();
        assert_eq!(ours, theirs);

        // The bound: one file shown, the rest listed without lines.
        let limits = DiffLimits {
            max_files: 1,
            ..DiffLimits::DEFAULT
        };
        let (files, truncated) = svc.file_diffs(PROJECT, &base, &new, limits).await.unwrap();
        assert!(truncated);
        assert_eq!(files.len(), 5);
        assert!(!files[0].truncated && !files[0].hunks.is_empty());
        assert!(
            files[1..]
                .iter()
                .all(|f| f.truncated && f.hunks.is_empty() && f.additions.is_none())
        );
        let limits = DiffLimits {
            max_lines: 4,
            ..DiffLimits::DEFAULT
        };
        let (files, truncated) = svc.file_diffs(PROJECT, &base, &new, limits).await.unwrap();
        assert!(truncated);
        assert_eq!(files[0].hunks[0].lines.len(), 1, "gone.txt's one line");
        assert_eq!(files[3].hunks[0].lines.len(), 3, "src/a.ts cut at the bound");
        assert!(files[3].truncated && files[4].truncated && files[4].hunks.is_empty());

        assert!(svc.has_commit(PROJECT, &new).await.unwrap());
        assert!(!svc.has_commit("cand-0a1b2c", &new).await.unwrap());
    }

    #[tokio::test]
    async fn canonical_keeps_a_reflog_line_for_every_move_of_main() {
        let (d, svc) = service();
        let p = svc.provision(PROJECT).await.unwrap();
        let a = svc
            .commit_files(PROJECT, &p.commit, vec![("a".into(), Some(b"a\n".to_vec()))], "a")
            .await
            .unwrap();
        assert_eq!(svc.cas_main(PROJECT, &p.commit, &a).await.unwrap(), CasOutcome::Moved);
        let log =
            std::fs::read_to_string(d.path().join(format!("git/belay/{PROJECT}.git/logs/refs/heads/main"))).unwrap();
        let lines: Vec<&str> = log.lines().collect();
        assert_eq!(lines.len(), 2, "{log}");
        assert!(
            lines[0].starts_with(&format!("{} {}", "0".repeat(40), p.commit)),
            "{log}"
        );
        assert!(lines[1].starts_with(&format!("{} {a}", p.commit)), "{log}");
        assert!(lines[1].ends_with("\tbelay: fast-forward main"), "{log}");
    }

    #[tokio::test]
    async fn cas_moves_main_forward_only_from_the_expected_commit() {
        let (_d, svc) = service();
        let p = svc.provision(PROJECT).await.unwrap();
        let a = svc
            .commit_files(PROJECT, &p.commit, vec![("a".into(), Some(b"a\n".to_vec()))], "a")
            .await
            .unwrap();
        let b = svc
            .commit_files(PROJECT, &a, vec![("b".into(), Some(b"b\n".to_vec()))], "b")
            .await
            .unwrap();
        let side = svc
            .commit_files(PROJECT, &p.commit, vec![("s".into(), Some(b"s\n".to_vec()))], "side")
            .await
            .unwrap();

        assert_eq!(
            svc.cas_main(PROJECT, &a, &b).await.unwrap(),
            CasOutcome::Mismatch {
                actual: p.commit.clone()
            }
        );
        assert_eq!(
            svc.head(PROJECT).await.unwrap(),
            Some(p.commit.clone()),
            "a wrong expected value moves nothing"
        );
        assert_eq!(svc.cas_main(PROJECT, &p.commit, &a).await.unwrap(), CasOutcome::Moved);
        assert_eq!(
            svc.cas_main(PROJECT, &p.commit, &a).await.unwrap(),
            CasOutcome::AlreadyAt
        );
        assert!(matches!(
            svc.cas_main(PROJECT, &a, &side).await,
            Err(GitError::NotFastForward { .. })
        ));
        assert_eq!(svc.cas_main(PROJECT, &a, &b).await.unwrap(), CasOutcome::Moved);
        assert_eq!(svc.head(PROJECT).await.unwrap(), Some(b.clone()));
        assert!(svc.main_contains(PROJECT, &b).await.unwrap() && svc.main_contains(PROJECT, &a).await.unwrap());
        assert!(!svc.main_contains(PROJECT, &side).await.unwrap());
        let missing = "1".repeat(40);
        assert!(matches!(
            svc.cas_main(PROJECT, &a, &missing).await,
            Err(GitError::MissingCommit { .. })
        ));
    }

    #[tokio::test]
    async fn only_names_some_row_id_derives_reach_the_disk() {
        let (_d, svc) = service();
        for bad in ["..", "ws-1/../../x", "", "WS-1", "ws-1.git"] {
            assert!(
                matches!(svc.delete_repo(bad).await, Err(GitError::InvalidName(_))),
                "{bad}"
            );
        }
        assert!(matches!(svc.head("ws-1").await, Err(GitError::NotFound(_))));
    }
}

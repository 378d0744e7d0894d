//! What Candidate verification asks of a composed commit: its tree, and the paths it changes
//! against a base (the plan's UI-file and authorization rules, client-assets, compatibility).

use super::{GitService, GixContext, Result, file_index, open, parse_id, require_commit};
use std::collections::BTreeMap;

impl GitService {
    /// The tree id of `commit` in `repo`.
    pub async fn tree_of(&self, repo: &str, commit: &str) -> Result<String> {
        let (repo, commit) = (repo.to_owned(), commit.to_owned());
        self.blocking(move |root| {
            let r = open(root, &repo)?;
            let id = parse_id(&commit)?;
            require_commit(&r, &repo, id)?;
            Ok(r.find_commit(id)
                .gix("read commit", &repo)?
                .tree_id()
                .gix("read commit", &repo)?
                .detach()
                .to_string())
        })
        .await
    }

    /// Every path whose contents differ between `old` and `new` (added, changed or deleted),
    /// sorted.
    pub async fn changed_paths(&self, repo: &str, old: &str, new: &str) -> Result<Vec<String>> {
        let (repo, old, new) = (repo.to_owned(), old.to_owned(), new.to_owned());
        self.blocking(move |root| {
            let a: BTreeMap<String, String> = file_index(root, &repo, &old, &Default::default())?
                .into_iter()
                .map(|f| (f.path, f.blob))
                .collect();
            let b: BTreeMap<String, String> = file_index(root, &repo, &new, &Default::default())?
                .into_iter()
                .map(|f| (f.path, f.blob))
                .collect();
            let mut out: Vec<String> = b
                .iter()
                .filter(|(p, blob)| a.get(*p) != Some(blob))
                .map(|(p, _)| p.clone())
                .chain(a.keys().filter(|p| !b.contains_key(*p)).cloned())
                .collect();
            out.sort();
            Ok(out)
        })
        .await
    }
}

//! What a replica's upstream holds: for a replica that follows one peer (a node and its
//! hub), per document, this replica's digest of the document when the upstream was last
//! known to hold all of it (table `upstream`, migration 3). A document whose digest is
//! not the one recorded has changes the upstream has not confirmed: that count is
//! [`DocumentStore::pending_upstream`], and it survives restarts because it is on disk.
//!
//! Only a session configured to follow its peer (`SessionConfig::follow_upstream`)
//! records anything, from what the peer tells it: an equal root or equal buckets, equal
//! entries, documents it sent whole, and the heads in its Automerge sync messages. Each
//! record compares with this replica's digest under the same lock, so a local edit made
//! meanwhile is never recorded as confirmed. Documents still unverified are not counted.
//! A record is derived data, committed with `synchronous=NORMAL`: one lost after a power
//! cut makes a document count as pending until the next session confirms it again.

use super::*;

/// Inserts or refreshes rows of `upstream` from `SELECT doc_id, digest …` (`source`,
/// with `?1` bound to `arg`), writing only rows that change.
fn record_from(tx: &Transaction<'_>, source: &str, arg: Option<i64>) -> Result<(), StoreError> {
    let sql = format!(
        "INSERT INTO upstream (doc_id, digest) SELECT id, digest FROM ({source}) WHERE true
         ON CONFLICT(doc_id) DO UPDATE SET digest = excluded.digest
         WHERE upstream.digest IS NOT excluded.digest"
    );
    match arg {
        Some(a) => tx.execute(&sql, [a])?,
        None => tx.execute(&sql, [])?,
    };
    Ok(())
}

/// Verified documents whose recorded digest is not their own (all, or of bucket `?1`).
const UNCONFIRMED: &str = "SELECT d.id AS id, d.digest AS digest FROM documents d
     LEFT JOIN upstream u ON u.doc_id = d.id
     WHERE d.unverified_from IS NULL AND u.digest IS NOT d.digest";

impl DocumentStore {
    /// How many documents hold changes the upstream has not confirmed holding.
    pub fn pending_upstream_blocking(&self) -> Result<u64, StoreError> {
        let inner = self.lock();
        let n: i64 =
            inner
                .conn
                .query_row(&format!("SELECT count(*) FROM ({UNCONFIRMED})"), [], |r| {
                    r.get(0)
                })?;
        Ok(n as u64)
    }

    /// [`Self::pending_upstream_blocking`] off the async threads.
    pub async fn pending_upstream(&self) -> Result<u64, StoreError> {
        self.blocking(|s| s.pending_upstream_blocking()).await
    }

    /// The upstream's root digest is `root`: if this replica's is too, the upstream
    /// holds every document as it is here.
    pub async fn confirm_upstream_root(&self, root: Digest) -> Result<(), StoreError> {
        self.blocking(move |s| {
            let mut inner = s.lock();
            let tx = begin(&mut inner.conn, Durability::Normal)?;
            let mut buckets = vec![EMPTY; BUCKETS];
            {
                let mut stmt = tx.prepare_cached("SELECT bucket, digest FROM buckets")?;
                let mut rows = stmt.query([])?;
                while let Some(r) = rows.next()? {
                    let b: i64 = r.get(0)?;
                    if let Some(slot) = buckets.get_mut(b as usize) {
                        *slot = digest_from_sql(r.get(1)?);
                    }
                }
            }
            let ours = root_digest(&buckets);
            if ours == root {
                // Digests only ever move forward (they hash heads), so a root equal to
                // the one every row was recorded at means no row can be stale.
                let recorded: Option<Vec<u8>> = tx
                    .query_row("SELECT root FROM upstream_root WHERE one = 0", [], |r| {
                        r.get(0)
                    })
                    .optional()?;
                if recorded.as_deref() != Some(&ours[..]) {
                    record_from(&tx, UNCONFIRMED, None)?;
                    // Unverified documents are not recorded yet: only a root at which
                    // every document was recorded may skip the scan next time.
                    let waiting: bool = tx.query_row(
                        "SELECT EXISTS(SELECT 1 FROM documents WHERE unverified_from IS NOT NULL)",
                        [],
                        |r| r.get(0),
                    )?;
                    if !waiting {
                        tx.execute(
                            "INSERT INTO upstream_root (one, root) VALUES (0, ?1)
                             ON CONFLICT(one) DO UPDATE SET root = excluded.root",
                            [&ours[..]],
                        )?;
                    }
                }
            }
            tx.commit()?;
            Ok(())
        })
        .await
    }

    /// The upstream's bucket digests are `digests`: in every bucket where this
    /// replica's digest is the same, the upstream holds each document as it is here.
    pub async fn confirm_upstream_buckets(&self, digests: Vec<Digest>) -> Result<(), StoreError> {
        self.blocking(move |s| {
            let mut inner = s.lock();
            let tx = begin(&mut inner.conn, Durability::Normal)?;
            let equal: Vec<i64> = {
                let mut stmt = tx.prepare_cached("SELECT bucket, digest FROM buckets")?;
                let rows = stmt.query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get(1)?)))?;
                let mut equal = Vec::new();
                for row in rows {
                    let (b, d) = row?;
                    if digests.get(b as usize) == Some(&digest_from_sql(d)) {
                        equal.push(b);
                    }
                }
                equal
            };
            let in_bucket = format!("{UNCONFIRMED} AND d.bucket = ?1");
            for b in equal {
                record_from(&tx, &in_bucket, Some(b))?;
            }
            tx.commit()?;
            Ok(())
        })
        .await
    }

    /// The upstream holds these documents at these digests: each whose digest here is
    /// the same is confirmed (a document received whole and still unverified too: its
    /// digest is the claimed one until the verifier recomputes it from content).
    pub async fn confirm_upstream_digests(
        &self,
        docs: Vec<(DocId, Digest)>,
    ) -> Result<(), StoreError> {
        if docs.is_empty() {
            return Ok(());
        }
        self.blocking(move |s| {
            let mut inner = s.lock();
            let tx = begin(&mut inner.conn, Durability::Normal)?;
            {
                let mut stmt = tx.prepare_cached(
                    "INSERT INTO upstream (doc_id, digest)
                     SELECT id, digest FROM documents
                     WHERE id = ?1 AND digest = ?2
                     ON CONFLICT(doc_id) DO UPDATE SET digest = excluded.digest
                     WHERE upstream.digest IS NOT excluded.digest",
                )?;
                for (id, digest) in &docs {
                    stmt.execute(params![&id.0[..], &digest[..]])?;
                }
            }
            tx.commit()?;
            Ok(())
        })
        .await
    }

    /// The upstream's heads of document `id` are `theirs`: if they include every head
    /// of this replica's, the upstream holds all of it.
    pub async fn confirm_upstream_heads(
        &self,
        id: DocId,
        theirs: Vec<[u8; 32]>,
    ) -> Result<(), StoreError> {
        self.blocking(move |s| {
            let mut inner = s.lock();
            // (heads, digest, recorded digest)
            type Row = (Vec<u8>, Vec<u8>, Option<Vec<u8>>);
            let row: Option<Row> = inner
                .conn
                .query_row(
                    "SELECT d.heads, d.digest, u.digest FROM documents d
                     LEFT JOIN upstream u ON u.doc_id = d.id
                     WHERE d.id = ?1 AND d.unverified_from IS NULL",
                    [&id.0[..]],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                )
                .optional()?;
            let Some((heads, digest, recorded)) = row else {
                return Ok(());
            };
            let covered = heads_from_bytes(&heads).iter().all(|h| theirs.contains(h));
            if !covered || recorded.as_deref() == Some(&digest[..]) {
                return Ok(());
            }
            let tx = begin(&mut inner.conn, Durability::Normal)?;
            tx.execute(
                "INSERT INTO upstream (doc_id, digest) VALUES (?1, ?2)
                 ON CONFLICT(doc_id) DO UPDATE SET digest = excluded.digest",
                params![&id.0[..], digest],
            )?;
            tx.commit()?;
            Ok(())
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entity::{Note, NotePatch, TextEdit};

    fn note(store: &DocumentStore, title: &str) -> DocId {
        store
            .create_blocking(Note {
                title: title.into(),
                ..Note::default()
            })
            .expect("create")
            .id
    }

    fn digest_of(store: &DocumentStore, id: DocId) -> Digest {
        doc_digest(&id, &store.heads_blocking(id).expect("heads"))
    }

    #[tokio::test]
    async fn every_way_of_confirming_covers_only_what_the_upstream_holds() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = DocumentStore::open(dir.path().join("a.db")).expect("open");
        let a = note(&store, "a");
        let b = note(&store, "b");
        assert_eq!(store.pending_upstream().await.expect("pending"), 2);

        // Equal digests confirm; a different one does not.
        store
            .confirm_upstream_digests(vec![(a, digest_of(&store, a)), (b, [9; 16])])
            .await
            .expect("digests");
        assert_eq!(store.pending_upstream().await.expect("pending"), 1);

        // Heads that include ours confirm; heads that lack one of ours do not.
        let heads = store.heads_blocking(b).expect("heads");
        store
            .confirm_upstream_heads(b, vec![[1; 32]])
            .await
            .expect("heads");
        assert_eq!(store.pending_upstream().await.expect("pending"), 1);
        let mut more = heads.clone();
        more.push([1; 32]);
        store.confirm_upstream_heads(b, more).await.expect("heads");
        assert_eq!(store.pending_upstream().await.expect("pending"), 0);

        // A local edit is pending again, and a root or buckets from before it confirm
        // nothing; the current ones confirm it.
        let before = store.summary().await.expect("summary");
        store
            .update_blocking(
                a,
                NotePatch {
                    title: Some(TextEdit::Replace("a2".into())),
                    ..NotePatch::default()
                },
            )
            .expect("edit");
        assert_eq!(store.pending_upstream().await.expect("pending"), 1);
        store
            .confirm_upstream_root(before.root)
            .await
            .expect("root");
        store
            .confirm_upstream_buckets(before.buckets.clone())
            .await
            .expect("buckets");
        assert_eq!(store.pending_upstream().await.expect("pending"), 1);
        let now = store.summary().await.expect("summary");
        store
            .confirm_upstream_buckets(now.buckets)
            .await
            .expect("buckets");
        assert_eq!(store.pending_upstream().await.expect("pending"), 0);
        note(&store, "c");
        let now = store.summary().await.expect("summary");
        store.confirm_upstream_root(now.root).await.expect("root");
        assert_eq!(store.pending_upstream().await.expect("pending"), 0);

        // On disk: a reopened store counts the same.
        note(&store, "d");
        drop(store);
        let store = DocumentStore::open(dir.path().join("a.db")).expect("reopen");
        assert_eq!(store.pending_upstream().await.expect("pending"), 1);
    }

    #[tokio::test]
    async fn a_root_recorded_before_skips_the_scan_and_never_hides_a_change() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = DocumentStore::open(dir.path().join("a.db")).expect("open");
        note(&store, "a");
        let first = store.summary().await.expect("summary");
        store.confirm_upstream_root(first.root).await.expect("root");
        assert_eq!(store.pending_upstream().await.expect("pending"), 0);
        let recorded = |store: &DocumentStore| -> Option<Vec<u8>> {
            let inner = store.lock();
            inner
                .conn
                .query_row("SELECT root FROM upstream_root", [], |r| r.get(0))
                .optional()
                .expect("read")
        };
        assert_eq!(recorded(&store).as_deref(), Some(&first.root[..]));

        // Rows lost behind the store's back (as after a restore) show the skip: the
        // recorded root answers for them until the root moves.
        store
            .lock()
            .conn
            .execute("DELETE FROM upstream", [])
            .expect("delete");
        store.confirm_upstream_root(first.root).await.expect("root");
        assert_eq!(store.pending_upstream().await.expect("pending"), 1);

        // A change moves the root: the old root confirms nothing, the new one scans
        // and records everything again.
        note(&store, "b");
        store.confirm_upstream_root(first.root).await.expect("root");
        assert_eq!(store.pending_upstream().await.expect("pending"), 2);
        let second = store.summary().await.expect("summary");
        store
            .confirm_upstream_root(second.root)
            .await
            .expect("root");
        assert_eq!(store.pending_upstream().await.expect("pending"), 0);
        assert_eq!(recorded(&store).as_deref(), Some(&second.root[..]));
    }
}
